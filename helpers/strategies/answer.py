"""The answer step: a short final answer read off numbered passages, kept apart from the
facts that support it.

A question that asks for a fact is answered the way QA benchmarks score it: the answer
alone (a name, a date, a place, a number, yes or no), not a sentence about it.  One
structured call fills ``{"asks_for", "facts", "answer", "sources"}``: naming the kind of
answer wanted and writing the deciding facts first gives a small model room to compare or
follow a relation before it commits, and
the facts with their ``[n]`` marks become the explanation shown beside the answer.

A yes/no question or an "A or B" question constrains the answer to its choices
(``answer_choices``): decoding cannot write anything else.  ``tidy_answer`` then does what
needs no model: citation marks and trailing full stops
go, a yes/no question gets "yes" or "no", and an "A or B" question gets the option it
named, written as the question writes it.  For "which came first?" the dates the facts give
each option decide (``option_by_dates``), not the model's pick.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from helpers.answer_text import (answer_choices, date_as_written, is_yes_no_question, normalise, question_options,
                                 wants_earlier)
from helpers.errors import BudgetExceededError, StructuredOutputError
from helpers.knowledge.retrieval import fit_chunks, numbered_chunks
from helpers.models.llm import LLM
from helpers.prompts import PromptSet, as_prompt_set, prompt_version, render
from helpers.results import CITATION, Hit, TraceStep, hit_summary, traced
from helpers.strategies.reports import answer_schema, cite_marks, clean_text
from helpers.values import Date, extreme, parse_date

NOT_FOUND = "not found"  # the short answer when nothing answers the question
FACTS_TOKENS = 220  # room for the facts and the answer; the answer is read at temperature 0
_FACT_END = re.compile(r"(?<=[.!?;])\s+")  # where the facts are split into single facts
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|,?\s+(?:while|whereas)\s+|,\s+(?:and|but)\s+")  # a fact's clauses


@dataclass
class ShortAnswer:
    """The answer alone, and the facts (with ``[n]`` marks) it was read from."""

    answer: str
    explanation: str = ""


def tidy_answer(answer: str, question: str, facts: str = "", sources: Sequence[str] = ()) -> str:
    """The answer without citation marks, quotes or a closing full stop; "yes"/"no" for a yes/no
    question whose answer starts with one; for an "A or B" question, the option the answer names
    (exactly one), as the question writes it, or else the one option that ``facts`` name in the
    sentence that holds the answer (asked which film's director died first, a small model often
    answers with the director); a date written as the ``sources`` (passage texts) write it.  A bare
    "yes" or "no" to a question that asks neither ("Why did Ann die?") is no answer: "not found"."""
    text = " ".join(CITATION.sub("", answer).split()).strip(" .;:,*\"'`")
    if not text:
        return text
    text = date_as_written(text, list(sources))
    if is_yes_no_question(question):
        first = normalise(text).split()[:1]
        if first in (["yes"], ["no"]):
            return first[0]
    elif normalise(text) in ("yes", "no"):
        return NOT_FOUND
    options = question_options(question)
    named = _options_named(text, options)
    if len(named) == 1:
        return named[0]
    if not named and len(normalise(text)) >= 3:
        said = f" {normalise(text)} "
        holding = [s for s in _FACT_END.split(facts) if said in f" {normalise(s)} "]
        by_facts = {o for s in holding for o in _options_named(s, options)}
        if len(by_facts) == 1:
            return by_facts.pop()
    return text


def option_by_dates(question: str, facts: str) -> str | None:
    """The option a "which came first / who was born later" question asks for, decided by the date
    the ``facts`` give each option (in the clauses that name that option alone), not by the model:
    a small model often copies both dates right and then names the wrong option.  None when the
    question says no direction, or an option has no date or two different ones."""
    earlier, options = wants_earlier(question), question_options(question)
    if earlier is None or len(options) != 2 or is_yes_no_question(question):
        return None
    dates: dict[str, set[Date]] = {option: set() for option in options}
    for clause in _CLAUSE.split(CITATION.sub("", facts)):
        named = _options_named(clause, options)
        if len(named) == 1 and (date := parse_date(re.sub(re.escape(named[0]), " ", clause, flags=re.IGNORECASE))):
            dates[named[0]].add(date)
    if any(len(found) != 1 for found in dates.values()):
        return None
    best = extreme([found.pop() for found in dates.values()], earlier)
    return None if best is None else options[best]


def _options_named(text: str, options: list[str]) -> list[str]:
    said = f" {normalise(text)} "
    return [o for o in options if normalise(o) and f" {normalise(o)} " in said]


def read_short_answer(llm: LLM, question: str, hits: list[Hit], max_chunks: int = 12, step: str = "answer",
                      prompts: PromptSet | Mapping[str, str] | None = None) -> tuple[ShortAnswer, list[Hit], TraceStep]:
    """The short answer to ``question`` from ``hits`` (best first, as many as fit), its facts as the
    explanation, the hits shown, and the trace.  With no hit, no call is made ("not found"); a reply
    that stays invalid after the retries is answered from a free-text call (``answer_naive``)."""
    prompts = as_prompt_set(prompts)
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, step, question=question, candidates=len(hits)) as entry:
        if hits:
            answer, explanation, used = _read(llm, question, hits, max_chunks, step, prompts, entry)
        else:
            entry.notes.append("nothing was found to read; no model call")
            answer, explanation, used = NOT_FOUND, "The search found no passage to answer from.", []
        entry.parsed = {"answer": answer, "explanation": explanation}
    return ShortAnswer(answer, explanation), used, trace[0]


def _read(llm: LLM, question: str, hits: list[Hit], max_chunks: int, step: str, prompts: PromptSet,
          entry: TraceStep) -> tuple[str, str, list[Hit]]:
    template = prompts.template("answer_structured")
    skeleton = render("answer_structured", template, question=question, sources="")
    used, notes = fit_chunks(llm, hits, skeleton, reserve=FACTS_TOKENS + 64, max_chunks=max_chunks)
    entry.notes.extend(notes)
    if not used:
        raise BudgetExceededError(f"step '{step}': no passage fits the context or the budget left")
    sources = numbered_chunks(used)
    entry.prompts = [prompt_version("answer_structured", template)]
    entry.messages = [{"role": "user", "content": render("answer_structured", template, question=question,
                                                         sources=sources)}]
    entry.kept = [hit_summary(h) for h in used]
    try:
        reply = llm.structured(entry.messages, answer_schema(len(used), answer_choices(question)), step=step,
                               max_tokens=FACTS_TOKENS, temperature=0.0)
        entry.raw = reply.raw
        facts, said = clean_text(reply.value.facts), clean_text(reply.value.answer)
        explanation = facts if CITATION.search(facts) else f"{facts} {cite_marks(reply.value.sources)}".strip()
    except StructuredOutputError as exc:
        entry.notes.append(f"no valid structured answer ({exc.last_error}); writing free text")
        entry.prompts.append(prompts.version("answer_naive"))
        entry.messages = [{"role": "user", "content": render("answer_naive", prompts.template("answer_naive"),
                                                             question=question, sources=sources)}]
        entry.raw = explanation = llm.chat(entry.messages, step=step).strip()
        said = re.split(r"(?<=[.!?])\s", explanation, maxsplit=1)[0]
    answer = tidy_answer(said, question, explanation, [h.text for h in used]) or NOT_FOUND
    if answer != said:
        entry.notes.append(f"answer tidied: {said!r} -> {answer!r}")
    if (decided := option_by_dates(question, explanation)) is not None and decided != answer:
        entry.notes.append(f"the dates the facts give each option decide the comparison: {answer!r} -> {decided!r}")
        answer = decided
    return answer, explanation, used
