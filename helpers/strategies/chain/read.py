"""A lookup step's search and read: the pages titled by what the step is about first, then the
best passages for its question; the model reads one short answer off them.

A small model reads one simple question off three passages far better than a multi-hop question
off many, but it slips in known ways, and each is checked in code and asked once more:
it answers with the step's own subject (asked for Ann's mother, "Ann Lee"), writes a sentence
instead of the fact, or gives the wrong kind of thing (a date when asked where; no date when an
operator needs one).  A step that asks one family relation of a named person ("Who is the mother
of Ann Lee?") is read by having the model write down Ann Lee's family and taking the relative
asked for: a small model copies a family off a page more reliably than it answers about it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from helpers.answer_text import drop_echo, names_a_date, names_one_of, only_a_date, said_about
from helpers.config import Config
from helpers.errors import StructuredOutputError
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.retrieval import best_part, lookup_pages, search
from helpers.knowledge.store import VectorStore
from helpers.models.llm import LLM
from helpers.prompts import PromptSet, fence, render
from helpers.results import Hit, TraceStep, hit_summary, traced
from helpers.strategies.answer import NOT_FOUND

_ASKS_WHO = re.compile(r"\s*who(m)?\b", re.IGNORECASE)
_ASKS_PLACE = re.compile(r"\s*(where\b|(in |at |from )?(which|what) (city|town|country|place|state|region)\b)",
                         re.IGNORECASE)
_ASKS_DATE = re.compile(r"\s*(when\b|(in )?(what|which) year\b|on what date\b)", re.IGNORECASE)
# a step that asks one family relation of a named person, and the field of ``Family`` that holds it
_FAMILY = {"father": "father", "mother": "mother", "husband": "spouses", "wife": "spouses", "spouse": "spouses",
           "son": "children", "daughter": "children", "child": "children", "brother": "siblings",
           "sister": "siblings", "sibling": "siblings"}
_RELATIVE_STEP = re.compile(rf"^\s*who\s+(?:is|was|were|are)\s+the\s+({'|'.join(_FAMILY)})\s+of\s+(.+?)[\s?]*$",
                            re.IGNORECASE)


@dataclass
class Lookup:
    """One lookup as run: its question with references filled in, what the search returned, and
    the answer read (``NOT_FOUND`` when none)."""

    query: str
    about: str
    hits: list[Hit] = field(default_factory=list)
    answer: str = NOT_FOUND

    @property
    def found(self) -> bool:
        return found(self.answer)


def found(answer: str) -> bool:
    """True for an answer that says something ("not found" and "" do not)."""
    return bool(answer.strip()) and NOT_FOUND not in answer.lower()


class StepAnswer(BaseModel):
    answer: str = Field(description="a few words copied from the results, or 'not found'")


class Family(BaseModel):
    """A person's family as the passages state it ("" or [] where they do not say)."""
    father: str
    mother: str
    spouses: list[str]
    children: list[str]
    siblings: list[str]


def asked_kind(step: str) -> str:
    """What a step asks for, where its first words say it: "a person", "a place", "a date", or ""."""
    return ("a person" if _ASKS_WHO.match(step) else "a place" if _ASKS_PLACE.match(step)
            else "a date" if _ASKS_DATE.match(step) else "")


def fits_kind(answer: str, kind: str) -> bool:
    """False for an answer that cannot be ``kind``: only a date for a person or a place, no date
    for a date, no digit for a number.  "not found" fits every kind."""
    if not found(answer):
        return True
    if kind in ("a person", "a place"):
        return not only_a_date(answer)
    if kind == "a number":
        return any(c.isdigit() for c in answer)
    return kind != "a date" or names_a_date(answer)


def search_step(store: VectorStore, embedder: Embedder, query: str, collections: list[str], config: Config,
                trace: list[TraceStep], number: int = 0, entities: list[str] = ()) -> list[Hit]:
    """The pages titled by ``entities`` (``chain.pages`` each, see ``lookup_pages``), then the
    top-k hits for ``query`` over ``collections``; each chunk once, traced."""
    with traced(trace, None, "search", number, query=query) as entry:
        pages = [page for name in entities
                 for page in lookup_pages(store, embedder, name, query, collections, config.chain.pages)]
        if pages:
            entry.notes.append("pages found by title: " + ", ".join(dict.fromkeys(p.title for p in pages)))
        hits = search(store, embedder, query, collections, config.search, pages=pages)
        entry.kept = [hit_summary(h) for h in hits]
    return hits


def passages_text(hits: list[Hit], query: str, passage_chars: int, embedder: Embedder | None) -> str:
    """Numbered passages for a read prompt: each hit's title and the part of its text that best
    matches ``query`` (``best_part``)."""
    return "\n\n".join(f"[{n}] {hit.title}\n{fence(best_part(hit.text, query, passage_chars, embedder, hit.title))}"
                       for n, hit in enumerate(hits, start=1))


def read_lookup(llm: LLM, lookup: Lookup, prompts: PromptSet, *, passages: int = 3, passage_chars: int = 600,
                wanted: str = "", about: list[str] = (), embedder: Embedder | None = None) -> list[TraceStep]:
    """Read ``lookup``'s answer (set on it) off its best ``passages`` hits; the trace of the reads.
    A family relation of a named person is read off the family first (``read_relative``); when
    that family has none, or for any other step, the step is read as a question (``read_answer``)."""
    entries = []
    relation = _RELATIVE_STEP.match(lookup.query)
    if relation and not wanted:
        answer, entry = read_relative(llm, lookup, relation.group(1).lower(), relation.group(2).strip(), prompts,
                                      passages, passage_chars, about, embedder)
        entries.append(entry)
        if answer:
            lookup.answer = answer
            return entries
    if not entries or llm.has_room(calls=2):
        lookup.answer, entry = read_answer(llm, lookup, prompts, passages=passages, passage_chars=passage_chars,
                                           wanted=wanted, about=about, embedder=embedder)
        entries.append(entry)
    return entries


def read_answer(llm: LLM, lookup: Lookup, prompts: PromptSet, *, passages: int = 3, passage_chars: int = 600,
                wanted: str = "", about: list[str] = (), embedder: Embedder | None = None) -> tuple[str, TraceStep]:
    """The answer to one simple question read off the best ``passages`` hits, or "not found".
    ``wanted`` is the kind an operator needs (else what the question's first words ask).  A reply
    that names what the step is ``about`` gives what its sentence says after the name
    (``said_about``), else is sent back once (``chain_reread``); a reply of the wrong kind is sent
    back once (``chain_rekind``).  A second reply that still names the subject, or is still of the
    wrong kind, counts as not found."""
    trace: list[TraceStep] = []
    shown = lookup.hits[:passages]
    wanted = wanted or asked_kind(lookup.query)
    with traced(trace, llm.ledger, "read", query=lookup.query) as entry:
        text = passages_text(shown, lookup.query, passage_chars, embedder)
        entry.prompts = [prompts.version("chain_read")]
        entry.messages = [{"role": "user", "content": render("chain_read", prompts.template("chain_read"),
                                                             step=lookup.query, passages=text or "(nothing found)")}]
        entry.kept = [hit_summary(h) for h in shown]
        try:
            answer, entry.raw = _read_reply(llm, entry.messages, lookup.query, entry)
            named = [n for n in about if names_one_of(answer, [n])]
            rest = said_about(answer, named, lambda part: fits_kind(part, wanted)) if answer and named else ""
            if rest:
                entry.notes.append(f"{answer!r} is a sentence about {', '.join(named)}: kept what it says, {rest!r}")
                answer = rest
            elif answer and named and llm.has_room(calls=2):
                entry.notes.append(f"{answer!r} names {', '.join(named)}, what the step is about: asked once more")
                answer = _ask_again(llm, entry, prompts, "chain_reread", lookup.query, said=answer,
                                    about=" and ".join(named))
            elif not fits_kind(answer, wanted) and llm.has_room(calls=2):
                entry.notes.append(f"{answer!r} is not {wanted}, what the step needs: asked once more")
                answer = _ask_again(llm, entry, prompts, "chain_rekind", lookup.query, said=answer, wanted=wanted)
            if answer and names_one_of(answer, list(about)):
                entry.notes.append(f"{answer!r} is what the step asks about, not its answer: counted as not found")
                answer = NOT_FOUND
            if not fits_kind(answer, wanted):
                entry.notes.append(f"{answer!r} is not {wanted}: counted as not found")
                answer = NOT_FOUND
        except StructuredOutputError as exc:
            entry.raw, answer = exc.raw_replies[-1] if exc.raw_replies else "", NOT_FOUND
            entry.notes.append(f"no valid reply ({exc.last_error}); counted as not found")
        entry.parsed = answer if found(answer) else NOT_FOUND
    return entry.parsed, trace[0]


def read_relative(llm: LLM, lookup: Lookup, relation: str, person: str, prompts: PromptSet, passages: int = 3,
                  passage_chars: int = 600, about: list[str] = (),
                  embedder: Embedder | None = None) -> tuple[str, TraceStep]:
    """The ``relation`` of ``person``: the model writes down the person's family from the best
    ``passages`` hits (``chain_family``) and the relative asked for is taken from it; "" when
    the family it wrote has none that is not the person (or one of ``about``)."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "family", query=lookup.query) as entry:
        shown = lookup.hits[:passages]
        entry.prompts = [prompts.version("chain_family")]
        entry.messages = [{"role": "user", "content": render(
            "chain_family", prompts.template("chain_family"), person=person,
            passages=passages_text(shown, lookup.query, passage_chars, embedder) or "(nothing found)")}]
        entry.kept = [hit_summary(h) for h in shown]
        try:
            reply = llm.structured(entry.messages, Family, step="family", max_tokens=160, temperature=0.0)
            entry.raw = reply.raw
            named = getattr(reply.value, _FAMILY[relation])
            written = (" ".join(n.split()).strip(" .") for n in ([named] if isinstance(named, str) else named))
            entry.parsed = next((n for n in written if n and not names_one_of(n, [person, *about])), "")
            entry.notes.append(f"the {relation}: {entry.parsed!r}" if entry.parsed else
                               f"the family written has no {relation}: the step is read as a question")
        except StructuredOutputError as exc:
            entry.raw, entry.parsed = exc.raw_replies[-1] if exc.raw_replies else "", ""
            entry.notes.append(f"no valid family ({exc.last_error}); the step is read as a question")
    return entry.parsed, trace[0]


def _ask_again(llm: LLM, entry: TraceStep, prompts: PromptSet, name: str, query: str, **values: str) -> str:
    """The answer of one more read call: the first reply, then prompt ``name`` saying what was wrong
    with it (step "reread"); the raw replies are kept together in ``entry``."""
    entry.prompts.append(prompts.version(name))
    entry.messages = [*entry.messages, {"role": "assistant", "content": entry.raw},
                      {"role": "user", "content": render(name, prompts.template(name), **values)}]
    answer, raw = _read_reply(llm, entry.messages, query, entry, "reread")
    entry.raw = f"{entry.raw}\n{raw}"
    return answer


def _read_reply(llm: LLM, messages: list[dict], query: str, entry: TraceStep, step: str = "read") -> tuple[str, str]:
    """(the answer a read call gives, its raw reply), without a first part that repeats ``query``."""
    reply = llm.structured(messages, StepAnswer, step=step, max_tokens=48, temperature=0.0)
    said = " ".join(reply.value.answer.split()).strip(" .")
    answer = drop_echo(said, query)
    if answer != said:
        entry.notes.append(f"the part that repeats the step was dropped: {answer!r}")
    return answer, reply.raw
