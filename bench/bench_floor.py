"""Speed against the model's own floor (issue 45): how close each strategy runs to what the model
alone must spend on its tokens, on the machine it runs on.

First the raw speeds of the loaded model (same GGUF, threads and context as the runs): prompt
tokens per second (a ~600-token prompt, evaluated from scratch) and generated tokens per second
(unconstrained, greedy).  Then the demo pipeline, one chain question (2WikiMultiHopQA) and one agent
question, each with: wall time, the model's time (the usage ledger), the floor (prompt tokens /
prompt speed + completion tokens / generation speed, as if no prompt prefix were reused), the ratio
wall / floor, and the time spent outside the model (embedding, Milvus, Python, JSON repair).
Goal printed (never asserted): the demo pipeline <= 120 s and <= 1.3x its floor on 2 AVX2 cores.

With ``--out DIR``, the rows (one per run, plus the raw speeds, each with ``run_stamp``: commit,
CPU, date, model) go to ``DIR/floor.jsonl`` and what was printed to ``DIR/table.txt``.

Usage: python bench/bench_floor.py [--fast] [--skip agent,chain] [--out bench/results/floor_<cpu>]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import BENCH_OUT, bench_config, table

from helpers.demo import DEMO_QUESTION
from helpers.evaluation.harness import BENCHMARKS, load_questions, prepare_corpus, run_stamp
from helpers.knowledge.ingest import ingest_manifest
from helpers.models.backend import cpu_name
from helpers.models.llm import get_backend
from helpers.results import Result
from helpers.strategies.agent import run_agent
from helpers.strategies.chain import run_chain
from helpers.strategies.pipeline import run_pipeline

AGENT_QUESTION = "Who was the showrunner when The Simpsons broadcast its 500th episode?"
FILLER = ("The Simpsons is an American animated sitcom created by Matt Groening for the Fox Broadcasting Company. "
          "It satirises American life through the Simpson family of Springfield. ")


def raw_speeds(llama) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of a loaded llama-cpp model, without any prompt reuse."""
    cache = getattr(llama, "cache", None)
    llama.set_cache(None)
    try:
        prompt = FILLER * 20 + "\nCount from 1 to 300, separated by commas:"
        tokens = llama.tokenize(prompt.encode())
        llama.reset()
        started = time.perf_counter()
        llama.eval(tokens)
        prompt_speed = len(tokens) / (time.perf_counter() - started)
        llama.reset()
        started = time.perf_counter()
        out = llama.create_completion(prompt, max_tokens=160, temperature=0.0)
        total = time.perf_counter() - started
        generated = out["usage"]["completion_tokens"]
        generation_speed = max(generated - 1, 1) / max(total - len(tokens) / prompt_speed, 1e-6)
    finally:
        llama.set_cache(cache)
        llama.reset()
    return prompt_speed, generation_speed


def floor_row(name: str, result: Result, wall: float, speeds: tuple[float, float]) -> dict:
    usage = result.usage
    floor = usage.prompt_tokens / speeds[0] + usage.completion_tokens / speeds[1]
    return {"run": name, "wall s": wall, "model s": usage.seconds, "outside model s": wall - usage.seconds,
            "calls": usage.calls, "prompt tok": usage.prompt_tokens, "completion tok": usage.completion_tokens,
            "floor s": floor, "wall / floor": wall / max(floor, 1e-6), "error": result.error or ""}


def timed(run, *args, **kwargs) -> tuple[Result, float]:
    started = time.perf_counter()
    result = run(*args, **kwargs)
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true", help="the 0.5B model")
    parser.add_argument("--skip", default="", help="comma-separated runs to leave out: pipeline, chain, agent")
    parser.add_argument("--out", help="a folder to keep the rows (floor.jsonl) and the printed table (table.txt)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    config = bench_config(fast=args.fast)
    ingest_manifest(config, progress=False)
    backend = get_backend(config.llm)
    speeds = raw_speeds(backend.llama)
    lines = [f"== {config.llm.model}, {backend.threads} threads, {cpu_name()} ==",
             f"raw speed: {speeds[0]:.1f} prompt tok/s, {speeds[1]:.1f} generated tok/s\n"]
    print("\n".join(lines))
    rows = []
    if "pipeline" not in skip:
        rows.append(floor_row("demo pipeline", *timed(run_pipeline, DEMO_QUESTION, config), speeds))
    if "agent" not in skip:
        rows.append(floor_row("agent, one question", *timed(run_agent, AGENT_QUESTION, config), speeds))
    if "chain" not in skip:
        corpus, questions = BENCHMARKS["2wiki"]
        multihop = bench_config(fast=args.fast, **{"vector_db.uri": str(BENCH_OUT / "multihop" / "milvus.db")})
        names = prepare_corpus(corpus, multihop)
        question = load_questions(questions)[0].question
        rows.append(floor_row("chain, one 2Wiki question", *timed(run_chain, question, multihop, collections=names),
                              speeds))
    lines.append(table(rows))
    demo = next((r for r in rows if r["run"] == "demo pipeline"), None)
    if demo:
        lines.append(f"\ngoal (2 AVX2 cores): demo pipeline <= 120 s ({demo['wall s']:.0f} s) and <= 1.3x its floor "
                     f"({demo['wall / floor']:.2f}x)")
    print("\n".join(lines[2:]))
    if args.out:
        keep(Path(args.out), lines, rows, speeds, run_stamp(config), backend.threads)


def keep(out: Path, lines: list[str], rows: list[dict], speeds: tuple[float, float], stamp: dict,
         threads: int) -> None:
    """The rows (stamped) in ``out/floor.jsonl`` and the printed lines in ``out/table.txt``."""
    out.mkdir(parents=True, exist_ok=True)
    speed = {"run": "raw speed", "prompt tok/s": speeds[0], "generated tok/s": speeds[1], "threads": threads}
    with (out / "floor.jsonl").open("a", encoding="utf-8") as file:
        for row in (speed, *rows):
            file.write(json.dumps({**row, **stamp}) + "\n")
    (out / "table.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"kept in {out}")


if __name__ == "__main__":
    main()
