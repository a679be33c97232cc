"""The embedded default backend: llama.cpp through llama-cpp-python, on a GGUF file from the
model catalogue (offline; built from source with explicit instruction-set flags by ``make setup``)."""
from __future__ import annotations

import time
from typing import Any, Iterable

from helpers.errors import BuildMissingError, ContextOverflowError, ModelNotFoundError
from helpers.models.backend import Completion, Messages, OnText, available_cores, stream_text
from helpers.models.model_files import resolve_gguf


class LlamaCppBackend:
    """Embedded llama.cpp through llama-cpp-python; JSON schemas become a decoding grammar
    (checked on the chosen token first, see ``helpers.models.grammar_sampling``)."""

    name = "llamacpp"

    def __init__(self, model: str, context_size: int, threads: int = 0, seed: int = 7,
                 repeat_penalty: float = 1.1, prompt_cache_mb: int = 0):
        try:
            from helpers.models.grammar_sampling import CheckedGrammarLlama
            from helpers.models.prompt_cache import use_prompt_cache
        except ImportError as exc:
            raise BuildMissingError(
                "llama-cpp-python is not installed in this environment. Run `make setup` "
                "(it builds it with flags for your CPU), or choose another backend: "
                "DSL_PROVIDER=ollama or DSL_PROVIDER=openai."
            ) from exc
        path = resolve_gguf(model)
        self.model = model
        self.model_path = path
        self.context_size = context_size
        self.repeat_penalty = repeat_penalty
        self.threads = threads or available_cores()
        try:
            self.llama = CheckedGrammarLlama(model_path=str(path), n_ctx=context_size, n_threads=self.threads,
                                             n_threads_batch=self.threads, seed=seed, verbose=False)
        except ValueError as exc:  # llama-cpp-python's message for a file it cannot load
            raise ModelNotFoundError(
                f"llama.cpp could not load the model file {path} ({exc}): it may be truncated or damaged. "
                "Download it again, or for a catalogue model delete it and run `make setup`.") from exc
        use_prompt_cache(self.llama, prompt_cache_mb)

    def complete(self, messages: Messages, *, schema: dict | None, temperature: float, max_tokens: int,
                 step: str, stop: list[str] | None = None, on_text: OnText | None = None) -> Completion:
        extra: dict[str, Any] = {"stop": stop or None}
        if schema is not None:
            extra["response_format"] = {"type": "json_object", "schema": schema}
        started = time.perf_counter()
        try:
            out = self.llama.create_chat_completion(messages=messages, temperature=temperature,
                                                    max_tokens=max_tokens, repeat_penalty=self.repeat_penalty,
                                                    stream=on_text is not None, **extra)
            if on_text is not None:
                return self._streamed(out, on_text, started)
        except ValueError as exc:
            if "exceed context window" in str(exc):
                raise ContextOverflowError(f"step '{step}': {exc}. Shorten the prompt or raise "
                                           "llm.context_size.") from exc
            raise
        usage = out["usage"]
        choice = out["choices"][0]
        return Completion(choice["message"].get("content") or "", usage["prompt_tokens"],
                          usage["completion_tokens"], time.perf_counter() - started,
                          choice.get("finish_reason") or "stop")

    def _streamed(self, chunks: Iterable[dict], on_text: OnText, started: float) -> Completion:
        """Collect a streamed reply.  llama-cpp-python sends no usage when streaming: the reply's
        tokens are counted from its text, the prompt's from what the context now holds."""
        text, received = stream_text(chunks, lambda chunk: chunk["choices"][0]["delta"].get("content"), on_text)
        finish = next((c["choices"][0]["finish_reason"] for c in reversed(received)
                       if c["choices"][0].get("finish_reason")), "stop")
        completion_tokens = self.count_tokens(text) if text else 0
        return Completion(text, max(1, self.llama.n_tokens - completion_tokens), completion_tokens,
                          time.perf_counter() - started, finish)

    def count_tokens(self, text: str) -> int:
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))
