"""Checks in code on a report's sentences and citations, the same for every report shape.

A report is read without its passages: a sentence that leans on text the reader never saw ("also",
"this problem", "later" with no date, "the moral panic" named nowhere before, "described in the
production collection") makes sense only to the model that read the passage.  ``standalone`` rewrites
such a sentence when a word can go ("Also, ..." -> "..."), and drops it when the sentence needs the
missing text.  ``cited_in_order`` numbers the sources 1..n in the order the report first cites them,
so the list has no gap and lists only what is cited.
"""
from __future__ import annotations

import re

from helpers.results import CITATION, Hit
from helpers.values import years_in

# a connective that opens a sentence by pointing back at one the reader may not have: it can go
_LEADING = re.compile(r"^(?:also|additionally|furthermore|moreover|in addition|however|meanwhile|then|later|"
                      r"afterwards|subsequently|again|besides|likewise|similarly|as a result|because of this|"
                      r"over time|eventually|still)\s*,\s*", re.IGNORECASE)
_ALSO = re.compile(r"\s+(?:also|too|as well)\b(?=[\s,.])", re.IGNORECASE)
# relative time that needs a date or an earlier moment the sentence does not give
_RELATIVE_TIME = re.compile(r"\b(?:later|earlier|previously|afterwards|subsequently|before that|after that|"
                            r"at that time|at the time|that year|the same year|the following year|the next year|"
                            r"by then|since then|would return|again)\b", re.IGNORECASE)
_ANCHOR = re.compile(r"\b(?:early|earliest|first|original|originally|initially|beginning|seasons? \d+)\b",
                     re.IGNORECASE)
# a pointer into the knowledge base, or into a text the reader does not have
_POINTER = re.compile(r"\b(?:this|that|the)\s+(?:page|article|document|passage|section|text|collection|chapter|"
                      r"source)\b|\bcollections?\b|\.md\b|\b(?:as|is|are)\s+(?:mentioned|noted|described|"
                      r"discussed|explained)\b|\b(?:described|mentioned|discussed) (?:in|above|below)\b|"
                      r"\bsee (?:the|this|above|below)\b", re.IGNORECASE)
# a demonstrative that needs the sentence before it: "this problem", "these changes"
_DEMONSTRATIVE = re.compile(r"\b(?:this|these|those)\s+([A-Za-z-]+)(?:\s+([a-z-]+))?", re.IGNORECASE)
# an abstract noun named as already known ("the moral panic faded"), unless the sentence says which
# ("the switch to high definition") or a name does ("the Scully era")
_DEFINITE = re.compile(r"\bthe\s+(?:([a-z-]+)\s+)?(problems?|issues?|controversy|panic|debate|decline|dispute|"
                       r"shift|changes?|move|switch|criticism|complaints?|backlash|standoff|deal|trend|idea|label|"
                       r"phrase|era|period|version|approach|practice|decision|plan|episode)\b"
                       r"(?!\s+(?:of|to|over|about|between|from|with|that|which|who|in|for|on|at|by|as)\b)",
                       re.IGNORECASE)
# a sentence that opens with a person it does not name: in a report told in time order, the sentence
# before it may not be the one it points at
_PERSON_START = re.compile(r"^(?:he|she|his|her|they|their|him|them)\b", re.IGNORECASE)
_PRONOUN_START = re.compile(r"^(?:its|this|these|those|such|it)\b", re.IGNORECASE)


def _stem(word: str) -> str:
    return word.lower().strip("-")[:5]


def _said(word: str, earlier: str) -> bool:
    """``word`` (cut to its stem) appears in ``earlier``."""
    stem = _stem(word)
    return any(w.lower()[:5] == stem for w in re.findall(r"[A-Za-z-]{4,}", earlier))


def standalone(sentence: str, earlier: str) -> tuple[str, str]:
    """``sentence`` as a reader who has seen only ``earlier`` (the report before it) can follow it,
    and a note on what was done ('' when nothing).  A connective that points back is removed; a
    sentence that needs text the reader never saw is dropped (returned as '')."""
    text, note = sentence, ""
    opener = _LEADING.match(text)
    if opener:
        text = text[opener.end():]
        text = text[:1].upper() + text[1:]
        note = f"removed {opener.group(0).strip(' ,')!r}, which points back at text the reader may not have"
    if _ALSO.search(text):
        text = _ALSO.sub("", text)
        note = note or "removed 'also', which points at text the reader may not have"
    why = ""
    if text[:1].islower() or text[:1] in ",;:)]":
        why = "it starts in the middle of a sentence"
    elif _POINTER.search(text):
        why = f"it points into the knowledge base ({_POINTER.search(text).group(0)!r})"
    elif _RELATIVE_TIME.search(text) and not years_in(text) and not _ANCHOR.search(text):
        why = f"{_RELATIVE_TIME.search(text).group(0)!r} needs a date it does not give"
    elif _PERSON_START.match(text):
        why = f"it opens with {_PERSON_START.match(text).group(0)!r}, a person it does not name"
    elif _PRONOUN_START.match(text) and not earlier:
        why = f"it opens with {_PRONOUN_START.match(text).group(0)!r} and nothing comes before it"
    else:
        for pattern in (_DEMONSTRATIVE, _DEFINITE):
            for match in pattern.finditer(text):
                first, second = match.group(1) or "", match.group(2) or ""
                seen = earlier + " " + text[: match.start()]
                if first[:1].isupper() or any(_said(word, seen) for word in (first, second) if len(word) > 3):
                    continue
                why = f"{match.group(0)!r} names something the report has not said"
                break
            if why:
                break
    if why:
        return "", f"dropped a sentence that leans on text the reader never saw ({why}): {' '.join(sentence.split()[:9])}…"
    return text, note


def cited_in_order(answer: str, passages: list[Hit]) -> tuple[str, list[Hit]]:
    """``answer`` with its ``[n]`` (n-th of ``passages``) renumbered 1..k in the order first cited, and
    the cited passages in that order; passages never cited are left out."""
    order: dict[int, int] = {}
    for match in CITATION.finditer(answer):
        n = int(match.group(1))
        if 1 <= n <= len(passages):
            order.setdefault(n, len(order) + 1)

    def renumber(match: re.Match) -> str:
        n = int(match.group(1))
        return f"[{order[n]}]" if n in order else match.group(0)

    return CITATION.sub(renumber, answer), [passages[n - 1] for n in order]
