"""Expose an ``LLM`` as a LangChain chat model, so notebooks can use LangChain idioms
(``invoke``, prompt templates, ``|`` chains, ``with_structured_output``) while the
calls still go through our backend, budget, usage ledger and structured-output repair.

What LangChain gets: stop sequences (passed to the backend, which ends the reply
before the first one), usage metadata on every message (prompt, completion and
total tokens of that call), token streaming (``stream`` yields the pieces as the
model writes them, and callback handlers get ``on_llm_new_token``; with
``streaming=True``, LangChain's own switch, ``invoke`` streams too), and
``with_structured_output`` that uses our decoding grammar and retries, with
``include_raw`` as in LangChain's own chat models.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
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


class LabChatModel(BaseChatModel):
    """A LangChain chat model over this project's ``LLM`` (shares its loaded model, budget and ledger)."""

    llm: Any
    step: str = "langchain"
    streaming: bool = False  # True: invoke goes through _stream (callback handlers get each token)
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
        """One unstreamed call, whose usage is the backend's own count (``streaming=True`` streams instead)."""
        before = (self.llm.ledger.prompt_tokens, self.llm.ledger.completion_tokens)
        text = self.llm.chat(to_chat_messages(messages), step=self.step, stop=stop)
        message = AIMessage(content=text, usage_metadata=self._usage_since(before))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: Any = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        """The reply's pieces as the model writes them, then an empty chunk with the call's usage.
        The call runs in a worker thread; leaving the loop early waits for the reply to end."""
        pieces: queue.Queue = queue.Queue()
        before = (self.llm.ledger.prompt_tokens, self.llm.ledger.completion_tokens)

        def work() -> None:
            try:
                self.llm.chat(to_chat_messages(messages), step=self.step, stop=stop,
                              on_text=lambda piece: pieces.put(("text", piece)))
                pieces.put(("done", None))
            except BaseException as exc:  # handed to the reading thread, which raises it
                pieces.put(("error", exc))

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        try:
            while (item := pieces.get())[0] == "text":  # LangChain passes each chunk to the callback handlers
                yield ChatGenerationChunk(message=AIMessageChunk(content=item[1]))
            if item[0] == "error":
                raise item[1]
            yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=self._usage_since(before),
                                                             chunk_position="last"))
        finally:
            worker.join()

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
