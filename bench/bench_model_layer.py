"""Model layer benchmark (issue: foundation).

1. Overhead: prompt and generation tokens/s through ``helpers.models.llm`` vs raw
   llama-cpp-python on the same prompt in the same run (goal: at most 5% slower).
2. Structured output: success rate on the first try and after retries over a
   fixed set of decomposition / routing / reflection prompts, per model
   (goal: 100% valid after retries with the 1.5B model).
3. Constrained decoding speed: generation tokens/s with the grammar checked on
   the chosen token (``helpers.models.grammar_sampling``) vs llama-cpp-python's own
   full-vocabulary grammar pass, greedy, same prompts, same run; and whether
   the two produced the same text.

Usage: python bench/bench_model_layer.py [--models qwen2.5-coder-0.5b,qwen2.5-coder-1.5b] [--repeats 3]
       [--sections overhead,structured,grammar]
"""
from __future__ import annotations

import argparse
import json
import time

from common import bench_config, table
from llama_cpp import Llama, LlamaGrammar

from helpers.errors import StructuredOutputError
from helpers.models.llm import LLM, get_backend
from helpers.strategies.decompose import SubQueries
from helpers.strategies.reflect import Gaps
from helpers.strategies.route import route_schema

PROMPT = ("Write a short paragraph on how animated television production changed when studios moved "
          "from hand-painted cels to digital ink and paint. " * 4)

TOPICS = ["How have The Simpsons changed over time?", "Who voices Homer Simpson?",
          "Why did the show move to HD?", "What did critics say about later seasons?",
          "How did Disney's purchase of Fox affect the show?", "What is Treehouse of Horror?",
          "How are volcano eruptions measured?", "How do you keep a sourdough starter alive?",
          "Which showrunners led The Simpsons in the 1990s?", "Why was Apu controversial?"]
COLLECTIONS = ["simpsons_production", "simpsons_characters", "simpsons_storytelling", "simpsons_reception",
               "volcanoes", "sourdough"]


def structured_cases() -> list[tuple[str, list[dict], type]]:
    """30 prompts: decomposition, routing and reflection, 10 of each."""
    cases = []
    router = route_schema(COLLECTIONS)
    for topic in TOPICS:
        cases.append(("decompose", [{"role": "user", "content": (
            f"Break this question into at most 4 short search queries: {topic}\n"
            'Reply with JSON only: {"queries": ["..."]}')}], SubQueries))
        cases.append(("route", [
            {"role": "system", "content": "Collections: " + ", ".join(COLLECTIONS) +
             '. Pick the collections that fit the query. Reply with JSON only: '
             '{"routes": [{"collection": "<name>", "query": "<query>"}]}'},
            {"role": "user", "content": f"Search query: {topic}"}], router))
        cases.append(("reflect", [{"role": "user", "content": (
            f"Research question: {topic}\nSearches made: - {topic}\nFound: - one short passage.\n"
            'What is still missing? Reply with JSON only: {"gaps": ["new query"]} or {"gaps": []}')}], Gaps))
    return cases


def overhead(model: str, repeats: int) -> dict:
    config = bench_config(**{"llm.model": model, "llm.temperature": 0.0, "llm.max_tokens": 96})
    backend = get_backend(config.llm)
    llm = LLM(backend, temperature=0.0, max_tokens=96)
    messages = [{"role": "user", "content": PROMPT}]
    raw_rates, layer_rates = [], []
    for _ in range(repeats):
        for label in ("raw", "layer"):
            backend.llama.reset()  # no prompt-cache reuse between the two
            started = time.perf_counter()
            if label == "raw":
                out = backend.llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=96,
                                                           repeat_penalty=backend.repeat_penalty)
                tokens = out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"]
            else:
                llm.chat(messages, step="bench")
                record = llm.ledger.records[-1]
                tokens = record.prompt_tokens + record.completion_tokens
            rate = tokens / (time.perf_counter() - started)
            (raw_rates if label == "raw" else layer_rates).append(rate)
    raw, layer = max(raw_rates), max(layer_rates)
    return {"model": model, "raw tok/s": raw, "layer tok/s": layer, "overhead %": 100 * (raw - layer) / raw}


def structured(model: str) -> dict:
    config = bench_config(**{"llm.model": model, "llm.temperature": 0.0, "llm.max_tokens": 200})
    llm = LLM(get_backend(config.llm), temperature=0.0, max_tokens=200, retries=2)
    first = valid = 0
    started = time.perf_counter()
    cases = structured_cases()
    for step, messages, schema in cases:
        try:
            reply = llm.structured(messages, schema, step=step)
            valid += 1
            first += reply.attempts == 1
        except StructuredOutputError:
            pass
    return {"model": model, "prompts": len(cases), "valid 1st try %": 100 * first / len(cases),
            "valid after retries %": 100 * valid / len(cases), "calls": llm.ledger.calls,
            "seconds": time.perf_counter() - started}


def grammar_speed(model: str) -> dict:
    """Greedy constrained generation over 12 of the structured prompts, both ways, prompt cache cleared."""
    config = bench_config(**{"llm.model": model})
    backend = get_backend(config.llm)
    full = Llama(model_path=str(backend.model_path), n_ctx=config.llm.context_size, n_threads=backend.threads,
                 n_threads_batch=backend.threads, seed=7, verbose=False)
    figures = {"checked": [0, 0.0], "full vocabulary": [0, 0.0]}  # completion tokens, seconds
    same = 0
    cases = structured_cases()[:12]
    for _, messages, schema in cases:
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema.model_json_schema()), verbose=False)
        texts = []
        for label, llama in (("checked", backend.llama), ("full vocabulary", full)):
            llama.reset()
            started = time.perf_counter()
            out = llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=200,
                                               repeat_penalty=backend.repeat_penalty, grammar=grammar)
            figures[label][0] += out["usage"]["completion_tokens"]
            figures[label][1] += time.perf_counter() - started
            texts.append(out["choices"][0]["message"]["content"])
        same += texts[0] == texts[1]
    checked, vocab = (figures[k][0] / figures[k][1] for k in ("checked", "full vocabulary"))
    return {"model": model, "prompts": len(cases), "checked tok/s": checked, "full-vocabulary tok/s": vocab,
            "speed-up": checked / vocab, "same output": f"{same}/{len(cases)}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sections", default="overhead,structured,grammar")
    args = parser.parse_args()
    models, sections = args.models.split(","), args.sections.split(",")
    if "overhead" in sections:
        print("== model layer overhead (best of", args.repeats, "runs each; goal <= 5%) ==")
        print(table([overhead(m, args.repeats) for m in models]))
    if "structured" in sections:
        print("\n== structured output over 30 decompose/route/reflect prompts (goal 1.5B: 100% after retries) ==")
        print(table([structured(m) for m in models]))
    if "grammar" in sections:
        print("\n== constrained decoding: grammar checked on the chosen token vs on the whole vocabulary "
              "(greedy; completion tokens per second of the whole call) ==")
        print(table([grammar_speed(m) for m in models]))


if __name__ == "__main__":
    main()
