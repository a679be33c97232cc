"""Speculative decoding, measured per step (issue 45): does drafting tokens, from the prompt itself or
from the 0.5B model, make the embedded model's replies faster on this CPU?

Report sections and answers copy much of their text from the passages they are shown.  llama-cpp-python
ships prompt-lookup decoding (``LlamaPromptLookupDecoding``): it proposes the tokens that followed
the last n-gram where that n-gram occurs earlier in the context, and the model checks them in one
batch.  A draft model does the same with a smaller model of the same tokenizer (the 0.5B drafting
for the 1.5B) guessing the next tokens greedily.  This script replays every model call a run
recorded in its trace (``trace.json``, written by ``make demo``) on the same GGUF, threads and
context: plainly, then with each drafter asked for.  Each replay starts from an empty context (no
prompt reuse), is greedy, and holds JSON replies to JSON (the trace keeps no schema, so every side
uses a generic JSON grammar).  Per step it prints the generated tokens, the seconds of each side,
its ratio to plain decoding, and how many replies came out the same.  Nothing is switched on by it:
the lab keeps what the figures show wins.

Usage: python bench/bench_prompt_lookup.py [--trace outputs/simpsons/trace.json] [--draft 10]
                                           [--drafters lookup,0.5b] [--fast]
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
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


def small_model_drafter(model_path: str, common: dict, tokens: int):
    """A draft model for llama-cpp-python: the smaller GGUF continues the context greedily for
    ``tokens`` tokens (its own KV cache keeps the shared prefix between calls)."""
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaDraftModel

    class SmallModelDraft(LlamaDraftModel):
        def __init__(self) -> None:
            self.llama = Llama(**{**common, "model_path": model_path})

        def __call__(self, input_ids: np.ndarray, /, **kwargs) -> np.ndarray:
            draft = []
            for token in self.llama.generate(input_ids.tolist(), temp=0.0):
                if token == self.llama.token_eos() or len(draft) == tokens:
                    break
                draft.append(token)
            return np.array(draft, dtype=np.intc)

    return SmallModelDraft()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=str(PROJECT_ROOT / "outputs" / "simpsons" / "trace.json"))
    parser.add_argument("--draft", type=int, default=10, help="tokens drafted per lookup")
    parser.add_argument("--drafters", default="lookup", help="lookup (prompt lookup), 0.5b (the 0.5B model), "
                        "or both, comma-separated")
    parser.add_argument("--fast", action="store_true", help="the 0.5B model as the one drafted for")
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
    drafters = [name.strip() for name in args.drafters.split(",") if name.strip()]
    if unknown := set(drafters) - {"lookup", "0.5b"}:
        parser.error(f"--drafters takes lookup and/or 0.5b (got {sorted(unknown)})")
    sides = {"plain": Llama(**common)}
    # a draft model needs the logits of every position; llama-cpp-python 0.3.36 sizes that store only
    # when logits_all is passed too
    if "lookup" in drafters:
        sides["prompt lookup"] = Llama(**common, logits_all=True,
                                       draft_model=LlamaPromptLookupDecoding(num_pred_tokens=args.draft))
    if "0.5b" in drafters:
        small = str(resolve_gguf(bench_config(fast=True).llm.model))
        sides["0.5B draft"] = Llama(**common, logits_all=True,
                                    draft_model=small_model_drafter(small, common, args.draft))
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0])
    same: dict[tuple[str, str], int] = defaultdict(int)
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
            same[(step["step"], side)] += replies[side] == replies["plain"]
    rows = []
    for name in dict.fromkeys(s["step"] for s in calls):
        plain = totals[(name, "plain")]
        row = {"step": name, "calls": plain[2], "tokens": f"{plain[0]:.0f}", "plain s": round(plain[1], 1)}
        for side in list(sides)[1:]:
            drafted = totals[(name, side)]
            row[f"{side} s"] = round(drafted[1], 1)
            row[f"{side} / plain"] = round(drafted[1] / plain[1], 2) if plain[1] else "-"
            row[f"{side}: same reply"] = f"{same[(name, side)]}/{plain[2]}"
        rows.append(row)
    seconds = {side: sum(v[1] for (_, name), v in totals.items() if name == side) for side in sides}
    print(f"== speculative decoding ({args.draft} tokens drafted), {config.model}, {cpu_name()}, "
          f"{len(calls)} calls replayed from {path} ==")
    print(table(rows))
    print(f"all calls: plain {seconds['plain']:.1f} s" + "".join(
        f", {side} {seconds[side]:.1f} s ({seconds[side] / seconds['plain']:.2f}x)" for side in list(sides)[1:])
        + " (below 1x means faster)")


if __name__ == "__main__":
    main()
