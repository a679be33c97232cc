"""Hop-by-hop search ("chain"), after DeepSearcher's ChainOfRAG agent and IRCoT:

    search the question -> plan: the names it contains and simple steps -> search each name
    -> [search a step -> read its answer -> fill it into the next steps]* -> answer from the facts

A multi-hop question ("When did Lothair II's mother die?") names only its first
entity; the second (the mother) appears only in the first passage found, so no
search written before reading it can name her.  The chain therefore plans the
question as simple steps that refer to earlier answers by number
("Who is the mother of Lothair II?", "When did #1 die?"), then runs them one at a
time: search the step, have the model read the answer off the passages (a name,
a date, or "not found"), and write that answer into the later steps before they
are searched.  An answer that later steps build on (the mother, the director) is
also searched on its own, so her own page is found even when the next step's
wording ("When did Ermengarde of Tours die?") matches other pages better.  A small
model handles each piece (planning a shape, reading one fact) far better than one
open-ended "what next?" over a pile of passages.
The plan is the stopping rule; a last short call answers from the facts.  Each name
the question contains is also searched on its own (no model call): the pages of
the two films a comparison names are then found even when a step goes astray.

Before a step is searched, the pages *titled* by what it is about (a name of the
question, an answer found earlier) are looked up and read first (``chain.pages``):
a search by meaning for "Where was David Bradley born?" ranks "Bradley Orr" above
"David Bradley (director)", while a title lookup cannot miss it.

Evidence only grows: the question's own search comes first and every passage any
search returned stays in the result, in turn order (``EvidenceLog``).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, Field, create_model

from helpers.answer_text import (answer_choices, drop_echo, earliest_or_latest, is_yes_no_question, names_one_of,
                                 parse_date, wants_earlier)
from helpers.config import Config
from helpers.errors import BudgetExceededError, DeepSearchLabError, StructuredOutputError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.retrieval import lookup_pages, search, title_key
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, Budget, make_llm
from helpers.prompts import PromptSet, as_prompt_set, fence, prompt_version, render
from helpers.results import Hit, Result, TraceStep, hit_summary, traced
from helpers.strategies.answer import NOT_FOUND, read_short_answer, tidy_answer
from helpers.strategies.evidence import EvidenceLog
from helpers.strategies.relations import relation_plan
from helpers.strategies.reports import ASKS_FOR, answer_field

_REFERENCE = re.compile(r"#(\d+)")
_ASKS_WHO = re.compile(r"\s*who(m)?\b", re.IGNORECASE)


class Plan(BaseModel):
    names: list[str] = Field(description="the names the question contains")
    steps: list[str] = Field(description="simple questions in order; #n stands for the answer of step n")


class StepAnswer(BaseModel):
    answer: str = Field(description="a few words copied from the results, or 'not found'")


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


def plan_steps(llm: LLM, question: str, max_steps: int = 4,
               template: str | None = None) -> tuple[list[str], list[str], TraceStep]:
    """The names the question contains, and the question as at most ``max_steps`` simple
    questions ([question] when the model gives no usable plan).  A question about one person's
    relative that offers no options is planned in code (``relation_plan``), without a call."""
    if not answer_choices(question) and (planned := relation_plan(question)) is not None:
        person, steps = planned
        return [person], steps[:max_steps], TraceStep("plan", parsed={"names": [person], "steps": steps[:max_steps]},
                                                      notes=["a family relation: planned in code, one step per "
                                                             "simple relation (no call)"])
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "plan", question=question) as entry:
        entry.prompts = [prompt_version("chain_plan", template)]
        entry.messages = [{"role": "user", "content": render("chain_plan", template, question=question)}]
        try:
            reply = llm.structured(entry.messages, Plan, step="plan", max_tokens=200, temperature=0.0)
            entry.raw = reply.raw
            names = list(dict.fromkeys(" ".join(n.split()) for n in reply.value.names if n.strip()))
            steps = [" ".join(s.split()) for s in reply.value.steps if s.strip()]
        except StructuredOutputError as exc:
            entry.raw, names, steps = exc.raw_replies[-1] if exc.raw_replies else "", [], []
            entry.notes.append(f"no valid plan ({exc.last_error})")
        mirrored = mirror_steps(steps, names)
        if mirrored != steps:
            entry.notes.append(f"the steps named only {_named(steps, names)[0]!r} of the {len(names)} names "
                               "compared: repeated them for the others")
            steps = mirrored
        if len(steps) > max_steps:
            entry.notes.append(f"kept the first {max_steps} of {len(steps)} steps (chain.max_hops)")
            steps = steps[:max_steps]
        if not steps:
            entry.notes.append("searching the question itself as the only step")
            steps = [question]
        entry.parsed = {"names": names, "steps": steps}
    return names, steps, trace[0]


def _named(steps: list[str], names: list[str]) -> list[str]:
    return [n for n in names if any(n.lower() in s.lower() for s in steps)]


def mirror_steps(steps: list[str], names: list[str]) -> list[str]:
    """A comparison asks the same chain of each thing it names.  When the question names
    several things but the steps mention only one of them (small models often stop after
    the first), the steps are repeated for each other name, references renumbered."""
    named = _named(steps, names)
    if len(names) < 2 or len(named) != 1:
        return steps
    first = re.compile(re.escape(named[0]), re.IGNORECASE)
    mirrored = list(steps)
    for other in (n for n in names if n != named[0]):
        offset = len(mirrored)
        for step in steps:
            step = _REFERENCE.sub(lambda m: f"#{int(m.group(1)) + offset}", step)
            mirrored.append(first.sub(lambda _: other, step))
    return mirrored


def referenced_hop(number: int, hops: list[Hop]) -> Hop | None:
    """The earlier step ``#number`` stands for (None when there is no such step).

    A reference points at someone or something an earlier step found.  When ``#n`` names a step
    that asks a fact (not "who") about an earlier answer (small models sometimes count "the second
    director" rather than steps), the latest step that is about no earlier answer is used instead."""
    if not 1 <= number <= len(hops):
        return None
    if _REFERENCE.search(hops[number - 1].step) and not _ASKS_WHO.match(hops[number - 1].step):
        number = max((n for n, hop in enumerate(hops, start=1) if not _REFERENCE.search(hop.step)),
                     default=number)
    return hops[number - 1]


def fill_references(step: str, hops: list[Hop]) -> str:
    """``step`` with each ``#n`` replaced by step n's answer (or, when it was not found, by
    step n's own question, so the search still carries its words)."""
    def answer_of(match: re.Match) -> str:
        hop = referenced_hop(int(match.group(1)), hops)
        if hop is None:
            return match.group(0)
        return hop.answer if hop.answered else hop.query.rstrip("?")
    return _REFERENCE.sub(answer_of, step)


def missing_link(step: str, hops: list[Hop]) -> int:
    """The number of the first earlier step that ``step`` builds on and that found nothing (0 if none).
    In one chain of steps, such a step is searched (its words still find passages) but not read: no
    answer read about "the father of <nothing found>" can be the answer."""
    for m in _REFERENCE.findall(step):
        if (hop := referenced_hop(int(m), hops)) is not None and not hop.answered:
            return hops.index(hop) + 1
    return 0


def step_entities(step: str, names: list[str], hops: list[Hop]) -> list[str]:
    """What a planned step is about: the question's names it mentions, and the answers its
    ``#n`` references stand for (their pages are looked up by title before the step is read)."""
    mentioned = [n for n in names if n.lower() in step.lower()]
    referenced = [hop.answer for m in _REFERENCE.findall(step)
                  if (hop := referenced_hop(int(m), hops)) is not None and hop.answered]
    return list(dict.fromkeys(mentioned + referenced))


def read_answer(llm: LLM, hop: Hop, passages: int = 3, passage_chars: int = 600,
                template: str | None = None, about: list[str] = ()) -> tuple[str, TraceStep]:
    """The answer to one simple step, read off its best ``passages`` hits (or "not found"), without
    a first part that repeats the step (``drop_echo``).  An answer that only names what the step is
    ``about`` (asked for Ann's mother, a small model may copy Ann's own name) counts as not found."""
    trace: list[TraceStep] = []
    shown = hop.hits[:passages]
    with traced(trace, llm.ledger, "read", query=hop.query) as entry:
        text = "\n\n".join(f"[{n}] {hit.title}\n{fence(hit.text[:passage_chars])}"
                           for n, hit in enumerate(shown, start=1))
        entry.prompts = [prompt_version("chain_read", template)]
        entry.messages = [{"role": "user", "content": render("chain_read", template, step=hop.query,
                                                             passages=text or "(nothing found)")}]
        entry.kept = [hit_summary(h) for h in shown]
        try:
            reply = llm.structured(entry.messages, StepAnswer, step="read", max_tokens=48, temperature=0.0)
            said = " ".join(reply.value.answer.split()).strip(" .")
            entry.raw, answer = reply.raw, drop_echo(said, hop.query)
            if answer != said:
                entry.notes.append(f"the part that repeats the step was dropped: {answer!r}")
            if answer and names_one_of(answer, list(about)):
                entry.notes.append(f"{answer!r} is what the step asks about, not its answer: counted as not found")
                answer = NOT_FOUND
        except StructuredOutputError as exc:
            entry.raw, answer = exc.raw_replies[-1] if exc.raw_replies else "", NOT_FOUND
            entry.notes.append(f"no valid reply ({exc.last_error}); counted as not found")
        entry.parsed = answer or NOT_FOUND
    return entry.parsed, trace[0]


def is_bridge(number: int, steps: list[str]) -> bool:
    """True when step ``number`` asks for something later steps build on: it refers to no earlier
    answer itself, and a later step refers to one (its answer is the next hop's entity)."""
    return not _REFERENCE.search(steps[number - 1]) and any(_REFERENCE.search(s) for s in steps[number:])


def step_subjects(hops: list[Hop], names: list[str]) -> list[str | None]:
    """For each hop, the question's name its chain of steps started from ("Who directed Film A?"
    and "When was #1 born?" are both about "Film A"), or None."""
    subjects: list[str | None] = []
    for number, hop in enumerate(hops, start=1):
        subject = next((n for n in names if n.lower() in hop.step.lower()), None)
        for m in _REFERENCE.findall(hop.step):
            if subject is None and (ref := referenced_hop(int(m), hops[: number - 1])) is not None:
                subject = subjects[hops.index(ref)]
        subjects.append(subject)
    return subjects


def compared_by_dates(question: str, names: list[str], hops: list[Hop]) -> str | None:
    """The option a "which came first / who was born later" question asks for, decided by comparing
    the dates the steps found for each option (the last dated answer of each option's chain of
    steps), not by the model: a small model compares two dates no better than a coin.  None when the
    question names fewer than two options, says no direction, or an option has no date."""
    earlier = wants_earlier(question)
    options = [n for n in names if title_key(n) in title_key(question)]
    if earlier is None or len(options) < 2 or is_yes_no_question(question):
        return None
    dates: dict[str, tuple[int, int, int]] = {}
    for hop, subject in zip(hops, step_subjects(hops, names)):
        if subject in options and hop.answered and (date := parse_date(hop.answer)):
            dates[subject] = date
    return earliest_or_latest(dates, earlier) if set(dates) == set(options) else None


def found_answers(hops: list[Hop]) -> str:
    """The answers the steps found, joined (what the chain says when no answer call could be made)."""
    return "; ".join(hop.answer for hop in hops if hop.answered)


def facts_text(hops: list[Hop]) -> str:
    """The steps and their answers, one line each (for the final prompt)."""
    return "\n".join(f"- {hop.query} -> {hop.answer or NOT_FOUND}" for hop in hops) or "- none"


def chained_answer(question: str, steps: list[str], hops: list[Hop]) -> str | None:
    """The last step's answer, when the question is one chain of steps ("Who is X's mother?", "When
    did #1 die?", ``one_chain``) and every step found its fact.  Then no answer call is needed, and
    none can give the intermediate entity instead.  A chain with a missing link gives no answer."""
    if not one_chain(question, steps) or len(hops) != len(steps) or not all(hop.answered for hop in hops):
        return None
    return hops[-1].answer


def answer_from_facts(llm: LLM, question: str, hops: list[Hop],
                      template: str | None = None) -> tuple[str, TraceStep]:
    """A short answer written from the steps' answers (not from whole passages), after naming what
    kind of thing the answer must be."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "answer", question=question) as entry:
        entry.prompts = [prompt_version("chain_answer", template)]
        entry.messages = [{"role": "user", "content": render("chain_answer", template, question=question,
                                                             facts=fence(facts_text(hops)))}]
        try:
            schema = create_model("FinalAnswer", asks_for=ASKS_FOR, answer=answer_field(answer_choices(question)))
            reply = llm.structured(entry.messages, schema, step="answer", max_tokens=80, temperature=0.0)
            entry.raw, answer = reply.raw, " ".join(reply.value.answer.split())
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            answer = found_answers(hops)
            entry.notes.append(f"no valid answer ({exc.last_error}); answering with the facts themselves")
        entry.parsed = answer
    return answer, trace[0]


def one_chain(question: str, steps: list[str]) -> bool:
    """True when the question is one chain of steps whose last step builds on an earlier answer
    ("Who is X's mother?", "When did #1 die?") and offers no options: its last step asks the question."""
    return bool(steps) and bool(_REFERENCE.search(steps[-1])) and not answer_choices(question)


def answer_from_passages(llm: LLM, question: str, hops: list[Hop], question_hits: list[Hit],
                         prompts: PromptSet | None = None) -> tuple[str, TraceStep]:
    """The answer read off passages by the same reader as naive RAG (``read_short_answer``): the last
    step's best passages (about the entity the chain reached) and the question's own best ones."""
    last = hops[-1].hits[:3] if hops else []
    hits = list({hit.id: hit for hit in [*last, *question_hits[:2]]}.values())
    short, _, entry = read_short_answer(llm, question, hits, len(hits), prompts=prompts)
    entry.notes.insert(0, "the facts gave no answer: read from the last step's and the question's passages")
    return short.answer, entry


def final_answer(llm: LLM, question: str, steps: list[str], names: list[str], hops: list[Hop],
                 question_hits: list[Hit] = (), prompts: PromptSet | None = None) -> tuple[str, list[TraceStep]]:
    """The chain's answer from its steps' findings, and the trace of how it was decided: the last
    step's answer for one chain of steps (``chained_answer``), the option the dates decide for a
    which-came-first question (``compared_by_dates``), else one call on the facts
    (``answer_from_facts``).  When the facts give nothing (the chain's last step found nothing, or the
    call says "not found"), the passages are read instead (``answer_from_passages``)."""
    prompts = as_prompt_set(prompts)
    if (last := chained_answer(question, steps, hops)) is not None:
        return last, [TraceStep("answer", len(hops), parsed=last, notes=[
            "one chain of steps: its last step's answer is the answer (no call)"])]
    if (option := compared_by_dates(question, names, hops)) is not None:
        return option, [TraceStep("answer", len(hops), parsed=option, notes=[
            "the dates the steps found decide the comparison (no call)"])]
    entries = []
    if any(hop.answered for hop in hops) and not one_chain(question, steps):
        answer, entry = answer_from_facts(llm, question, hops, prompts.template("chain_answer"))
        entries.append(entry)
        if NOT_FOUND not in answer.lower():
            return answer, entries
    answer, entry = answer_from_passages(llm, question, hops, list(question_hits), prompts)
    return answer, entries + [entry]


def run_chain(question: str, config: Config, *, llm: LLM | None = None, store: VectorStore | None = None,
              embedder: Embedder | None = None, collections: list[str] | None = None,
              prompts: PromptSet | dict | None = None) -> Result:
    """Answer ``question`` step by step; never raises for model misbehaviour.

    ``prompts`` (a ``PromptSet`` or ``{name: text}``) replaces ``chain_plan``, ``chain_read`` or
    ``chain_answer`` with edited texts.  ``Result.sources`` lists every passage found, in turn order
    (see ``EvidenceLog``)."""
    prompts = as_prompt_set(prompts)
    started = time.perf_counter()
    c = config.chain
    llm = llm or make_llm(config, Budget(max_calls=c.max_calls, max_prompt_tokens=c.max_prompt_tokens))
    llm.repair_template = prompts.template("structured_repair")
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    names = [n for n in (collections or store.list_collections()) if store.info(n).count > 0]
    result = Result(question, "chain", usage=llm.ledger,
                    settings={"max_hops": c.max_hops, "hop_passages": c.hop_passages, "top_k": config.search.top_k,
                              "mode": config.search.mode, "model": config.llm.model})
    evidence = EvidenceLog()
    hops: list[Hop] = []
    answer = ""
    try:
        question_hits = search_step(store, embedder, question, names, config, result.trace)
        evidence.add(question, question_hits)
        mentioned, steps, entry = plan_steps(llm, question, c.max_hops, prompts.template("chain_plan"))
        result.trace.append(entry)
        for name in mentioned[: c.max_names]:  # each name the question contains, searched alone (no model call)
            evidence.add(name, search_step(store, embedder, name, names, config, result.trace, entities=[name]))
        for number, step in enumerate(steps, start=1):
            hop = Hop(step, fill_references(step, hops))
            hop.hits = search_step(store, embedder, hop.query, names, config, result.trace, number,
                                   step_entities(step, mentioned, hops))
            evidence.add(hop.query, hop.hits)
            hops.append(hop)
            if not llm.has_room(calls=2):  # keep the last call for the answer
                result.trace.append(TraceStep("budget", number, notes=["budget kept for the answer"]))
                break
            if one_chain(question, steps) and (missing := missing_link(step, hops)):
                result.trace.append(TraceStep("read", number, notes=[f"builds on step {missing}, which found "
                                                                     "nothing: searched, not read (no call)"]))
                continue
            about = step_entities(step, mentioned, hops) + [n for n in mentioned if n.lower() in hop.query.lower()]
            hop.answer, entry = read_answer(llm, hop, c.hop_passages, c.passage_chars, prompts.template("chain_read"),
                                            about)
            entry.iteration = number
            result.trace.append(entry)
            if hop.answered and is_bridge(number, steps):  # the entity found, searched on its own (no call)
                evidence.add(hop.answer, search_step(store, embedder, hop.answer, names, config, result.trace,
                                                     number, [hop.answer]))
        if hops:
            answer, entries = final_answer(llm, question, steps, mentioned, hops, question_hits, prompts)
            result.trace.extend(entries)
    except BudgetExceededError as exc:
        result.trace.append(TraceStep("budget", notes=[f"{exc}; answering with the facts found"]))
    except DeepSearchLabError as exc:  # a backend or database failure: report it in the result
        result.error = f"{type(exc).__name__}: {exc}"
    if not answer and result.error is None:
        answer = found_answers(hops) or NOT_FOUND
    if answer:
        result.short_answer = tidy_answer(answer, question, facts_text(hops))
        said = result.short_answer if answer != NOT_FOUND else "The search found no fact that answers this question."
        result.answer = f"{said}\n\nWhat the steps found:\n{facts_text(hops)}"
    result.sources = evidence.sources(answer)
    result.seconds = time.perf_counter() - started
    return result


def search_step(store: VectorStore, embedder: Embedder, query: str, names: list[str], config: Config,
                trace: list[TraceStep], number: int = 0, entities: list[str] = ()) -> list[Hit]:
    """The pages titled by ``entities`` (``chain.pages`` each, see ``lookup_pages``), then the
    top-k hits for ``query`` over ``names``; each chunk once, traced."""
    with traced(trace, None, "search", number, query=query) as entry:
        pages = [page for name in entities
                 for page in lookup_pages(store, embedder, name, query, names, config.chain.pages)]
        if pages:
            entry.notes.append("pages found by title: " + ", ".join(dict.fromkeys(p.title for p in pages)))
        hits = search(store, embedder, query, names, config.search, pages=pages)
        entry.kept = [hit_summary(h) for h in hits]
    return hits
