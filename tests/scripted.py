"""The one scripted chat backend for control-flow tests: replies are chosen by step name.

It stands in for the model only to test what the code does when the model says
X; the real-model tests are the ones that show the system works.
"""
from __future__ import annotations

import json
import re
from typing import Callable

from helpers.models.backend import Completion

Reply = str | dict | list | Callable[[list[dict]], str | dict | list]


class Seq:
    """Replies used in order; the last one repeats."""

    def __init__(self, *replies: Reply):
        self.replies = list(replies)

    def next(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


FILLER = "A scripted sentence [1]."


def instance_of(schema: dict, root: dict | None = None):
    """A small value that ``schema`` (a JSON schema) accepts: first choices, one item per list."""
    root = root or schema
    if "$ref" in schema:
        return instance_of(root["$defs"][schema["$ref"].rsplit("/", 1)[-1]], root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return instance_of(next(s for s in schema[key] if s.get("type") != "null"), root)
    if "const" in schema or "enum" in schema:
        return schema.get("const", (schema.get("enum") or [None])[0])
    kind = schema.get("type")
    if kind == "object":
        return {key: instance_of(value, root) for key, value in schema.get("properties", {}).items()}
    if kind == "array":
        count = min(max(1, schema.get("minItems", 1)), schema.get("maxItems", 1 << 20))
        return [instance_of(schema.get("items", {}), root) for _ in range(count)]
    return {"integer": max(1, schema.get("minimum", 1)), "number": 1.0, "boolean": True}.get(kind, FILLER)


class StepScriptedBackend:
    """Replies from ``script[step]``: one reply, a ``Seq``, or a list (used like a ``Seq``).

    With ``fill``, a step the script does not name gets the smallest reply its schema allows
    (``instance_of``), or ``FILLER`` where it asks for free text: enough to run a whole strategy
    for its control flow.  Tokens are counted as ``tokens="chars"`` (4 characters each) or ``"words"``; a
    reply longer than the ``max_tokens`` it is given is cut there with finish reason
    "length", as a real model's would be; it ends before the first ``stop`` string, and
    with ``on_text`` it is streamed word by word.  Every call is recorded in ``calls``.
    """

    name = "scripted"
    model = "script"

    def __init__(self, script: dict[str, Reply | Seq | list], context_size: int = 8192,
                 prompt_tokens: int | None = None, tokens: str = "chars", message_overhead: int = 0,
                 fill: bool = False):
        self.script = {step: Seq(*reply) if isinstance(reply, list) and reply and isinstance(reply[0], str)
                       else reply for step, reply in script.items()}
        self.context_size = context_size
        self.fixed_prompt_tokens = prompt_tokens
        self.tokens = tokens
        self.message_overhead = message_overhead
        self.fill = fill
        self.calls: list[dict] = []

    def complete(self, messages, *, schema, temperature, max_tokens, step, stop=None, on_text=None):
        self.calls.append({"step": step, "messages": messages, "schema": schema, "max_tokens": max_tokens,
                           "stop": stop})
        if step not in self.script and not self.fill:
            raise AssertionError(f"the script has no reply for step {step!r}")
        reply = self.script.get(step) or (instance_of(schema) if schema else FILLER)
        reply = reply.next() if isinstance(reply, Seq) else reply
        if callable(reply):
            reply = reply(messages)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        finish = "stop"
        if self.count_tokens(text) > max_tokens:
            text = " ".join(text.split()[:max_tokens]) if self.tokens == "words" else text[: max_tokens * 4]
            finish = "length"
        cuts = [text.index(s) for s in stop or [] if s in text]
        text = text[: min(cuts)] if cuts else text
        for piece in re.findall(r"\S+\s*|\s+", text) if on_text else []:
            on_text(piece)
        prompt = self.fixed_prompt_tokens or sum(self.count_tokens(m["content"]) + self.message_overhead
                                                 for m in messages)
        return Completion(text, prompt, self.count_tokens(text), 0.001, finish)

    def count_tokens(self, text: str) -> int:
        return len(text.split()) if self.tokens == "words" else max(1, len(text) // 4)

    def steps(self) -> list[str]:
        """The step name of every call, in order."""
        return [call["step"] for call in self.calls]

    def calls_for(self, step: str) -> list[dict]:
        return [call for call in self.calls if call["step"] == step]
