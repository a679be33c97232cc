"""Expose an ``LLM`` as a LangChain chat model, so notebooks can use LangChain idioms
(``invoke``, prompt templates, ``|`` chains, ``with_structured_output``) while the
calls still go through our backend, accounting and structured-output repair.
"""
from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ConfigDict

from helpers.models.llm import LLM

_ROLES = {"human": "user", "ai": "assistant", "system": "system"}


def to_chat_messages(messages: list[BaseMessage]) -> list[dict[str, str]]:
    return [{"role": _ROLES.get(m.type, "user"), "content": str(m.content)} for m in messages]


class LabChatModel(BaseChatModel):
    """A LangChain chat model over this project's ``LLM`` (shares its loaded model and ledger)."""

    llm: Any
    step: str = "langchain"
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return f"deepsearch-lab-{self.llm.backend.name}"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        text = self.llm.chat(to_chat_messages(messages), step=self.step)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def with_structured_output(self, schema: type[BaseModel], **kwargs: Any) -> Runnable:  # type: ignore[override]
        llm: LLM = self.llm

        def call(value: Any) -> BaseModel:
            messages = value.to_messages() if hasattr(value, "to_messages") else value
            if isinstance(messages, str):
                chat = [{"role": "user", "content": messages}]
            else:
                chat = to_chat_messages(messages)
            return llm.structured(chat, schema, step=self.step).value

        return RunnableLambda(call)
