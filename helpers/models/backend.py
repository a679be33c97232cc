"""What every model backend shares: the ``ChatBackend`` interface a backend implements, the
``Completion`` it returns, and the machine facts figures must name (cores, CPU).

The backends, one file each: ``llamacpp_backend`` (embedded llama.cpp, the default, offline),
``ollama_backend`` (an Ollama server) and ``openai_backend`` (any OpenAI-compatible server).
``helpers.models.llm`` chooses one from the configuration and adds budget, accounting and
structured output on top.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

Messages = list[dict[str, str]]
OnText = Callable[[str], None]


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str = "stop"


class ChatBackend(Protocol):
    name: str
    model: str
    context_size: int

    def complete(self, messages: Messages, *, schema: dict | None, temperature: float, max_tokens: int,
                 step: str, stop: list[str] | None = None, on_text: OnText | None = None) -> Completion:
        """One reply, cut before the first ``stop`` string; with ``on_text`` it is streamed:
        each piece is passed to ``on_text`` as it is written.  ``LLM`` passes ``stop`` and
        ``on_text`` only when a caller uses them, so a backend without them serves plain calls."""

    def count_tokens(self, text: str) -> int: ...


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_name() -> str:
    """The CPU model and its widest vector extension (model speed differs 3-4x between them),
    for figures that must say which machine they come from.  A model name without a number
    ("AMD EPYC") gets the CPU family too: two generations behind one name differ 2x."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    def field(key: str) -> str:
        return next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith(key)), "")
    model, family = field("model name") or platform.processor() or "unknown CPU", field("cpu family")
    if family and not any(c.isdigit() for c in model):
        model += f" family {family}"
    return model + (" (AVX-512)" if "avx512f" in info else " (AVX2)" if "avx2" in info else "")


def estimate_tokens(text: str) -> int:
    """Servers give no tokenizer: about 3.5 characters per token for English prose."""
    return max(1, int(len(text) / 3.5))


def stream_text(parts: Iterable[Any], text_of: Callable[[Any], str | None], on_text: OnText) -> tuple[str, list]:
    """Pass each piece of a streamed reply to ``on_text``; the whole text and every part received."""
    pieces, received = [], []
    for part in parts:
        received.append(part)
        if piece := text_of(part):
            pieces.append(piece)
            on_text(piece)
    return "".join(pieces), received
