"""Benchmark the DeepSearch agent on the Simpsons knowledge base.

    python bench/bench_agent.py                 # the default 1.5B model
    python bench/bench_agent.py --fast          # the 0.5B model and DSL_FAST budgets
    python bench/bench_agent.py --questions 5   # also the first 5 questions of data/qa/simpsons_qa.jsonl

Ingests the knowledge base into its own Milvus Lite directory
(``outputs/bench/milvus.db``) when needed, runs the agent and prints steps,
calls, tokens, wall time and whether beast mode was needed.  Not part of the
test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from statistics import mean

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.config import FAST_OVERRIDES, load_config  # noqa: E402
from helpers.evaluation.harness import EvalQuestion, load_questions, score  # noqa: E402
from helpers.results import Result  # noqa: E402
from helpers.strategies.agent import run_agent  # noqa: E402

MAIN_QUESTION = "How have The Simpsons changed over time?"
QA_FILE = ROOT / "data" / "qa" / "simpsons_qa.jsonl"
BENCH_DB = "outputs/bench/milvus.db"


def describe(result: Result) -> dict:
    """The figures printed for one run."""
    return {"steps": result.settings["steps"], "calls": result.usage.calls,
            "prompt_tokens": result.usage.prompt_tokens, "completion_tokens": result.usage.completion_tokens,
            "wall_s": round(result.seconds, 1), "beast_mode": result.settings["beast_mode"],
            "finish": result.settings["finish"], "cited_sources": len(result.cited_sources)}


def scored(result: Result, question: EvalQuestion) -> dict:
    """EM and F1 of the run's short answer, scored as the harness scores every strategy."""
    answer_score = score(result.short_answer or result.answer, question)
    return {"em": answer_score.em, "f1": round(answer_score.f1, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help="the 0.5B model and small budgets (DSL_FAST)")
    parser.add_argument("--questions", type=int, default=0, help="also run the first N questions of the QA set")
    parser.add_argument("--budget", type=int, help="override agent.token_budget")
    parser.add_argument("--save", help="save the main question's full trace as JSON to this file")
    args = parser.parse_args(argv)

    overrides = {**(FAST_OVERRIDES if args.fast else {}), "vector_db.uri": BENCH_DB}
    if args.budget:
        overrides["agent.token_budget"] = args.budget
    config = load_config(overrides=overrides)
    print(f"model {config.llm.model}, context {config.llm.context_size}, token budget "
          f"{config.agent.token_budget}, max steps {config.agent.max_steps}")

    from helpers.knowledge.ingest import ingest_manifest
    started = time.perf_counter()
    reports = ingest_manifest(config, progress=False)
    added = sum(r.chunks_added for r in reports)
    print(f"knowledge base ready in {time.perf_counter() - started:.1f}s ({added} chunks added)")

    result = run_agent(MAIN_QUESTION, config)
    print(f"\n# {MAIN_QUESTION}\n")
    print(result.answer)
    print()
    for source in result.sources:
        print(f"  [{source.number}] {source.title} ({source.collection}){'' if source.cited else ' - not cited'}")
    print()
    print(result.usage.table())
    print(json.dumps(describe(result)))
    if args.save:
        result.save(args.save)

    if args.questions:
        rows = []
        for question in load_questions(QA_FILE)[: args.questions]:
            run = run_agent(question.question, config)
            row = {"id": question.id, **describe(run), **scored(run, question)}
            rows.append(row)
            print(json.dumps(row))
        beast = sum(1 for row in rows if row["beast_mode"])
        print(f"\nbeast mode needed in {beast} of {len(rows)} question(s); EM {mean(r['em'] for r in rows):.2f}, "
              f"F1 {mean(r['f1'] for r in rows):.2f}; mean wall time {mean(r['wall_s'] for r in rows):.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
