"""The model layer: one small interface over three backends, with accounting,
budgets and structured output that small models cannot break.

* ``LlamaCppBackend`` - embedded llama.cpp (default, offline, GGUF file)
* ``OllamaBackend``   - an Ollama server (``format=<JSON schema>``, ``num_ctx``)
* ``OpenAIBackend``   - any OpenAI-compatible server (vLLM, llama.cpp server, hosted APIs)

Agent code talks to an ``LLM``: ``llm.chat(messages, step=...)`` for text and
``llm.structured(messages, Schema, step=...)`` for validated pydantic objects.
Every backend honours ``stop`` strings and can stream: with ``on_text`` a function
gets each piece of the reply as the model writes it.  Every call is written to the
LLM's ``UsageLedger``.  Nothing here uses asyncio, so it is safe inside Jupyter's
running event loop.
"""
from __future__ import annotations

import os
import platform
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, Protocol, TypeVar

from pydantic import BaseModel

from helpers.config import Config, LLMConfig
from helpers.errors import (BackendUnreachableError, BudgetExceededError, BuildMissingError, ContextOverflowError,
                            ModelNotFoundError, StructuredOutputError)
from helpers.models.model_files import CATALOGUE, resolve_gguf
from helpers.models.structured import ReplyParseError, parse_reply, schema_for_prompt
from helpers.models.usage import CallRecord, UsageLedger
from helpers.prompts import render

T = TypeVar("T", bound=BaseModel)
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
    for figures that must say which machine they come from."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown CPU")
    return model + (" (AVX-512)" if "avx512f" in info else " (AVX2)" if "avx2" in info else "")


def _estimate_tokens(text: str) -> int:
    """Servers give no tokenizer: about 3.5 characters per token for English prose."""
    return max(1, int(len(text) / 3.5))


def _stream_text(parts: Iterable[Any], text_of: Callable[[Any], str | None], on_text: OnText) -> tuple[str, list]:
    """Pass each piece of a streamed reply to ``on_text``; the whole text and every part received."""
    pieces, received = [], []
    for part in parts:
        received.append(part)
        if piece := text_of(part):
            pieces.append(piece)
            on_text(piece)
    return "".join(pieces), received


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
        text, received = _stream_text(chunks, lambda chunk: chunk["choices"][0]["delta"].get("content"), on_text)
        finish = next((c["choices"][0]["finish_reason"] for c in reversed(received)
                       if c["choices"][0].get("finish_reason")), "stop")
        completion_tokens = self.count_tokens(text) if text else 0
        return Completion(text, max(1, self.llama.n_tokens - completion_tokens), completion_tokens,
                          time.perf_counter() - started, finish)

    def count_tokens(self, text: str) -> int:
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))


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
                text, parts = _stream_text(self.client.chat(model=self.model, messages=messages, format=schema,
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
        prompt_tokens = response.prompt_eval_count or sum(_estimate_tokens(m["content"]) for m in messages)
        return Completion(text, prompt_tokens, response.eval_count or 0,
                          time.perf_counter() - started, response.done_reason or "stop")

    def count_tokens(self, text: str) -> int:
        return _estimate_tokens(text)


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
        text, received = _stream_text(chunks, lambda chunk: chunk.choices[0].delta.content if chunk.choices
                                      else None, on_text)
        usage = next((c.usage for c in reversed(received) if getattr(c, "usage", None)), None)
        finish = next((c.choices[0].finish_reason for c in reversed(received)
                       if c.choices and c.choices[0].finish_reason), None)
        return self._completion(text, usage, messages, started, finish)

    @staticmethod
    def _completion(text: str, usage: Any, messages: Messages, started: float, finish: str | None) -> Completion:
        """The server's token counts where it sends them, else estimates."""
        prompt_tokens = usage.prompt_tokens if usage else sum(_estimate_tokens(m["content"]) for m in messages)
        completion_tokens = usage.completion_tokens if usage else _estimate_tokens(text)
        return Completion(text, prompt_tokens, completion_tokens, time.perf_counter() - started, finish or "stop")

    def count_tokens(self, text: str) -> int:
        return _estimate_tokens(text)


def _ollama_answers(host: str, timeout_s: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{host.rstrip('/')}/api/version", timeout=timeout_s) as reply:
            return reply.status == 200
    except OSError:
        return False


_BACKENDS: dict[tuple, ChatBackend] = {}


def get_backend(config: LLMConfig) -> ChatBackend:
    """The backend for a configuration, created once and reused (a loaded GGUF stays in memory).

    With the embedded default and ``OLLAMA_HOST`` set (and no ``DSL_PROVIDER``), an
    Ollama server that answers there is used instead.
    """
    provider = config.provider
    host = config.base_url
    if (provider == "llamacpp" and os.environ.get("OLLAMA_HOST") and not os.environ.get("DSL_PROVIDER")
            and _ollama_answers(os.environ["OLLAMA_HOST"])):
        provider, host = "ollama", os.environ["OLLAMA_HOST"]
    key = (provider, config.model, config.context_size, config.threads, host, config.structured_mode,
           config.repeat_penalty, config.prompt_cache_mb)
    if key not in _BACKENDS:
        if provider == "llamacpp":
            backend: ChatBackend = LlamaCppBackend(config.model, config.context_size, config.threads, config.seed,
                                                   config.repeat_penalty, config.prompt_cache_mb)
        elif provider == "ollama":
            backend = OllamaBackend(config.model, config.context_size, host, config.timeout_s,
                                    config.repeat_penalty)
        else:
            backend = OpenAIBackend(config.model, config.context_size, host, config.api_key,
                                    config.structured_mode, config.timeout_s)
        _BACKENDS[key] = backend
    return _BACKENDS[key]


@dataclass
class Budget:
    """Limits for one run; ``None`` means unlimited.  Checked *before* each call."""

    max_calls: int | None = None
    max_prompt_tokens: int | None = None
    max_total_tokens: int | None = None
    reserved_tokens: int = 0  # of max_total_tokens, kept for the final call: only calls marked final use them


@dataclass
class Reply(Generic[T]):
    """One structured call: the parsed value plus what the model actually said."""

    value: T
    raw: str
    attempts: int
    messages: Messages
    raw_attempts: list[str] = field(default_factory=list)


class LLM:
    """A backend plus this run's ledger, budget and retry policy."""

    def __init__(self, backend: ChatBackend, *, temperature: float = 0.2, max_tokens: int = 768,
                 retries: int = 2, budget: Budget | None = None, ledger: UsageLedger | None = None,
                 repair_template: str | None = None):
        self.backend = backend
        self.repair_template = repair_template  # an edited ``structured_repair`` text (None: the shipped one)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.retries = retries
        self.budget = budget or Budget()
        self.ledger = ledger if ledger is not None else UsageLedger()

    @property
    def context_size(self) -> int:
        return self.backend.context_size

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def prompt_room(self) -> int:
        """The largest prompt the next call may send: the context, or what the budget has left."""
        b, used = self.budget, self.ledger
        room = self.context_size
        if b.max_prompt_tokens is not None:
            room = min(room, b.max_prompt_tokens - used.prompt_tokens)
        if b.max_total_tokens is not None:
            room = min(room, b.max_total_tokens - used.total_tokens)
        return max(0, room)

    def has_room(self, calls: int = 1, prompt_tokens: int = 0) -> bool:
        """True when the budget still allows ``calls`` more calls sending ``prompt_tokens`` in all
        (outside the tokens reserved for the final call).  Strategies ask it to keep what their
        final step needs (the one budget check they share)."""
        b, used = self.budget, self.ledger
        if b.max_calls is not None and used.calls + calls > b.max_calls:
            return False
        if b.max_prompt_tokens is not None and used.prompt_tokens + prompt_tokens > b.max_prompt_tokens:
            return False
        return b.max_total_tokens is None or \
            used.total_tokens + prompt_tokens <= b.max_total_tokens - b.reserved_tokens

    def reserve(self, tokens: int) -> None:
        """Keep ``tokens`` of the total-token budget for the final call (``final=True``): ordinary
        calls, and their retries, cannot use them.  Set it again as the final call's needs change."""
        self.budget.reserved_tokens = max(0, tokens)

    def count_messages(self, messages: Messages) -> int:
        """Prompt size of a message list, with room for the chat template (role markers and the
        default system prompt some templates add)."""
        return sum(self.count_tokens(m["content"]) + 6 for m in messages) + 30

    def _check_budget(self, step: str, prompt_tokens: int, max_tokens: int, final: bool = False) -> int:
        """Raise if the call cannot fit (a call not ``final`` may not use the reserved tokens);
        return the completion allowance that still fits."""
        b, used = self.budget, self.ledger
        if b.max_calls is not None and used.calls + 1 > b.max_calls:
            raise BudgetExceededError(f"step '{step}': call budget of {b.max_calls} calls is spent")
        if b.max_prompt_tokens is not None and used.prompt_tokens + prompt_tokens > b.max_prompt_tokens:
            raise BudgetExceededError(
                f"step '{step}': prompt-token budget {b.max_prompt_tokens} would be exceeded "
                f"({used.prompt_tokens} used + {prompt_tokens} needed)")
        if b.max_total_tokens is not None:
            limit = b.max_total_tokens - (0 if final else b.reserved_tokens)
            left = limit - used.total_tokens - prompt_tokens
            if left < 16:
                kept = f", {b.reserved_tokens} of them kept for the final call" if b.reserved_tokens and not final \
                    else ""
                raise BudgetExceededError(
                    f"step '{step}': token budget {b.max_total_tokens}{kept} would be exceeded "
                    f"({used.total_tokens} used + {prompt_tokens} prompt tokens)")
            max_tokens = min(max_tokens, left)
        room = self.context_size - prompt_tokens
        if room < 16:
            raise ContextOverflowError(
                f"step '{step}': the prompt needs ~{prompt_tokens} tokens but the context holds "
                f"{self.context_size}. Shorten it or raise llm.context_size.")
        return min(max_tokens, room)

    def _call(self, messages: Messages, *, step: str, schema: dict | None, temperature: float | None,
              max_tokens: int | None, final: bool = False, stop: list[str] | None = None,
              on_text: OnText | None = None) -> Completion:
        prompt_estimate = self.count_messages(messages)
        allowance = self._check_budget(step, prompt_estimate, max_tokens or self.max_tokens, final)
        # passed only when used, so a backend written without them still serves plain calls
        extra = {name: value for name, value in (("stop", stop), ("on_text", on_text)) if value}
        completion = self.backend.complete(
            messages, schema=schema, step=step, max_tokens=allowance,
            temperature=self.temperature if temperature is None else temperature, **extra)
        self.ledger.add(CallRecord(step, self.backend.name, self.backend.model, completion.prompt_tokens,
                                   completion.completion_tokens, completion.seconds))
        return completion

    def chat(self, messages: Messages, *, step: str = "chat", temperature: float | None = None,
             max_tokens: int | None = None, stop: list[str] | None = None, on_text: OnText | None = None) -> str:
        """Plain text reply, cut before the first ``stop`` string; ``on_text`` gets each piece
        as the model writes it (e.g. ``on_text=lambda piece: print(piece, end="")``)."""
        return self._call(messages, step=step, schema=None, temperature=temperature, max_tokens=max_tokens,
                          stop=stop, on_text=on_text).text

    def structured(self, messages: Messages, schema: type[T], *, step: str, temperature: float | None = None,
                   max_tokens: int | None = None, final: bool = False) -> Reply[T]:
        """A reply validated against ``schema`` (``final``: the call may use the reserved tokens).

        Decoding is constrained to the schema where the backend can; the reply is
        then cleaned, repaired and validated.  An invalid reply is retried with the
        error fed back, at most ``retries`` times; then ``StructuredOutputError``.
        """
        json_schema = schema.model_json_schema()
        conversation = list(messages)
        raws: list[str] = []
        error = ""
        for attempt in range(1, self.retries + 2):
            completion = self._call(conversation, step=step, schema=json_schema,
                                    temperature=temperature, max_tokens=max_tokens, final=final)
            raws.append(completion.text)
            try:
                value = parse_reply(completion.text, schema)
                return Reply(value, completion.text, attempt, list(messages), raws)
            except ReplyParseError as exc:
                error = str(exc)
                if completion.finish_reason == "length":
                    error += " (the reply was cut off at the token limit: answer more briefly)"
            conversation = [*messages, {"role": "assistant", "content": completion.text[:1500]},
                            {"role": "user", "content": render("structured_repair", self.repair_template, error=error,
                                                               schema=schema_for_prompt(schema))}]
        raise StructuredOutputError(step, raws, error)


def make_llm(config: Config, budget: Budget | None = None, ledger: UsageLedger | None = None) -> LLM:
    """A fresh LLM (new ledger) over the shared backend for ``config.llm``."""
    return LLM(get_backend(config.llm), temperature=config.llm.temperature,
               max_tokens=config.llm.max_tokens, retries=config.llm.retries, budget=budget, ledger=ledger)
