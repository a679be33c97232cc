"""Expose an ``LLM`` as a LangChain chat model, so notebooks can use LangChain idioms
(``invoke``, prompt templates, ``|`` chains, ``with_structured_output``) while the
calls still go through our backend, budget, usage ledger and structured-output repair.

What LangChain gets: stop sequences (the reply is cut at the first one), usage
metadata on every message (prompt, completion and total tokens of that call),
``stream`` (the whole reply as one chunk: our backends return complete replies),
and ``with_structured_output`` that uses our decoding grammar and retries, with
``include_raw`` as in LangChain's own chat models.
"""
from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ConfigDict

from helpers.errors import InputError, StructuredOutputError
from helpers.models.llm import LLM

_ROLES = {"human": "user", "ai": "assistant", "system": "system"}


def to_chat_messages(messages: list[BaseMessage]) -> list[dict[str, str]]:
    return [{"role": _ROLES.get(m.type, "user"), "content": str(m.content)} for m in messages]


def _as_chat(value: Any) -> list[dict[str, str]]:
    """A prompt value, a message list or a plain string as our chat messages."""
    messages = value.to_messages() if hasattr(value, "to_messages") else value
    return [{"role": "user", "content": messages}] if isinstance(messages, str) else to_chat_messages(messages)


def cut_at_stop(text: str, stop: list[str] | None) -> str:
    """``text`` up to the first of the ``stop`` strings (all of it when none occurs)."""
    cuts = [text.index(s) for s in stop or [] if s and s in text]
    return text[: min(cuts)] if cuts else text


class LabChatModel(BaseChatModel):
    """A LangChain chat model over this project's ``LLM`` (shares its loaded model, budget and ledger)."""

    llm: Any
    step: str = "langchain"
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return f"deepsearch-lab-{self.llm.backend.name}"

    def _usage_since(self, before: tuple[int, int]) -> dict[str, int]:
        ledger = self.llm.ledger
        prompt, completion = ledger.prompt_tokens - before[0], ledger.completion_tokens - before[1]
        return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        before = (self.llm.ledger.prompt_tokens, self.llm.ledger.completion_tokens)
        text = cut_at_stop(self.llm.chat(to_chat_messages(messages), step=self.step), stop)
        message = AIMessage(content=text, usage_metadata=self._usage_since(before))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def with_structured_output(self, schema: type[BaseModel], *, include_raw: bool = False,  # type: ignore[override]
                               **kwargs: Any) -> Runnable:
        """A runnable returning ``schema`` instances, decoded under our grammar and retried when invalid.
        With ``include_raw`` it returns ``{"raw": AIMessage, "parsed": value or None, "parsing_error": ...}``."""
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise InputError("with_structured_output takes a pydantic model class here (our grammar is built "
                             "from its JSON schema)")
        llm: LLM = self.llm

        def call(value: Any) -> Any:
            before = (llm.ledger.prompt_tokens, llm.ledger.completion_tokens)
            try:
                reply = llm.structured(_as_chat(value), schema, step=self.step)
            except StructuredOutputError as exc:
                if not include_raw:
                    raise
                raw = AIMessage(content=exc.raw_replies[-1] if exc.raw_replies else "",
                                usage_metadata=self._usage_since(before))
                return {"raw": raw, "parsed": None, "parsing_error": exc}
            if not include_raw:
                return reply.value
            raw = AIMessage(content=reply.raw, usage_metadata=self._usage_since(before))
            return {"raw": raw, "parsed": reply.value, "parsing_error": None}

        return RunnableLambda(call)
