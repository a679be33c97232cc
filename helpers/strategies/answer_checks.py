"""Answer evaluation, kept apart from answer generation.

A model that grades its own answer in the same prompt tends to approve it.
Here evaluation is a separate series of calls:

1. ``plan_checks`` - one call decides which checks the question needs
   (definitive, freshness, plurality, completeness); the strict check is added
   last when the run asks for it (``agent.strict_check``).
2. ``evaluate_answer`` - each check is its own call, with few-shot examples in
   its prompt file (``helpers/prompts/agent_check_<name>.txt``).  The answer
   passes when every check passes; checking stops at the first failure.
3. ``analyze_failure`` - for a rejected answer, what went wrong and what to do next.

Calls go through an ``Ask`` function supplied by the agent, which records the
trace, enforces the budget and returns ``None`` when the model gave no valid reply.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from pydantic import BaseModel, Field

from helpers.prompts import PromptSet, fence

OPTIONAL_CHECKS = ("definitive", "freshness", "plurality", "completeness")
STRICT_CHECK = "strict"  # reads the cited passages; opt-in (agent.strict_check)

# ask(step name, messages, schema, max reply tokens) -> validated value, or None
Ask = Callable[[str, list[dict], type[BaseModel], int], Optional[BaseModel]]


class CheckPlan(BaseModel):
    definitive: bool = True
    freshness: bool = False
    plurality: bool = False
    completeness: bool = False


class Verdict(BaseModel):
    reasoning: str = Field(description="one or two sentences", json_schema_extra={"maxLength": 200})
    passed: bool


class FailureAnalysis(BaseModel):
    what_went_wrong: str = Field(description="one sentence", json_schema_extra={"maxLength": 200})
    next_step: str = Field(description="one sentence: what to search for or read next",
                           json_schema_extra={"maxLength": 200})


@dataclass
class CheckResult:
    name: str
    passed: bool
    reasoning: str
    ran: bool = True  # False when the model gave no usable verdict (counted as passed)


@dataclass
class Evaluation:
    passed: bool
    results: list[CheckResult]

    @property
    def failed(self) -> CheckResult | None:
        return next((r for r in self.results if not r.passed), None)


def _user(prompts: PromptSet, text: str) -> list[dict]:
    return [{"role": "system", "content": prompts.render("agent_check_system")},
            {"role": "user", "content": text}]


def plan_checks(ask: Ask, question: str, prompts: PromptSet | None = None, *, strict: bool = False) -> list[str]:
    """The checks for ``question`` (``strict``: the strict check added last).  If the call fails: definitive."""
    prompts = prompts or PromptSet()
    plan = ask("evaluate plan", _user(prompts, prompts.render("agent_eval_plan", question=question)), CheckPlan, 80)
    chosen = plan.model_dump() if plan is not None else {"definitive": True}
    return [name for name in OPTIONAL_CHECKS if chosen.get(name)] + ([STRICT_CHECK] if strict else [])


def check_messages(name: str, question: str, answer: str, passages: str,
                   prompts: PromptSet | None = None) -> list[dict]:
    """The prompt of one check; only the strict check sees the cited passages."""
    prompts = prompts or PromptSet()
    values = {"question": question, "answer": fence(answer)}
    if name == STRICT_CHECK:
        values["passages"] = fence(passages) if passages else "(the answer cites no passage)"
    return _user(prompts, prompts.render(f"agent_check_{name}", **values))


def evaluate_answer(ask: Ask, question: str, answer: str, passages: str, checks: list[str],
                    prompts: PromptSet | None = None) -> Evaluation:
    """Run the checks one by one; stop at the first that fails."""
    results = []
    for name in checks:
        verdict = ask(f"check {name}", check_messages(name, question, answer, passages, prompts), Verdict, 160)
        if verdict is None:
            results.append(CheckResult(name, True, "no usable verdict from the model; check skipped", ran=False))
            continue
        results.append(CheckResult(name, verdict.passed, verdict.reasoning))
        if not verdict.passed:
            break
    return Evaluation(all(r.passed for r in results), results)


def analyze_failure(ask: Ask, question: str, answer: str, failed: CheckResult,
                    recent_steps: list[str], prompts: PromptSet | None = None) -> tuple[str, str]:
    """(what went wrong, what to do next); falls back to the check's own reasoning."""
    prompts = prompts or PromptSet()
    prompt = prompts.render("agent_analyze", question=question, answer=fence(answer), check=failed.name,
                            verdict=failed.reasoning, steps="\n".join(recent_steps) or "(none)")
    analysis = ask("analyze", _user(prompts, prompt), FailureAnalysis, 200)
    if analysis is None:
        return failed.reasoning, "Search for the facts the answer lacked, with new queries, before answering again."
    return analysis.what_went_wrong, analysis.next_step
