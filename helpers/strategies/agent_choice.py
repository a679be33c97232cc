"""How the DeepSearch agent chooses its next action (``DeepSearchAgent`` inherits these): whether a
draft is due, whether a step stalled, the default when the model gives no usable choice, and the
one place its model calls are made and traced (``_ask``)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from helpers.errors import BudgetExceededError, ContextOverflowError, StructuredOutputError
from helpers.results import TraceStep, traced
from helpers.strategies.agent_actions import step_models


class ActionChoice:
    """The choice of action and the agent's model calls; the state they use is the agent's."""

    def _draft_reason(self) -> str | None:
        """Why the next step must answer (``agent.max_stalls``, ``agent.draft_every``), or ``None``."""
        if 0 < self.limits.max_stalls <= self.stalls:
            return f"{self.stalls} stalled step(s) in a row"
        if 0 < self.limits.draft_every <= self.steps_since_answer:
            return f"{self.steps_since_answer} step(s) without an answer attempt"
        return None

    def _progress(self) -> tuple[int, ...]:
        """What a step can add: passages, sub-questions (asked ever), knowledge, answer attempts."""
        return (len(self.memory.evidence), len(self.question_dedup.texts), len(self.memory.knowledge),
                len(self.memory.bad_attempts))

    def _stalled(self, decision: BaseModel, before: tuple[int, ...]) -> str:
        """Why the step just taken stalled ('' when it did not): it repeated a request the model
        made before, or it added nothing.  An answer attempt never stalls."""
        if decision.action == "answer":
            return ""
        field = {"search": "queries", "visit": "visit", "reflect": "gap_questions"}[decision.action]
        payload = getattr(decision, field)
        key = (decision.action, *sorted(str(item).strip().lower() for item in payload))
        repeated = key in self.requests
        self.requests.add(key)
        if repeated:
            return f"the same {decision.action} was asked for before"
        return "" if self._progress() != before else f"the {decision.action} added nothing new"

    def _default_decision(self, question: str, allowed: list[str]) -> BaseModel:
        """What to do when the model gave no usable action: search the current question, else
        read the best unread document (searching regardless when neither is allowed)."""
        if "visit" in allowed and "search" not in allowed:
            number = self.memory.unvisited()[0][0]
            return step_models(["visit"], self.collections)["visit"](action="visit", visit=[number])
        return step_models(["search"], self.collections)["search"](action="search", queries=[question])

    # model calls and the budget ---------------------------------------------------
    def _ask(self, step_name: str, messages: list[dict], schema: type[BaseModel], max_tokens: int, *,
             final: bool = False, notes: tuple[str, ...] | list[str] = (),
             **inputs: Any) -> tuple[BaseModel | None, TraceStep]:
        """One structured call, traced: its reply (``None`` when the model gave no valid one) and
        its trace entry, for the caller's notes on what it did with the reply.

        Unless ``final``, the call must leave the tokens kept for the final answer
        (``AgentBudget.check_room``): ``NoRoomForCall`` when it cannot; retries after invalid
        replies cannot use them either (``BudgetExceededError``).
        """
        with traced(self.trace, self.llm.ledger, step_name, self.step, **inputs) as entry:
            entry.messages = messages
            entry.prompts = self.prompts.take_used()  # the prompts these messages were built from
            entry.notes.extend(notes)
            if not final:
                try:
                    self.budget.check_room(messages, max_tokens, self.prompter.beast_prompt_tokens)
                except BudgetExceededError as exc:
                    entry.notes.append(f"not run: {exc}")
                    raise
            try:
                reply = self.llm.structured(messages, schema, step=step_name, max_tokens=max_tokens, final=final)
            except StructuredOutputError as exc:
                entry.raw = exc.raw_replies[-1] if exc.raw_replies else None
                entry.notes.append(f"no valid reply after {len(exc.raw_replies)} attempt(s): {exc.last_error}")
                return None, entry
            except ContextOverflowError as exc:
                entry.notes.append(f"prompt too long: {exc}")
                return None, entry
            except BudgetExceededError as exc:
                entry.notes.append(f"token budget: {exc}")
                raise
            entry.raw, entry.parsed = reply.raw, reply.value.model_dump()
            if reply.attempts > 1:
                entry.notes.append(f"valid only at attempt {reply.attempts}")
            return reply.value, entry

    def _reply(self, step_name: str, messages: list[dict], schema: type[BaseModel],
               max_tokens: int) -> BaseModel | None:
        """``_ask`` as the answer checks use it: the reply only."""
        return self._ask(step_name, messages, schema, max_tokens)[0]

    # actions ---------------------------------------------------------------------------
