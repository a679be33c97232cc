"""The operators a program's steps run in code over earlier results (``program.OPERATORS``):
compare (earliest, latest, most, least, same), check (before) and compute (years_between, age).

Each takes the results of its input steps as text ("12 May 1920", "1,234") and reads them as
values (``helpers.values``); a small model compares two dates no better than a coin, and code
never miscounts.  An operator that cannot decide (a value missing or unreadable, two dates its
precision cannot order) returns ``Outcome(None, why)``, and the chain answers otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

from helpers.answer_text import names_one_of, normalise, without_accents
from helpers.values import age_at, extreme, order, parse_date, parse_number, years_between


@dataclass
class Outcome:
    """An operator's result: ``value`` ("yes", "24", or the 0-based index of the winning input for
    earliest/latest/most/least), or None with ``why`` it could not decide; ``shown`` says what it
    compared, for the trace."""

    value: str | int | None
    why: str = ""
    shown: str = ""


def run_operator(op: str, inputs: list[str]) -> Outcome:
    """``op`` over the results ``inputs`` of its input steps (see the module docstring)."""
    if op == "same":
        return _same(inputs)
    readers = {"most": parse_number, "least": parse_number}
    if op in readers and any((date := parse_date(text)) and date.month for text in inputs):
        return Outcome(None, f"{op} compares numbers, and an input is a date", " | ".join(inputs))
    values = [readers.get(op, parse_date)(text) for text in inputs]
    shown = ", ".join(f"{text!r} -> {value}" for text, value in zip(inputs, values))
    missing = [text for text, value in zip(inputs, values) if value is None]
    if missing:
        kind = "number" if op in readers else "date"
        return Outcome(None, f"{', '.join(repr(m) for m in missing)} gives no {kind}", shown)
    if op in ("most", "least"):
        best = (max if op == "most" else min)(values)
        winners = [i for i, v in enumerate(values) if v == best]
        return Outcome(winners[0], "", shown) if len(winners) == 1 else Outcome(None, "a tie", shown)
    if op in ("earliest", "latest"):
        best = extreme(values, op == "earliest")
        return Outcome(None, "two dates cannot be told apart at the precision written", shown) if best is None \
            else Outcome(best, "", shown)
    first, second = values
    if op == "before":
        placed = order(first, second)
        if placed is None or placed == 0:
            return Outcome(None, "the dates cannot be told apart at the precision written", shown)
        return Outcome("yes" if placed < 0 else "no", "", shown)
    if op == "years_between":
        return Outcome(str(years_between(first, second)), "", shown)
    age = age_at(first, second)
    return Outcome(None, "the second date comes before the first", shown) if age is None else \
        Outcome(str(age), "", shown)


def _same(inputs: list[str]) -> Outcome:
    """yes when every input names the same thing (one name holds the other's words, accents and
    case aside), else no."""
    keys = [normalise(without_accents(text)) for text in inputs]
    if not all(keys):
        return Outcome(None, "an input is empty")
    first = inputs[0]
    same = all(k == keys[0] or names_one_of(text, [first]) or names_one_of(first, [text])
               for k, text in zip(keys[1:], inputs[1:]))
    return Outcome("yes" if same else "no", "", " | ".join(inputs))
