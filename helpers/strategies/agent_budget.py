"""The agent's token budget: what one run may spend, how much of it the memory may
take in one prompt, and the tokens kept back so the final answer can always be written.

The agent gets its own ``LLM`` over the caller's backend and ledger, whose total-token
limit ends ``agent.token_budget`` tokens after the run starts.  Before every call that
is not the final answer, the tokens the beast-mode answer would need (its prompt, today's
memory, the reply) are reserved in that budget (``LLM.reserve``), so neither the call nor
its retries after invalid replies can use them.
"""
from __future__ import annotations

from helpers.errors import BudgetExceededError
from helpers.models.llm import LLM, Budget
from helpers.strategies.agent_memory import AgentMemory
from helpers.strategies.agent_prompts import TEMPLATE_SLACK


class NoRoomForCall(BudgetExceededError):
    """A call would use tokens that are kept back for the final answer."""


class AgentBudget:
    """One run's budget.  ``llm`` is the run's own LLM (same backend and ledger as the caller's)."""

    def __init__(self, llm: LLM, token_budget: int, *, memory_share: float, answer_tokens: int,
                 memory: AgentMemory):
        limit = llm.ledger.total_tokens + token_budget - TEMPLATE_SLACK
        if llm.budget.max_total_tokens is not None:
            limit = min(limit, llm.budget.max_total_tokens)
        budget = Budget(max_calls=llm.budget.max_calls, max_prompt_tokens=llm.budget.max_prompt_tokens,
                        max_total_tokens=limit)
        self.llm = LLM(llm.backend, temperature=llm.temperature, max_tokens=llm.max_tokens, retries=llm.retries,
                       budget=budget, ledger=llm.ledger, repair_template=llm.repair_template)
        self.memory_cap = int(memory_share * token_budget)  # the most tokens memory may take in one prompt
        self.answer_tokens = answer_tokens
        self.memory = memory

    @property
    def limit(self) -> int:
        """The ledger total this run may reach."""
        return self.llm.budget.max_total_tokens

    def tokens_left(self) -> int:
        return self.limit - self.llm.ledger.total_tokens

    def final_reserve(self, final_prompt_tokens: int) -> int:
        """Tokens kept back for the final answer: its prompt (``final_prompt_tokens`` without memory)
        with today's memory (at most the memory cap) plus the reply.  Memory that grows later is
        trimmed to what is left (``final_memory_tokens``)."""
        memory, _ = self.memory.render(self.llm.count_tokens, self.memory_cap)
        memory_tokens = min(self.llm.count_tokens(memory), self.memory_cap)
        return final_prompt_tokens + memory_tokens + self.answer_tokens

    def final_memory_tokens(self, final_prompt_tokens: int) -> int:
        """The memory the final answer's prompt may carry with what is left."""
        return min(self.memory_cap, self.tokens_left() - final_prompt_tokens - self.answer_tokens)

    def check_room(self, messages: list[dict], max_tokens: int, final_prompt_tokens: int) -> None:
        """Reserve what the final answer needs, then ask the budget whether this call still fits
        beside it; ``NoRoomForCall`` when it does not."""
        cost = self.llm.count_messages(messages) + max_tokens
        reserve = self.final_reserve(final_prompt_tokens)
        self.llm.reserve(reserve)
        if not self.llm.has_room(1, cost):
            raise NoRoomForCall(f"this call (up to {cost} tokens) would eat into the {reserve} tokens "
                                f"kept for the final answer ({self.tokens_left()} left)")
