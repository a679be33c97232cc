"""The Simpsons demo (the README's main command): ingest the knowledge base if
needed, ask "How have The Simpsons changed over time?" with the DeepSearcher
pipeline, and write the report, the trace, a plot of time and tokens per step,
and the usage table."""
from __future__ import annotations

import time
from pathlib import Path

from helpers.config import Config
from helpers.evaluation.plots import plot_steps
from helpers.knowledge.ingest import ingest_manifest
from helpers.lab.display import step_line
from helpers.prompts import PromptSet
from helpers.results import Result, on_each_step
from helpers.strategies.pipeline import run_pipeline
from helpers.strategies.run_log import run_log

DEMO_QUESTION = "How have The Simpsons changed over time?"
# the seed blog's reference run (DeepSeek-R1 on SambaNova), for comparison
SEED_RUN = {"calls": 65, "prompt_tokens": 25_000, "completion_tokens": 22_000}


def run_demo(config: Config, out: str | Path = "outputs/simpsons", question: str = DEMO_QUESTION,
             quiet: bool = False, prompts: PromptSet | None = None) -> Result:
    """Run the demo, printing each step as it ends (what it did and its seconds); ``quiet`` prints
    the log once the run is over instead.  ``prompts``: edited prompts (e.g. a notebook's saved set)."""
    out_dir = config.resolve_path(str(out))
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"Knowledge base: {config.resolve_path(config.vector_db.uri)}")
    for report in ingest_manifest(config):
        print("  " + report.summary().replace("\n", "\n  "))
    print(f"\nModel: {config.llm.model} ({config.llm.provider}); question: {question}")
    if prompts is not None and prompts.edited:
        print("Edited prompts: " + ", ".join(prompts.version(name) for name in prompts.edited))
    print()
    started = time.perf_counter()
    if quiet:
        result = run_pipeline(question, config, prompts=prompts)
    else:
        print("What the search does, step by step:")
        with on_each_step(lambda step: print("  " + step_line(step), flush=True)):
            result = run_pipeline(question, config, prompts=prompts)
        print()
    (out_dir / "report.md").write_text(result.report_markdown())
    result.save(out_dir / "trace.json")
    plot_steps(result, out_dir / "steps.png")
    if quiet:
        print("What the search did:\n  " + "\n  ".join(run_log(result.trace)) + "\n")
    print(result.report_markdown())
    print(result.usage.table())
    print(f"\nwall time {time.perf_counter() - started:.0f} s; the seed blog's run used "
          f"{SEED_RUN['calls']} calls, ~{SEED_RUN['prompt_tokens']:,} prompt and "
          f"~{SEED_RUN['completion_tokens']:,} completion tokens (DeepSeek-R1).")
    cited = len(result.cited_sources)
    print(f"{cited} of {len(result.sources)} sources cited. Written: {out_dir}/report.md, trace.json, steps.png")
    if result.error:
        raise SystemExit(f"error: {result.error}")
    return result
