"""One entry point for every strategy, so the CLI, the demo and the evaluation
harness can run them by name."""
from __future__ import annotations

from typing import Callable

from .config import Config
from .deepsearcher import run_deepsearcher, run_naive
from .trace import Result


def _run_deepsearch(question: str, config: Config, **kwargs) -> Result:
    from .deepsearch_agent import run_deepsearch
    return run_deepsearch(question, config, **kwargs)


STRATEGIES: dict[str, Callable[..., Result]] = {
    "naive": run_naive,
    "deepsearcher": run_deepsearcher,
    "deepsearch": _run_deepsearch,
}


def run_strategy(name: str, question: str, config: Config, **kwargs) -> Result:
    """Run strategy ``name`` ('naive', 'deepsearcher' or 'deepsearch') on ``question``."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy '{name}'; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](question, config, **kwargs)
