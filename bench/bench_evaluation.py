"""Evaluation benchmark (issue: evaluation harness): naive RAG vs the DeepSearcher pipeline vs the DeepSearch
agent on the Simpsons QA set (or any multi-hop corpus in the public format), and the issue's goals:

* the pipeline beats naive RAG on multi-hop Recall@5 by at least 15 points, at no more than 4x its wall time;
* zero pipeline failures over the question set, for every strategy.

Runs resume: rows already in ``--out``/results.jsonl are not run again, so a long run can be
stopped and continued.  With the 1.5B model a pipeline run takes minutes per question on 2 cores:
use ``--limit`` for a first look (questions are taken one of each type in turn) or ``--types multi_hop``.

Usage: python bench/bench_evaluation.py [--fast] [--limit N] [--strategies naive,deepsearcher:1,...]
       [--questions data/qa/simpsons_qa.jsonl] [--corpus data/collections.json] [--out DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common import BENCH_OUT, bench_config, table

from helpers.evaluation.harness import QUESTION_TYPES, load_questions, prepare_corpus, run_evaluation, sample_by_type

STRATEGIES = "naive,deepsearcher:1,deepsearcher:2,deepsearcher:3,deepsearch:8000,deepsearch:20000"


def goal_lines(summary: dict) -> list[str]:
    lines = []
    naive = summary.get("naive")
    for spec, entry in summary.items():
        if not spec.startswith("deepsearcher") or naive is None:
            continue
        ours, base = entry.get("recall@5 multi_hop"), naive.get("recall@5 multi_hop")
        if ours is None or base is None:
            lines.append(f"{spec}: no multi-hop questions in this run")
            continue
        gain, ratio = 100 * (ours - base), entry["seconds"] / max(naive["seconds"], 1e-9)
        verdict = "met" if gain >= 15 and ratio <= 4 else "NOT met"
        lines.append(f"{spec}: multi-hop Recall@5 {ours:.2f} vs naive {base:.2f} ({gain:+.0f} points; goal +15), "
                     f"time {ratio:.1f}x naive (goal <= 4x): {verdict}")
    failures = {spec: entry["failures"] for spec, entry in summary.items()}
    verdict = "met" if not any(failures.values()) else "NOT met"
    lines.append(f"pipeline failures per strategy {failures} (goal: all zero): {verdict}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="the 0.5B model instead of the 1.5B default")
    parser.add_argument("--limit", type=int, help="at most N questions, one of each type in turn")
    parser.add_argument("--types", help=f"only these question types, comma-separated ({','.join(QUESTION_TYPES)})")
    parser.add_argument("--strategies", default=STRATEGIES)
    parser.add_argument("--questions", default="data/qa/simpsons_qa.jsonl")
    parser.add_argument("--corpus", default="data/collections.json",
                        help="a collections manifest, or a JSON list of {title, text} paragraphs")
    parser.add_argument("--out", help="results folder (default outputs/bench/evaluation/<model>/<questions>)")
    parser.add_argument("--judge", action="store_true", help="also ask the LLM judge (one more call per row)")
    parser.add_argument("--workers", type=int, default=1,
                        help="questions at once against a model server (DSL_PROVIDER=openai or ollama)")
    args = parser.parse_args()

    model = bench_config(fast=args.fast).llm.model
    out = Path(args.out) if args.out else BENCH_OUT / "evaluation" / model / Path(args.questions).stem
    config = bench_config(fast=args.fast, **{"vector_db.uri": str(out.resolve() / "milvus.db")})  # its own corpus
    prepare_corpus(config.resolve_path(args.corpus), config)
    questions = sample_by_type(load_questions(config.resolve_path(args.questions)), args.limit,
                               args.types.split(",") if args.types else None)
    strategies = args.strategies.split(",")
    summary = run_evaluation(questions, strategies, config, out, ks=(2, 5), judge=args.judge, workers=args.workers)

    columns = ["questions", "failures", "recall@2", "recall@5", "recall@5 multi_hop", "em", "f1", "contains",
               "calls", "prompt_tokens", "completion_tokens", "seconds"]
    print(f"\n== {len(questions)} question(s), {config.llm.model}; rows in {out} ==")
    print(table([{"strategy": spec, **{c: entry.get(c) for c in columns}} for spec, entry in summary.items()]))
    print("\n== goals ==")
    print("\n".join(goal_lines(summary)))
    print(f"\nOne question moves a mean by {1 / max(len(questions), 1):.2f}. EM and F1 score the short answer as the "
          "field does; 'contains' (the gold answer or an alias appears in it) is the lenient column.")


if __name__ == "__main__":
    main()
