"""The chain's steps and their references (``helpers.strategies.chain``): a ``Hop`` per planned step,
"#n" filled in with step n's answer, what a step is about, and which steps later ones build on."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from helpers.answer_text import answer_choices, names_a_date, names_one_of, normalise, only_a_date, without_accents
from helpers.results import Hit, TraceStep
from helpers.strategies.answer import NOT_FOUND

REFERENCE = re.compile(r"#(\d+)")  # "#2" in a planned step: the answer of step 2
_ASKS_WHO = re.compile(r"\s*who(m)?\b", re.IGNORECASE)
_ASKS_PLACE = re.compile(r"\s*(where\b|(in |at |from )?(which|what) (city|town|country|place|state|region)\b|"
                         r"what is the place\b)", re.IGNORECASE)
_ASKS_DATE = re.compile(r"\s*(when\b|(in )?(what|which) year\b|what is the date\b|on what date\b)", re.IGNORECASE)
_ASKS_ROLE = re.compile(r"\s*who\s+(?:is|was|are|were)\s+the\s+(\w+)\s+of\b|\s*who\s+(\w+)\b", re.IGNORECASE)
# a role a step may ask for ("Who is the composer of ...?", "Who directed ...?"), by the start of the word the
# step uses: what the role is called, and the word starts a passage uses for it ("music by", "directed by")
_SINGING, _WRITING = ("perform", "sing", "sang", "sung", "record"), ("writ", "wrote", "author", "screenplay")
ROLES = {"compos": ("the composer", ("compos", "music", "score")), "direct": ("the director", ("direct",)),
         "perform": ("the performer", _SINGING), "sing": ("the singer", _SINGING), "sang": ("the singer", _SINGING),
         "produc": ("the producer", ("produc",)), "writ": ("the writer", _WRITING), "wrote": ("the writer", _WRITING),
         "found": ("the founder", ("found",)), "publish": ("the publisher", ("publish",))}
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\"”][.!?])\s+|\n+")  # not after an initial ("Hans J. Salter")


@dataclass
class Hop:
    """One step of the chain: the planned question, the query searched (references filled in),
    what the search returned, and the answer read from it."""

    step: str
    query: str
    hits: list[Hit] = field(default_factory=list)
    answer: str = ""

    @property
    def answered(self) -> bool:
        return bool(self.answer) and NOT_FOUND not in self.answer.lower()


def referenced_hop(number: int, hops: list[Hop]) -> Hop | None:
    """The earlier step ``#number`` stands for (None when there is no such step).

    A reference points at someone or something an earlier step found.  When ``#n`` names a step
    that asks a fact (not "who") about an earlier answer (small models sometimes count "the second
    director" rather than steps), the latest step that is about no earlier answer is used instead."""
    if not 1 <= number <= len(hops):
        return None
    if REFERENCE.search(hops[number - 1].step) and not asks_who(hops[number - 1].step):
        number = max((n for n, hop in enumerate(hops, start=1) if not REFERENCE.search(hop.step)),
                     default=number)
    return hops[number - 1]


def asks_who(step: str) -> bool:
    """True when a step asks for a person ("Who is the father of #1?")."""
    return bool(_ASKS_WHO.match(step))


def wanted_kind(step: str) -> str:
    """What a step asks for, where its first words say it: "a person", "a place", "a date", or ""."""
    return ("a person" if asks_who(step) else "a place" if _ASKS_PLACE.match(step)
            else "a date" if _ASKS_DATE.match(step) else "")


def fits_kind(answer: str, kind: str) -> bool:
    """False for an answer that cannot be ``kind``: only a date for a person or a place
    ("born December 19, 1993" to "Where was Ann born?"), no date at all for a date."""
    if not answer or NOT_FOUND in answer.lower():
        return True
    if kind in ("a person", "a place"):
        return not only_a_date(answer)
    return kind != "a date" or names_a_date(answer)


def asked_role(step: str) -> tuple[str, tuple[str, ...]] | None:
    """The role a step asks for by its first words ("Who is the composer of X?", "Who directed X?"):
    its name ("the composer") and the word starts passages use for it; None for any other step."""
    match = _ASKS_ROLE.match(step)
    word = (match.group(1) or match.group(2)).lower() if match else ""
    return next((role for start, role in ROLES.items() if word.startswith(start)), None)


def role_unsaid(answer: str, words: tuple[str, ...], text: str) -> bool:
    """True when the passages ``text`` speak of the role (a sentence holds one of its ``words``) but
    no sentence that names ``answer`` does: asked for a film's composer, a small model often gives
    the director the same page names ("directed by Douglas Sirk ... music by Hans J. Salter").
    False when no sentence names the answer: then the passages cannot judge it."""
    sentences = [normalise(without_accents(s)) for s in _SENTENCE_END.split(text)]
    said = normalise(without_accents(answer))
    naming = [s for s in sentences if said and f" {said} " in f" {s} "]
    speaks = [s for s in sentences if any(w in s for w in words)]
    return bool(naming) and bool(speaks) and not set(naming) & set(speaks)


def fill_references(step: str, hops: list[Hop]) -> str:
    """``step`` with each ``#n`` replaced by step n's answer (or, when it was not found, by
    step n's own question, so the search still carries its words)."""
    def answer_of(match: re.Match) -> str:
        hop = referenced_hop(int(match.group(1)), hops)
        if hop is None:
            return match.group(0)
        return hop.answer if hop.answered else hop.query.rstrip("?")
    return REFERENCE.sub(answer_of, step)


def missing_link(step: str, hops: list[Hop]) -> int:
    """The number of the first earlier step that ``step`` builds on and that found nothing (0 if none).
    In one chain of steps, such a step is searched (its words still find passages) but not read: no
    answer read about "the father of <nothing found>" can be the answer."""
    for m in REFERENCE.findall(step):
        if (hop := referenced_hop(int(m), hops)) is not None and not hop.answered:
            return hops.index(hop) + 1
    return 0


def step_entities(step: str, names: list[str], hops: list[Hop]) -> list[str]:
    """What a planned step is about: the question's names it mentions, and the answers its
    ``#n`` references stand for (their pages are looked up by title before the step is read)."""
    mentioned = [n for n in names if n.lower() in step.lower()]
    referenced = [hop.answer for m in REFERENCE.findall(step)
                  if (hop := referenced_hop(int(m), hops)) is not None and hop.answered]
    return list(dict.fromkeys(mentioned + referenced))


def read_about(hop: Hop, names: list[str], hops: list[Hop]) -> list[str]:
    """Who or what a read must not answer with: what the step is about (``step_entities``) and the
    question's names its filled-in query mentions."""
    return list(dict.fromkeys(step_entities(hop.step, names, hops)
                              + [n for n in names if n.lower() in hop.query.lower()]))


def refuse_subject(answer: str, about: list[str], entry: TraceStep) -> str:
    """``answer``, or "not found" (noted in ``entry``) when it names what the step is ``about``:
    the subject of a step is never its answer."""
    if answer and names_one_of(answer, list(about)):
        entry.notes.append(f"{answer!r} is what the step asks about, not its answer: counted as not found")
        return NOT_FOUND
    return answer


def is_bridge(number: int, steps: list[str]) -> bool:
    """True when step ``number`` asks for something later steps build on: it refers to no earlier
    answer itself, and a later step refers to one (its answer is the next hop's entity)."""
    return not REFERENCE.search(steps[number - 1]) and any(REFERENCE.search(s) for s in steps[number:])


def step_subjects(hops: list[Hop], names: list[str]) -> list[str | None]:
    """For each hop, the question's name its chain of steps started from ("Who directed Film A?"
    and "When was #1 born?" are both about "Film A"), or None."""
    subjects: list[str | None] = []
    for number, hop in enumerate(hops, start=1):
        subject = next((n for n in names if n.lower() in hop.step.lower()), None)
        for m in REFERENCE.findall(hop.step):
            if subject is None and (ref := referenced_hop(int(m), hops[: number - 1])) is not None:
                subject = subjects[hops.index(ref)]
        subjects.append(subject)
    return subjects


def one_chain(question: str, steps: list[str]) -> bool:
    """True when the question is one chain of steps whose last step builds on an earlier answer
    ("Who is X's mother?", "When did #1 die?") and offers no options: its last step asks the question."""
    return bool(steps) and bool(REFERENCE.search(steps[-1])) and not answer_choices(question)


def found_answers(hops: list[Hop]) -> str:
    """The answers the steps found, joined (what the chain says when no answer call could be made)."""
    return "; ".join(hop.answer for hop in hops if hop.answered)


def facts_text(hops: list[Hop]) -> str:
    """The steps and their answers, one line each (for the final prompt)."""
    return "\n".join(f"- {hop.query} -> {hop.answer or NOT_FOUND}" for hop in hops) or "- none"
