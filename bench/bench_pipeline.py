"""DeepSearcher pipeline benchmark (issue: pipeline).

With the model already loaded, on the Simpsons demo question: wall time, LLM
calls, prompt and completion tokens for the DeepSearcher pipeline and for the
naive baseline, in the same run, and which of the four themes the report covers
(goals: <= 20 calls, <= 15k prompt tokens, < 6 minutes; all four themes).

Theme coverage is a keyword check on the report text, a rough proxy: read the
report (written to outputs/bench/) before trusting it.

Usage: python bench/bench_pipeline.py [--fast]
"""
from __future__ import annotations

import argparse
import re

from common import BENCH_OUT, bench_config, table

from helpers.demo import DEMO_QUESTION, SEED_RUN
from helpers.knowledge.ingest import ingest_manifest
from helpers.models.llm import get_backend
from helpers.strategies.naive import run_naive
from helpers.strategies.pipeline import run_pipeline

THEMES = {
    "humour/storytelling": r"humou?r|storytell|joke|satir|golden age|episode plots?|zombie simpsons|jerkass",
    "characters/cast": r"character|voice|cast|actor|actress|azaria|castellaneta|apu",
    "animation/production": r"animation|animators?\b|digital|high.definition|\bhd\b|widescreen|studio|showrunner|production",
    "reception/audience/distribution": r"rating|audience|viewer|award|emmy|critic|streaming|disney\+|syndicat|reception",
}


def themes_covered(text: str) -> dict[str, bool]:
    return {theme: bool(re.search(pattern, text, re.IGNORECASE)) for theme, pattern in THEMES.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="the 0.5B model")
    args = parser.parse_args()
    config = bench_config(fast=args.fast)
    ingest_manifest(config, progress=False)
    get_backend(config.llm)  # load the model before timing
    rows = []
    for name, run in (("naive", run_naive), ("deepsearcher", run_pipeline)):
        result = run(DEMO_QUESTION, config)
        (BENCH_OUT / f"report_{name}.md").write_text(result.report_markdown())
        result.save(BENCH_OUT / f"trace_{name}.json")
        covered = themes_covered(result.answer)
        rows.append({"strategy": name, "model": config.llm.model, "seconds": result.seconds,
                     "calls": result.usage.calls, "prompt tok": result.usage.prompt_tokens,
                     "completion tok": result.usage.completion_tokens,
                     "cited/sources": f"{len(result.cited_sources)}/{len(result.sources)}",
                     "themes": f"{sum(covered.values())}/4", "failed": result.failed})
        if name == "deepsearcher":
            print(result.usage.table())
            print("themes:", covered)
    print(table(rows))
    print(f"\ngoals for deepsearcher: <= 20 calls, <= 15000 prompt tokens, < 360 s, 4/4 themes. "
          f"Seed blog run: {SEED_RUN['calls']} calls, ~{SEED_RUN['prompt_tokens']} prompt, "
          f"~{SEED_RUN['completion_tokens']} completion tokens. Reports and traces: {BENCH_OUT}/report_*.md, trace_*.json")


if __name__ == "__main__":
    main()
