"""Answer scores as the field reports them: exact match (EM) and token F1 after the
standard normalisation (lower case; punctuation, the articles a/an/the and extra
spaces removed), each the best over the gold answer and its aliases.  This is the
scoring of SQuAD, HotpotQA and 2WikiMultiHopQA; only it makes our figures
comparable with published tables.

Containment (the gold text appears somewhere in the answer) is kept as a secondary,
lenient measure, with one guard: an answer that names both options of an "A or B"
question gets no credit, however it contains the gold.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from helpers.answer_text import normalise, question_options

NOT_FOUND_PATTERNS = re.compile(
    r"not (?:in|contain|mention|cover|found|available|include)|no (?:information|mention|relevant)|"
    r"nothing relevant|does not (?:say|state|contain|mention|include)|doesn't (?:say|contain|mention)|"
    r"cannot (?:find|answer|be found)|can't find|unknown|not (?:stated|specified|provided)")
_YES_NO = ("yes", "no")


def exact_match(answer: str, gold: str) -> float:
    """1.0 when the normalised texts are equal, else 0.0."""
    return float(normalise(answer) == normalise(gold))


def token_f1(answer: str, gold: str) -> float:
    """Harmonic mean of token precision and recall of the normalised texts.

    As in the HotpotQA scorer, a yes/no answer (or gold) scores nothing unless the two are equal:
    "no" must not earn credit against "no, never" by word overlap."""
    produced, wanted = normalise(answer), normalise(gold)
    if (produced in _YES_NO or wanted in _YES_NO) and produced != wanted:
        return 0.0
    common = Counter(produced.split()) & Counter(wanted.split())
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(produced.split()), overlap / len(wanted.split())
    return 2 * precision * recall / (precision + recall)


def names_several_options(answer: str, question: str) -> bool:
    """True when the answer names two or more of the options the question offers."""
    produced = f" {normalise(answer)} "
    return sum(f" {normalise(o)} " in produced for o in question_options(question) if normalise(o)) >= 2


def contains_answer(answer: str, golds: list[str], question: str = "", answerable: bool = True) -> bool:
    """Lenient containment: a gold text (normalised) appears in the answer, and the answer does not
    name several options of the question.  A yes/no gold must be the answer's first word ("no" is
    inside "not found").  For a question the corpus cannot answer, the right output says so."""
    if not answerable:
        return bool(NOT_FOUND_PATTERNS.search(answer.lower()))
    if names_several_options(answer, question):
        return False
    produced = normalise(answer)
    wanted = [normalise(g) for g in golds if normalise(g)]
    if any(g in _YES_NO for g in wanted):
        return produced.split()[:1] in ([g] for g in wanted)
    return any(f" {g} " in f" {produced} " for g in wanted)


@dataclass(frozen=True)
class AnswerScore:
    em: float
    f1: float
    contains: bool

    def as_row(self) -> dict:
        return {"em": self.em, "f1": round(self.f1, 4), "contains": self.contains}


def score_answer(answer: str, golds: list[str], question: str = "", answerable: bool = True) -> AnswerScore:
    """EM and F1 (best over ``golds``: the gold answer, then its aliases) and containment.

    A question the corpus cannot answer scores 1 on all three when the answer says so."""
    if not answerable:
        said = contains_answer(answer, golds, question, answerable=False)
        return AnswerScore(float(said), float(said), said)
    golds = [g for g in golds if normalise(g)]
    em = max((exact_match(answer, g) for g in golds), default=0.0)
    f1 = max((token_f1(answer, g) for g in golds), default=0.0)
    return AnswerScore(em, f1, contains_answer(answer, golds, question))
