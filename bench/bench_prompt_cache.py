"""Prompt prefix reuse (``llm.prompt_cache_mb``, ``helpers.models.prompt_cache``): the same strategies
on the same 2WikiMultiHopQA dev questions with the cache off and on, interleaved question by question
in one process (two copies of the model loaded), so the ratio is measured in the same run.

Prints per strategy: seconds per question off / on and their ratio, prompt tokens (the same: the cache
changes what is computed, not what is sent), and how many questions gave the same answer and the same
retrieved titles (the reused state is the one a fresh read would build, up to floating-point order).
Figures are printed, never asserted.

Usage: python bench/bench_prompt_cache.py [--limit 8] [--strategies chain,deepsearcher:1] [--fast]
"""
from __future__ import annotations

import argparse
import statistics

from common import BENCH_OUT, bench_config, table

from helpers.config import with_overrides
from helpers.evaluation.harness import BENCHMARKS, evaluate_one, load_questions, prepare_corpus, sample_by_type
from helpers.models.backend import cpu_name

SETTINGS = {"off": 0, "on": 1024}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=8, help="questions, the four types in turn (default 8)")
    parser.add_argument("--strategies", default="chain,deepsearcher:1")
    parser.add_argument("--fast", action="store_true", help="the 0.5B model")
    args = parser.parse_args()

    model = bench_config(fast=args.fast).llm.model
    config = bench_config(fast=args.fast, **{"vector_db.uri": str(BENCH_OUT / "multihop" / model / "milvus.db")})
    corpus, questions_file = BENCHMARKS["2wiki"]
    questions = sample_by_type(load_questions(questions_file), args.limit)
    prepare_corpus(corpus, config)
    configs = {name: with_overrides(config, {"llm.prompt_cache_mb": mb}) for name, mb in SETTINGS.items()}
    rows: dict[tuple[str, str], list[dict]] = {}
    for number, question in enumerate(questions, start=1):
        for spec in args.strategies.split(","):
            for name, run_config in configs.items():
                row = evaluate_one(question, spec, run_config, [2, 5], judge=False)
                rows.setdefault((spec, name), []).append(row)
                print(f"{number}/{len(questions)} {spec} cache {name}: {row['seconds']:.1f} s, "
                      f"{row['calls']} calls, {row['prompt_tokens']} prompt tokens", flush=True)

    summary = []
    for spec in args.strategies.split(","):
        off, on = rows[(spec, "off")], rows[(spec, "on")]
        seconds = {name: statistics.mean(r["seconds"] for r in rows[(spec, name)]) for name in SETTINGS}
        summary.append({
            "strategy": spec, "questions": len(off),
            "s/question off": seconds["off"], "s/question on": seconds["on"],
            "on/off": seconds["on"] / max(seconds["off"], 1e-9),
            "prompt tok off": statistics.mean(r["prompt_tokens"] for r in off),
            "prompt tok on": statistics.mean(r["prompt_tokens"] for r in on),
            "same answer": sum(a["answer"] == b["answer"] for a, b in zip(off, on)),
            "same titles": sum(a["retrieved"] == b["retrieved"] for a, b in zip(off, on)),
            "R@5 off": statistics.mean(r["recall@5"] for r in off),
            "R@5 on": statistics.mean(r["recall@5"] for r in on),
        })
    print(f"\n== prompt cache off vs on, {len(questions)} 2Wiki dev question(s), {model}, {cpu_name()} ==")
    print(table(summary))


if __name__ == "__main__":
    main()
