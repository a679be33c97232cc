"""Dates as values: what a passage writes ("20 March 851", "c. 470 BC") read into something code
can compare.

A date keeps the precision it was written with: ``Date(1954, 1, 11)`` is a day, ``Date(1954, 0, 0)``
only a year (0 marks a part the text leaves out), and years before the common era are negative
(``Date(-384, 0, 0)`` is 384 BC).  Day and month are read by ``dateutil``; the era, "c." and the
year are read here, since ``dateutil`` knows no era.  Two dates that their precision cannot tell
apart (1950 against some day in 1950) are neither earlier nor later: the comparison says so
(``None``) rather than guess.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import NamedTuple

from dateutil import parser as dateparser

_BC = re.compile(r"\b(\d{1,4})\s*(?:BC|BCE|B\.C\.(?:E\.)?)(?![A-Za-z])")
_AD = re.compile(r"\b(?:AD|A\.D\.)\s*(\d{1,4})\b|\b(\d{1,4})\s*(?:AD|CE|A\.D\.)(?![A-Za-z])")
_YEAR = re.compile(r"(?<![\d,.])(\d{3,4})(?![\d,]|s\b)")  # "1980s" is a decade, no year
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = re.compile(r"\b(" + "|".join(m[:3] for m in _MONTHS) + r")[a-z]*\.?", re.IGNORECASE)


class Date(NamedTuple):
    """A date as precise as its text: month and day 0 when not written; a negative year is BC."""

    year: int
    month: int = 0
    day: int = 0


def parse_date(text: str) -> Date | None:
    """The first date ``text`` writes, or None.  "20 March 851" -> Date(851, 3, 20); "December 8,
    1982" -> Date(1982, 12, 8); "1954-01-11" -> Date(1954, 1, 11); "c. 470 BC" -> Date(-470); "AD 5" -> Date(5);
    "1901–1985" -> Date(1901) (a range gives its start)."""
    if not text:
        return None
    if bc := _BC.search(text):
        return Date(-int(bc.group(1)))
    if (ad := _AD.search(text)) and len(ad.group(1) or ad.group(2)) < 3:
        return Date(int(ad.group(1) or ad.group(2)))
    iso = re.search(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", text)
    if iso:
        return _checked(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
    year = _YEAR.search(text)
    if year is None:
        return None
    month = _MONTH.search(text)
    if month is None:
        return Date(int(year.group(1)))
    # the stretch that holds the year and the month (and the day between or before them)
    start, end = min(month.start(), year.start()), max(month.end(), year.end())
    window = text[max(0, start - 4): end]
    try:
        one = dateparser.parse(window, fuzzy=True, default=datetime(2000, 1, 1))
        two = dateparser.parse(window, fuzzy=True, default=datetime(2000, 1, 2))
    except (ValueError, OverflowError):
        return Date(int(year.group(1)))
    day = one.day if one.day == two.day else 0
    return Date(int(year.group(1)), one.month, day)


def _checked(year: int, month: int, day: int) -> Date:
    return Date(year, month if 1 <= month <= 12 else 0, day if 1 <= day <= 31 and 1 <= month <= 12 else 0)


def order(a: Date, b: Date) -> int | None:
    """-1 when ``a`` comes first, 1 when ``b`` does, 0 on the same date; None when their precision
    cannot tell (the same year where one gives no month, the same month where one gives no day)."""
    for part in range(3):
        if a[part] != b[part]:
            if part and 0 in (a[part], b[part]):
                return None
            return -1 if a[part] < b[part] else 1
    return 0


def extreme(dates: list[Date], earliest: bool) -> int | None:
    """The index of the earliest (or latest) of ``dates``; None when another date cannot be told
    apart from it (the same date, or a precision that cannot order them)."""
    best = 0
    for i in range(1, len(dates)):
        placed = order(dates[i], dates[best])
        if placed in (None, 0):
            return None
        if (placed < 0) == earliest:
            best = i
    if any(i != best and order(date, dates[best]) in (None, 0) for i, date in enumerate(dates)):
        return None
    return best if dates else None


_YEAR_OR_DECADE = re.compile(r"(?<![\d,.:$])(1[5-9]\d\d|20\d\d)(?:s\b|(?!\d|,\d))")


def years_in(text: str) -> list[int]:
    """The years ``text`` writes, in order, a decade ("the 1990s") as its first year: the marks a
    passage's place on a timeline is read from.  Only four-digit years from 1500 to 2099, so counts and
    sums ("552 episodes", "30,000 dollars") are no year."""
    return [int(m.group(1)) for m in _YEAR_OR_DECADE.finditer(text)]
