"""An Ollama server as the model backend (``DSL_PROVIDER=ollama``): JSON schemas go as ``format``,
the context size as ``num_ctx``."""
from __future__ import annotations

import os
import time
from typing import Any

from helpers.errors import BackendUnreachableError, ModelNotFoundError
from helpers.models.backend import Completion, Messages, OnText, estimate_tokens, stream_text
from helpers.models.model_files import CATALOGUE


class OllamaBackend:
    """An Ollama server.  ``num_ctx`` is always sent: Ollama's default silently truncates prompts."""

    name = "ollama"

    def __init__(self, model: str, context_size: int, host: str | None = None,
                 timeout_s: float = 600.0, repeat_penalty: float = 1.1, **client_kwargs: Any):
        import ollama

        self.model = CATALOGUE[model].ollama_tag if model in CATALOGUE else model
        self.context_size = context_size
        self.repeat_penalty = repeat_penalty
        self.host = host or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
        self._ollama = ollama
        self.client = ollama.Client(host=self.host, timeout=timeout_s, **client_kwargs)

    def complete(self, messages: Messages, *, schema: dict | None, temperature: float, max_tokens: int,
                 step: str, stop: list[str] | None = None, on_text: OnText | None = None) -> Completion:
        started = time.perf_counter()
        options = {"num_ctx": self.context_size, "temperature": temperature, "num_predict": max_tokens,
                   "repeat_penalty": self.repeat_penalty, **({"stop": stop} if stop else {})}
        try:
            if on_text is None:
                response = self.client.chat(model=self.model, messages=messages, format=schema, stream=False,
                                            options=options)
                text = response.message.content or ""
            else:  # the last part of a stream carries the counts and the done reason
                text, parts = stream_text(self.client.chat(model=self.model, messages=messages, format=schema,
                                                            stream=True, options=options),
                                           lambda part: part.message.content, on_text)
                response = parts[-1]
        except self._ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise ModelNotFoundError(
                    f"Ollama at {self.host} has no model '{self.model}'. Run `ollama pull {self.model}`, "
                    "or set llm.model / DSL_MODEL to a model it has (`ollama list`)."
                ) from exc
            raise
        except ConnectionError as exc:
            raise BackendUnreachableError(
                f"Ollama is not reachable at {self.host}. Start it with `ollama serve` (or set "
                "OLLAMA_HOST), or switch backend: DSL_PROVIDER=llamacpp for the embedded model."
            ) from exc
        prompt_tokens = response.prompt_eval_count or sum(estimate_tokens(m["content"]) for m in messages)
        return Completion(text, prompt_tokens, response.eval_count or 0,
                          time.perf_counter() - started, response.done_reason or "stop")

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)
