"""One entry point for every strategy, so the CLI, the demo and the evaluation
harness can run them by name."""
from __future__ import annotations

import re
from typing import Callable

from helpers.config import Config
from helpers.errors import InputError
from helpers.results import Result
from helpers.strategies.chain import run_chain
from helpers.strategies.naive import run_naive, run_naive_titles
from helpers.strategies.pipeline import run_pipeline


def _run_agent(question: str, config: Config, **kwargs) -> Result:
    from helpers.strategies.agent import run_agent
    return run_agent(question, config, **kwargs)


STRATEGIES: dict[str, Callable[..., Result]] = {
    "naive": run_naive,           # one search, one answer: the baseline
    "naive_titles": run_naive_titles,  # the pages the question names (title lookup, no call), then naive
    "deepsearcher": run_pipeline,  # decompose, route, retrieve, judge, reflect, report
    "chain": run_chain,           # hop by hop: plan simple steps, search and read each, fill answers forward
    "deepsearch": _run_agent,     # the agent loop with masked actions and answer checks
}
ALIASES = {"pipeline": "deepsearcher", "agent": "deepsearch"}


def strategy_name(name: str) -> str:
    """The registered name for ``name`` (aliases accepted); a clear error for unknown names."""
    name = ALIASES.get(name, name)
    if name not in STRATEGIES:
        raise InputError(f"unknown strategy '{name}': choose one of {', '.join(STRATEGIES)}")
    return name


def check_question(question: str) -> None:
    """Refuse a question with no word in it (empty, blanks or punctuation only)."""
    if not re.search(r"\w", question or ""):
        raise InputError(f"the question {question!r} has no words in it: ask a question in words")


def run_strategy(name: str, question: str, config: Config, **kwargs) -> Result:
    """Run strategy ``name`` ('naive', 'deepsearcher', 'chain' or 'deepsearch') on ``question``."""
    check_question(question)
    return STRATEGIES[strategy_name(name)](question, config, **kwargs)
