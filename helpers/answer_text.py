"""How short answers are written and compared, shared by the answer step and the scorer: the
standard normalisation of QA benchmarks, and the options an "A or B" question offers."""
from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    """The standard answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def question_options(question: str) -> list[str]:
    """The options an "A or B" question offers after its last comma or colon ("Which film came out
    first, Blind Shaft or The Mask?" -> ["Blind Shaft", "The Mask"]); [] when it offers none."""
    body = question.strip().rstrip("?").strip()
    if not re.search(r"[,:]", body):
        return []
    clause = re.split(r"[,:]\s*", body)[-1]
    parts = [p.strip() for p in re.split(r"\s+or\s+", clause) if p.strip()]
    return parts if len(parts) >= 2 else []


_MONTHS = {m: n for n, m in enumerate(("january february march april may june july august september october "
                                       "november december").split(), start=1)}
_DAY_MONTH_YEAR = re.compile(r"\b(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{3,4})\b")
_MONTH_DAY_YEAR = re.compile(r"\b([A-Za-z]+)\.?\s+(\d{1,2}),?\s+(\d{3,4})\b")
_MONTH_YEAR = re.compile(r"\b([A-Za-z]+)\.?,?\s+(\d{3,4})\b")
_YEAR = re.compile(r"\b(\d{3,4})\b")


def parse_date(text: str) -> tuple[int, int, int] | None:
    """The first date a text writes, as (year, month, day); 0 for a part it leaves out
    ("20 March 851" -> (851, 3, 20), "December 8, 1982" -> (1982, 12, 8), "1957" -> (1957, 0, 0))."""
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy"), (_MONTH_YEAR, "my")):
        for match in pattern.finditer(text):
            parts = dict(zip(order, match.groups()))
            month = _MONTHS.get(parts["m"].lower())
            if month:
                return int(parts["y"]), month, int(parts.get("d", 0))
    match = _YEAR.search(text)
    return (int(match.group(1)), 0, 0) if match else None


_EARLIER = re.compile(r"\b(first|earlier|earliest|older|oldest|before|sooner)\b", re.IGNORECASE)
_LATER = re.compile(r"\b(later|latest|last|younger|youngest|after|more recent(?:ly)?|most recent(?:ly)?)\b",
                    re.IGNORECASE)


def wants_earlier(question: str) -> bool | None:
    """True when a comparison asks for the earlier date ("born first", "older", "released earlier"),
    False for the later one ("died later", "younger"), None when it says neither (or both)."""
    earlier, later = bool(_EARLIER.search(question)), bool(_LATER.search(question))
    return earlier if earlier != later else None


def earliest_or_latest(dates: dict[str, tuple[int, int, int]], earlier: bool) -> str | None:
    """The key whose date comes first (``earlier``) or last; None when two dates cannot be told apart
    (the same date, or the same year where one gives only the year)."""
    ordered = sorted(dates.items(), key=lambda item: item[1], reverse=not earlier)
    if len(ordered) < 2:
        return None
    (best, a), (_, b) = ordered[0], ordered[1]
    if a == b or (a[0] == b[0] and 0 in (a[1], b[1])):
        return None
    return best
