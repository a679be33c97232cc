"""Prompt-lookup decoding, measured per step (issue 45): does drafting tokens from the prompt itself
make the embedded model's replies faster on this CPU?

Report sections and answers copy much of their text from the passages they are shown.  llama-cpp-python
ships prompt-lookup decoding (``LlamaPromptLookupDecoding``): it proposes the tokens that followed
the last n-gram where that n-gram occurs earlier in the context, and the model checks them in one
batch.  This script replays every model call a run recorded in its trace (``trace.json``, written by
``make demo``) twice on the same GGUF, threads and context: plainly, then with prompt lookup.  Each
replay starts from an empty context (no prompt reuse), is greedy, and holds JSON replies to JSON
(the trace keeps no schema, so both sides use a generic JSON grammar).  Per step it prints the
generated tokens, seconds and tokens per second of each side, the ratio, and how many replies came
out the same.  Nothing is switched on by it: the lab keeps what the figures show wins.

Usage: python bench/bench_prompt_lookup.py [--trace outputs/simpsons/trace.json] [--draft 10] [--fast]
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from common import PROJECT_ROOT, bench_config, table

from helpers.models.backend import available_cores, cpu_name
from helpers.models.model_files import resolve_gguf


def replay(llama, messages: list[dict], json_reply: bool, max_tokens: int) -> tuple[str, int, float]:
    """(reply, generated tokens, seconds) of one greedy call from an empty context."""
    llama.reset()
    extra = {"response_format": {"type": "json_object"}} if json_reply else {}
    started = time.perf_counter()
    out = llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=max_tokens, **extra)
    return out["choices"][0]["message"]["content"] or "", out["usage"]["completion_tokens"], \
        time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=str(PROJECT_ROOT / "outputs" / "simpsons" / "trace.json"))
    parser.add_argument("--draft", type=int, default=10, help="tokens drafted per lookup")
    parser.add_argument("--fast", action="store_true", help="the 0.5B model")
    args = parser.parse_args()
    path = Path(args.trace)
    if not path.exists():
        parser.error(f"no trace at {path}: run `make demo` first, or pass --trace")
    calls = [step for step in json.loads(path.read_text())["trace"] if step.get("calls") and step.get("messages")]
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    config = bench_config(fast=args.fast).llm
    threads = config.threads or available_cores()
    common = {"model_path": str(resolve_gguf(config.model)), "n_ctx": config.context_size,
              "n_threads": threads, "n_threads_batch": threads, "seed": config.seed, "verbose": False}
    sides = {"plain": Llama(**common),
             # a draft model needs the logits of every position; llama-cpp-python 0.3.36 sizes that store only
             # when logits_all is passed too
             "prompt lookup": Llama(**common, logits_all=True,
                                    draft_model=LlamaPromptLookupDecoding(num_pred_tokens=args.draft))}
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0])
    same: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for step in calls:
        json_reply = (step.get("raw") or "").lstrip().startswith("{")
        limit = max(16, int(step.get("completion_tokens") or 0) + 32)
        replies = {}
        for side, llama in sides.items():
            replies[side], tokens, seconds = replay(llama, step["messages"], json_reply, limit)
            total = totals[(step["step"], side)]
            total[0] += tokens
            total[1] += seconds
            total[2] += 1
        same[step["step"]][0] += replies["plain"] == replies["prompt lookup"]
        same[step["step"]][1] += 1
    rows = []
    for name in dict.fromkeys(s["step"] for s in calls):
        plain, lookup = totals[(name, "plain")], totals[(name, "prompt lookup")]
        rows.append({"step": name, "calls": plain[2], "tokens": f"{plain[0]:.0f} / {lookup[0]:.0f}",
                     "plain s": round(plain[1], 1), "lookup s": round(lookup[1], 1),
                     "lookup / plain": round(lookup[1] / plain[1], 2) if plain[1] else "-",
                     "same reply": f"{same[name][0]}/{same[name][1]}"})
    plain_s = sum(v[1] for (_, side), v in totals.items() if side == "plain")
    lookup_s = sum(v[1] for (_, side), v in totals.items() if side == "prompt lookup")
    print(f"== prompt-lookup decoding ({args.draft} tokens drafted), {config.model}, {cpu_name()}, "
          f"{len(calls)} calls replayed from {path} ==")
    print(table(rows))
    print(f"all calls: plain {plain_s:.1f} s, prompt lookup {lookup_s:.1f} s "
          f"({lookup_s / plain_s:.2f}x; below 1 means faster)")


if __name__ == "__main__":
    main()
