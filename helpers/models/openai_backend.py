"""Any OpenAI-compatible server as the model backend (``DSL_PROVIDER=openai``: vLLM, a llama.cpp
server, hosted APIs)."""
from __future__ import annotations

import time
from typing import Any, Iterable

from helpers.errors import BackendUnreachableError, ModelNotFoundError
from helpers.models.backend import Completion, Messages, OnText, estimate_tokens, stream_text


class OpenAIBackend:
    """Any OpenAI-compatible server.  Structured output: json_schema, else json_object+schema, else prompt only."""

    name = "openai"
    MODES = ("json_schema", "json_object", "prompt")

    def __init__(self, model: str, context_size: int, base_url: str | None = None,
                 api_key: str | None = None, structured_mode: str = "auto", timeout_s: float = 600.0):
        import openai

        self._openai = openai
        self.model = model
        self.context_size = context_size
        self.base_url = base_url or "https://api.openai.com/v1"
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key or "not-needed",
                                    timeout=timeout_s, max_retries=0)
        self.modes = list(self.MODES) if structured_mode == "auto" else [structured_mode]

    def _response_format(self, mode: str, schema: dict, step: str) -> dict | None:
        if mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": step.replace(" ", "_"), "schema": schema}}
        if mode == "json_object":
            return {"type": "json_object", "schema": schema}
        return None

    def complete(self, messages: Messages, *, schema: dict | None, temperature: float, max_tokens: int,
                 step: str, stop: list[str] | None = None, on_text: OnText | None = None) -> Completion:
        openai = self._openai
        started = time.perf_counter()
        while True:
            mode = self.modes[0] if schema is not None else "prompt"
            kwargs: dict[str, Any] = {"stop": stop} if stop else {}
            if schema is not None and (fmt := self._response_format(mode, schema, step)):
                kwargs["response_format"] = fmt
            try:
                response = self.client.chat.completions.create(
                    model=self.model, messages=messages, temperature=temperature,
                    max_tokens=max_tokens, stream=on_text is not None, **kwargs)
                if on_text is not None:
                    return self._streamed(response, messages, on_text, started)
                break
            except openai.APIConnectionError as exc:
                raise BackendUnreachableError(
                    f"no OpenAI-compatible server answers at {self.base_url}. Start it (e.g. "
                    "`python -m llama_cpp.server --model FILE.gguf`), fix OPENAI_BASE_URL, or switch "
                    "backend: DSL_PROVIDER=llamacpp."
                ) from exc
            except openai.NotFoundError as exc:
                raise ModelNotFoundError(f"the server at {self.base_url} has no model '{self.model}': "
                                         "set llm.model / DSL_MODEL to one it serves.") from exc
            except (openai.BadRequestError, openai.InternalServerError, openai.UnprocessableEntityError):
                # this server does not support this structured-output mode: try the next one
                if schema is None or len(self.modes) == 1:
                    raise
                self.modes.pop(0)
        choice = response.choices[0]
        return self._completion(choice.message.content or "", response.usage, messages, started,
                                choice.finish_reason)

    def _streamed(self, chunks: Iterable[Any], messages: Messages, on_text: OnText, started: float) -> Completion:
        text, received = stream_text(chunks, lambda chunk: chunk.choices[0].delta.content if chunk.choices
                                      else None, on_text)
        usage = next((c.usage for c in reversed(received) if getattr(c, "usage", None)), None)
        finish = next((c.choices[0].finish_reason for c in reversed(received)
                       if c.choices and c.choices[0].finish_reason), None)
        return self._completion(text, usage, messages, started, finish)

    @staticmethod
    def _completion(text: str, usage: Any, messages: Messages, started: float, finish: str | None) -> Completion:
        """The server's token counts where it sends them, else estimates."""
        prompt_tokens = usage.prompt_tokens if usage else sum(estimate_tokens(m["content"]) for m in messages)
        completion_tokens = usage.completion_tokens if usage else estimate_tokens(text)
        return Completion(text, prompt_tokens, completion_tokens, time.perf_counter() - started, finish or "stop")

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)
