"""A scripted chat backend for control-flow tests: replies are chosen by step name.

It stands in for the model only to test what the code does when the model says
X; the real-model tests are the ones that show the system works.
"""
from __future__ import annotations

import json
from typing import Callable

from helpers.llm import Completion

Reply = str | dict | list | Callable[[list[dict]], str | dict | list]


class Seq:
    """Replies used in order; the last one repeats."""

    def __init__(self, *replies: Reply):
        self.replies = list(replies)

    def next(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


class StepScriptedBackend:
    name = "scripted"
    model = "script"

    def __init__(self, script: dict[str, Reply | Seq], context_size: int = 8192,
                 prompt_tokens: int | None = None):
        self.script = script
        self.context_size = context_size
        self.fixed_prompt_tokens = prompt_tokens
        self.calls: list[tuple[str, list[dict]]] = []

    def complete(self, messages, *, schema, temperature, max_tokens, step):
        self.calls.append((step, messages))
        reply = self.script[step]
        reply = reply.next() if isinstance(reply, Seq) else reply
        if callable(reply):
            reply = reply(messages)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        prompt = self.fixed_prompt_tokens or sum(self.count_tokens(m["content"]) for m in messages)
        return Completion(text, prompt, min(self.count_tokens(text), max_tokens), 0.001)

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def steps(self) -> list[str]:
        return [step for step, _ in self.calls]
