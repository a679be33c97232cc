"""The one executor of a chain program, and the one place where its answer is decided.

Steps run in order.  A ``lookup`` fills ``#n`` with step n's result, searches (the pages titled
by what it is about first) and has the model read its answer; a lookup that builds on a step
that found nothing is searched (its words still find passages) but not read.  A lookup the read
step answers "not found" is read once more by the answer step, which writes the facts before it
answers.  An operator runs in code over its inputs' results (``operators``).  The result of the
last step is the answer (``decide``): a call is made only when that result is missing, or when a
yes/no question ends in a lookup.
"""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import create_model

from helpers.answer_text import names_one_of
from helpers.config import Config
from helpers.errors import StructuredOutputError
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.store import VectorStore
from helpers.models.llm import LLM
from helpers.prompts import PromptSet, fence, render
from helpers.results import Hit, TraceStep, traced
from helpers.strategies.answer import NOT_FOUND, plain_answer, read_short_answer
from helpers.strategies.chain.operators import run_operator
from helpers.strategies.chain.program import (CHOICE_OPS, REFERENCE, Program, choices, refs, root, root_option,
                                              step_refs, wanted)
from helpers.strategies.chain.read import Lookup, fits_kind, found, read_lookup, search_step
from helpers.strategies.evidence import EvidenceLog
from helpers.strategies.reports import ASKS_FOR, answer_field


@dataclass
class Outcome:
    """One step as run: its result (``NOT_FOUND`` when none), how it was reached, and for a lookup
    what was searched and found."""

    number: int
    op: str
    value: str = NOT_FOUND
    how: str = ""
    lookup: Lookup | None = None

    @property
    def found(self) -> bool:
        return found(self.value)


@dataclass
class Run:
    """What a program run needs besides the program: the model, the store and the settings."""

    llm: LLM
    store: VectorStore
    embedder: Embedder
    collections: list[str]
    config: Config
    prompts: PromptSet
    evidence: EvidenceLog


def fill(text: str, outcomes: list[Outcome]) -> str:
    """``text`` with each ``#n`` replaced by step n's result, or, when it found none, by step n's
    own question (so a search still carries its words)."""
    def value(match) -> str:
        n = int(match.group(1))
        if not 1 <= n <= len(outcomes):
            return match.group(0)
        done = outcomes[n - 1]
        return done.value if done.found else (done.lookup.query.rstrip("?") if done.lookup else "")
    return " ".join(REFERENCE.sub(value, text).split())


def execute(program: Program, run: Run, trace: list[TraceStep], outcomes: list[Outcome]) -> list[Outcome]:
    """Run every step of ``program`` in order (see the module docstring), appending the outcome of
    each to ``outcomes`` as it is made (a run a budget stops keeps what it found)."""
    kinds = wanted(program)
    later_subjects = {n for step in program.steps if step.op == "lookup" for n in refs(step.about)}
    names = [step.about for step in program.steps if step.op == "lookup" and not refs(step.about)]
    for number, step in enumerate(program.steps, start=1):
        if step.op != "lookup":
            outcomes.append(apply(program, number, outcomes))
            trace.append(TraceStep(step.op, number, parsed=outcomes[-1].value, notes=[outcomes[-1].how]))
            continue
        about = fill(step.about, outcomes)
        lookup = Lookup(fill(step.ask, outcomes), about)
        done = Outcome(number, "lookup", lookup=lookup)
        outcomes.append(done)
        missing = [n for n in step_refs(step) if not outcomes[n - 1].found]
        lookup.hits = search_step(run.store, run.embedder, lookup.query, run.collections, run.config, trace, number,
                                  [] if missing else [about])
        run.evidence.add(lookup.query, lookup.hits)
        if missing:
            done.how = f"builds on step {missing[0]}, which found nothing: searched, not read"
            trace.append(TraceStep("read", number, notes=[done.how + " (no call)"]))
            continue
        if not run.llm.has_room(calls=2):  # keep the last call for the answer
            done.how = "the budget is kept for the answer: not read"
            trace.append(TraceStep("budget", number, notes=[done.how]))
            continue
        subjects = list(dict.fromkeys([about, *(n for n in names if n.lower() in lookup.query.lower())]))
        entries = read_lookup(run.llm, lookup, run.prompts, passages=run.config.chain.hop_passages,
                              passage_chars=run.config.chain.passage_chars, wanted=kinds.get(number, ""),
                              about=subjects, embedder=run.embedder)
        for entry in entries:
            entry.iteration = number
        trace.extend(entries)
        done.value, done.how = lookup.answer, "read off its passages"
        if not done.found and run.llm.has_room(calls=2):
            done.value = reread(run, lookup, kinds.get(number, ""), subjects, trace, number)
            done.how = "read again by the answer step"
        if done.found and number in later_subjects:  # the entity found, searched on its own (no call)
            run.evidence.add(done.value, search_step(run.store, run.embedder, done.value, run.collections,
                                                     run.config, trace, number, [done.value]))
    return outcomes


def reread(run: Run, lookup: Lookup, kind: str, subjects: list[str], trace: list[TraceStep], number: int) -> str:
    """A lookup the read step found nothing for, read by the answer step (which writes the facts
    first) on the same passages; "not found" when it names the subject or is of the wrong kind."""
    short, _, entry = read_short_answer(run.llm, lookup.query, lookup.hits[:3], 3, prompts=run.prompts, choices=[])
    entry.iteration = number
    entry.notes.insert(0, "the read found nothing: the step's question read again by the answer step")
    answer = short.answer
    if names_one_of(answer, subjects) or not fits_kind(answer, kind):
        entry.notes.append(f"{answer!r} names the step's subject or is not {kind or 'an answer'}: not found")
        answer = NOT_FOUND
    trace.append(entry)
    return answer if found(answer) else NOT_FOUND


def apply(program: Program, number: int, outcomes: list[Outcome]) -> Outcome:
    """Operator step ``number`` run in code over its inputs' results."""
    step = program.steps[number - 1]
    inputs = step_refs(step)
    missing = [n for n in inputs if not outcomes[n - 1].found]
    if missing:
        return Outcome(number, step.op, how=f"step {missing[0]} found nothing to {step.op} with")
    result = run_operator(step.op, [outcomes[n - 1].value for n in inputs])
    if result.value is None:
        return Outcome(number, step.op, how=f"{step.op} could not decide: {result.why} ({result.shown})")
    if step.op in CHOICE_OPS:
        winner = inputs[result.value]
        value = root_option(program, winner) or root(program, winner)
        return Outcome(number, step.op, value or NOT_FOUND,
                       f"{step.op} of {result.shown}: step {winner}, about {value!r}")
    return Outcome(number, step.op, str(result.value), f"{step.op} of {result.shown} = {result.value}")


def facts_text(program: Program, outcomes: list[Outcome]) -> str:
    """Each step and its result, one line each (for the answer prompt)."""
    lines = []
    for done, step in zip(outcomes, program.steps):
        said = done.lookup.query if done.lookup else f"{step.op} of {', '.join(step.inputs)}"
        lines.append(f"#{done.number} {said} -> {done.value}")
    return "\n".join(lines) or "- none"


def decide(question: str, program: Program, outcomes: list[Outcome], run: Run,
           question_hits: list[Hit]) -> tuple[str, list[TraceStep]]:
    """The answer, decided here and nowhere else: the last step's result (no call); when it is
    missing, or a yes/no question ends in a lookup, one call on the steps' results held to the
    choices (``answer_from_facts``); when the results give nothing, the answer step on the last
    lookup's and the question's best passages.  An answer of a question without choices that
    names a link of the chain (its subject, an intermediate result) counts as not found."""
    allowed = choices(program)
    last = outcomes[-1]
    texts = [h.text for done in outcomes if done.lookup for h in done.lookup.hits]
    if last.found and (not allowed or last.value in allowed):
        return plain_answer(last.value, texts), [TraceStep("answer", last.number, parsed=last.value, notes=[
            f"step {last.number}'s result is the answer (no call)"])]
    entries: list[TraceStep] = []
    answer = NOT_FOUND
    if any(done.found for done in outcomes) and run.llm.has_room():
        answer, entry = answer_from_facts(run.llm, question, program, outcomes, allowed, run.prompts)
        entries.append(entry)
    if not found(answer):
        lookups = [done.lookup for done in outcomes if done.lookup]
        hits = list({h.id: h for h in [*lookups[-1].hits[:3], *question_hits[:2]]}.values()) if lookups else []
        short, _, entry = read_short_answer(run.llm, question, hits, len(hits), prompts=run.prompts, choices=allowed)
        entry.notes.insert(0, "the steps gave no answer: read from the last step's and the question's passages")
        answer = short.answer
        entries.append(entry)
    links = [root(program, n) for n in range(1, len(outcomes))] + [d.value for d in outcomes[:-1] if d.found]
    if not allowed and found(answer) and names_one_of(answer, [link for link in links if link]):
        entries[-1].notes.append(f"{answer!r} names a link of the chain, not its end: counted as not found")
        answer = NOT_FOUND
    return plain_answer(answer, texts) or NOT_FOUND, entries


def answer_from_facts(llm: LLM, question: str, program: Program, outcomes: list[Outcome], allowed: list[str],
                      prompts: PromptSet) -> tuple[str, TraceStep]:
    """A short answer written from the steps' results (prompt ``chain_answer``), held to
    ``allowed`` when the program gives choices."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "answer", question=question) as entry:
        entry.prompts = [prompts.version("chain_answer")]
        entry.messages = [{"role": "user", "content": render("chain_answer", prompts.template("chain_answer"),
                                                             question=question,
                                                             facts=fence(facts_text(program, outcomes)))}]
        try:
            schema = create_model("FinalAnswer", asks_for=ASKS_FOR, answer=answer_field(allowed))
            reply = llm.structured(entry.messages, schema, step="answer", max_tokens=80, temperature=0.0)
            entry.raw, answer = reply.raw, " ".join(reply.value.answer.split())
        except StructuredOutputError as exc:
            entry.raw, answer = exc.raw_replies[-1] if exc.raw_replies else "", NOT_FOUND
            entry.notes.append(f"no valid answer ({exc.last_error})")
        entry.parsed = answer
    return answer, trace[0]
