"""The model client: one backend chosen by the configuration (``helpers.models.backend``), with
accounting, budgets, retries and structured output that small models cannot break.

* ``LlamaCppBackend`` - embedded llama.cpp (default, offline, GGUF file; ``llamacpp_backend``)
* ``OllamaBackend``   - an Ollama server (``ollama_backend``)
* ``OpenAIBackend``   - any OpenAI-compatible server (``openai_backend``)

Agent code talks to an ``LLM``: ``llm.chat(messages, step=...)`` for text and
``llm.structured(messages, Schema, step=...)`` for validated pydantic objects.
Every backend honours ``stop`` strings and can stream: with ``on_text`` a function
gets each piece of the reply as the model writes it.  Every call is written to the
LLM's ``UsageLedger``.  Nothing here uses asyncio, so it is safe inside Jupyter's
running event loop.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pydantic import BaseModel

from helpers.config import Config, LLMConfig
from helpers.errors import BudgetExceededError, ContextOverflowError, StructuredOutputError
from helpers.models.backend import ChatBackend, Completion, Messages, OnText
from helpers.models.llamacpp_backend import LlamaCppBackend
from helpers.models.ollama_backend import OllamaBackend
from helpers.models.openai_backend import OpenAIBackend
from helpers.models.structured import ReplyParseError, parse_reply, schema_for_prompt
from helpers.models.usage import CallRecord, UsageLedger
from helpers.prompts import render

T = TypeVar("T", bound=BaseModel)


_BACKENDS: dict[tuple, ChatBackend] = {}


def get_backend(config: LLMConfig) -> ChatBackend:
    """The backend ``config.provider`` names (never another one), created once per setting and reused
    (a loaded GGUF stays in memory)."""
    provider, host = config.provider, config.base_url
    key = (provider, config.model, config.seed, config.context_size, config.threads, host, config.structured_mode,
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
