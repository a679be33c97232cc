"""The DeepSearch agent's prompts, built from its memory: the action prompt of each
step, the beast-mode prompt and the query-rewrite prompt.  The texts themselves
are the ``agent_*`` files in ``helpers/prompts/``; this module only fills them in and
trims the memory to the room a prompt has."""
from __future__ import annotations

import re
from functools import cached_property

from helpers.errors import VectorStoreError
from helpers.knowledge.store import VectorStore
from helpers.models.llm import LLM
from helpers.prompts import PromptSet
from helpers.strategies.agent_actions import MAX_QUERIES
from helpers.strategies.agent_memory import AgentMemory, one_line

TEMPLATE_SLACK = 32  # tokens the chat template may add beyond llm.count_messages' estimate


def describe_collections(store: VectorStore, collections: list[str]) -> str:
    """One line per collection: its name and the first clause of its description."""
    lines = []
    for name in collections:
        try:
            description = store.info(name).description
        except VectorStoreError:
            description = ""
        summary = re.split(r"[:.]", description, maxsplit=1)[0]
        lines.append(f"- {name}: {one_line(summary, 110)}" if summary else f"- {name}")
    return "\n".join(lines)


class AgentPrompter:
    """Fills in the agent's prompts for one run (``question``) from its ``memory``."""

    def __init__(self, question: str, prompts: PromptSet, llm: LLM, memory: AgentMemory, *,
                 answer_tokens: int, collections_text: str):
        self.question = question
        self.prompts = prompts
        self.llm = llm
        self.memory = memory
        self.answer_tokens = answer_tokens
        self.collections_text = collections_text

    def messages(self, actions: str, focus: str, memory_tokens: int, *, web: bool) -> tuple[list[dict], list[str]]:
        """System + user messages with the memory trimmed to fit both the context and ``memory_tokens``;
        returns them and the notes saying what was trimmed.

        The order serves llama.cpp's prefix reuse (``helpers.models.prompt_cache``): the system message
        (every action described once) never changes within a run, the memory grows at its end, and
        only the short ``<now>`` block after it (the actions open at this step) is new every time."""
        web_line = '\nSet "web": true to also search the web.' if web else ""
        system = self.prompts.render("agent_system", collections=self.collections_text, web=web_line)
        values = {"question": self.question, "focus": focus, "actions": actions}
        fixed = self.llm.count_tokens(system + self.prompts.render("agent_action", memory="", **values))
        room = min(self.llm.context_size - fixed - self.answer_tokens - TEMPLATE_SLACK, memory_tokens)
        memory, notes = self.memory.render(self.llm.count_tokens, room) if room > 0 else ("", [])
        user = self.prompts.render("agent_action", memory=memory, **values)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}], notes

    def action_messages(self, current: str, allowed: list[str], *, memory_tokens: int, web: bool,
                        max_visits: int, gap_room: int, asked: list[str],
                        draft: bool = False) -> tuple[list[dict], list[str]]:
        """The prompt of one step: one line per allowed action with what it needs now (searches made,
        unread documents, sub-questions asked), and a focus on ``current`` when it is a sub-question
        rather than the question itself.  ``draft``: answering is required now (``agent.draft_every``,
        ``agent.max_stalls``), and the answer line says so."""
        lines = []
        if "search" in allowed:
            lines.append(self.prompts.render("agent_action_search", done="; ".join(self.memory.queries[-10:]) or "none"))
        if "visit" in allowed:
            documents = "\n".join(f"  [{n}] {hit.title}" for n, hit in self.memory.unvisited()[:8])
            lines.append(self.prompts.render("agent_action_visit", max_visits=max_visits, documents=documents))
        if "reflect" in allowed:
            lines.append(self.prompts.render("agent_action_reflect", room=gap_room,
                                             asked="; ".join(asked) or "nothing yet"))
        if "answer" in allowed:
            target = "the question above" if current == self.question else "the current sub-question"
            lines.append(self.prompts.render("agent_action_draft" if draft else "agent_action_answer", target=target))
        focus = self.prompts.render("agent_focus", sub_question=current) if current != self.question else ""
        return self.messages("\n".join(line.rstrip() for line in lines), focus, memory_tokens, web=web)

    def final_messages(self, memory_tokens: int, *, web: bool) -> tuple[list[dict], list[str]]:
        """The beast-mode prompt, its memory trimmed to ``memory_tokens``."""
        return self.messages(self.prompts.render("agent_beast", question=self.question).rstrip(), "", memory_tokens,
                             web=web)

    @cached_property
    def beast_prompt_tokens(self) -> int:
        """The size of the beast-mode prompt without any memory."""
        size = self.llm.count_messages(self.final_messages(memory_tokens=0, web=True)[0])
        self.prompts.take_used()  # only measured here: not sent by the step under way
        return size

    def rewrite_messages(self, current: str, requests: list[str]) -> list[dict]:
        """The prompt that turns a step's requested queries into (at most ``MAX_QUERIES``) better ones."""
        prompt = self.prompts.render("agent_rewrite", question=current, requests="\n".join(f"- {r}" for r in requests),
                                     done="; ".join(self.memory.queries[-10:]) or "none", max_queries=MAX_QUERIES)
        return [{"role": "system", "content": self.prompts.render("agent_rewrite_system")},
                {"role": "user", "content": prompt}]
