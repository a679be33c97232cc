"""Strategy specs as the evaluation and the CLI read them: ``name[:parameter][/mode]``."""
from __future__ import annotations

from helpers.errors import InputError
from helpers.evaluation.oracle import ORACLE
from helpers.strategies.registry import strategy_name

STRATEGY_PARAMETER = {"deepsearcher": "pipeline.max_iter", "chain": "chain.max_hops",
                      "deepsearch": "agent.token_budget"}


def parse_strategy(spec: str) -> tuple[str, str, dict]:
    """A strategy spec -> (label, name, config overrides).

    ``name[:parameter][/mode]``: 'naive', 'deepsearcher:2' (max_iter), 'chain:3' (max_hops),
    'deepsearch:8000' (token budget), and '/dense' or '/hybrid' for the search mode, e.g. 'naive/hybrid'.
    ``oracle`` is the answer step given the gold passages (the reader's ceiling)."""
    head, _, mode = spec.partition("/")
    name, _, parameter = head.partition(":")
    name = name if name == ORACLE and not parameter and not mode else strategy_name(name)
    overrides: dict = {}
    if parameter:
        key = STRATEGY_PARAMETER.get(name)
        if key is None:
            raise InputError(f"strategy '{name}' takes no parameter (got '{spec}')")
        if not parameter.isdigit() or int(parameter) < 1:
            raise InputError(f"'{spec}': the parameter of '{name}' ({key}) must be a whole number of at least 1")
        overrides[key] = int(parameter)
    if mode:
        if mode not in ("dense", "hybrid"):
            raise InputError(f"'{spec}': the search mode after '/' must be 'dense' or 'hybrid'")
        overrides["search.mode"] = mode
    return spec, name, overrides


def strategy_list(text: str) -> list[str]:
    """Comma-separated strategy specs, each checked; an empty list, an empty name or a repeat is refused."""
    specs = [part.strip() for part in text.split(",")]
    if not all(specs):
        raise InputError(f"--strategies {text!r} names an empty strategy: list names separated by commas, "
                         "e.g. --strategies naive,chain (or leave the option out for the default set)")
    repeated = sorted({spec for spec in specs if specs.count(spec) > 1})
    if repeated:
        raise InputError(f"--strategies names {', '.join(repeated)} more than once: name each strategy once")
    for spec in specs:
        parse_strategy(spec)
    return specs
