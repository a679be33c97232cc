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

A step that asks one family relation of a named person ("Who is the mother of Lothair II?") is
read by having the model write down that person's family from the passages (``read_relative``,
prompt ``chain_family``) and taking the relative asked for; when that family has none, the step
is read as any other.

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
from typing import Mapping

from pydantic import BaseModel, Field

from helpers.answer_text import answer_choices, drop_echo, names_one_of, said_about
from helpers.config import ChainConfig, Config
from helpers.errors import BudgetExceededError, DeepSearchLabError, StructuredOutputError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.retrieval import best_part, lookup_pages, search
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, Budget, make_llm
from helpers.prompts import PromptSet, as_prompt_set, fence, prompt_version, render
from helpers.results import Hit, Result, TraceStep, hit_summary, traced
from helpers.strategies.answer import NOT_FOUND, tidy_answer
from helpers.strategies.chain_answer import final_answer
from helpers.strategies.chain_hops import (REFERENCE, Hop, asked_role, facts_text, fill_references, fits_kind,
                                           found_answers, is_bridge, missing_link, one_chain, read_about,
                                           refuse_subject, role_unsaid, step_entities, wanted_kind)
from helpers.strategies.evidence import EvidenceLog
from helpers.strategies.relations import Family, relation_plan, relative_in, simple_relation


class Plan(BaseModel):
    names: list[str] = Field(description="the names the question contains")
    steps: list[str] = Field(description="simple questions in order; #n stands for the answer of step n")


class StepAnswer(BaseModel):
    answer: str = Field(description="a few words copied from the results, or 'not found'")




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
        mirrored = mirror_steps(question, steps, names)
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


def mirror_steps(question: str, steps: list[str], names: list[str]) -> list[str]:
    """A comparison asks the same chain of each thing it names.  When the question compares (it
    offers options or asks yes or no, ``answer_choices``) and names several things but the steps
    mention only one of them (small models often stop after the first), the steps are repeated for
    each other name, references renumbered.  A question that compares nothing is left as planned:
    its "names" are then often two spellings of one thing ("Film X (Film)", "director of film X")."""
    named = _named(steps, names)
    if len(names) < 2 or len(named) != 1 or not answer_choices(question):
        return steps
    first = re.compile(re.escape(named[0]), re.IGNORECASE)
    mirrored = list(steps)
    for other in (n for n in names if n != named[0]):
        offset = len(mirrored)
        for step in steps:
            step = REFERENCE.sub(lambda m: f"#{int(m.group(1)) + offset}", step)
            mirrored.append(first.sub(lambda _: other, step))
    return mirrored


def read_answer(llm: LLM, hop: Hop, passages: int = 3, passage_chars: int = 600,
                prompts: PromptSet | Mapping[str, str] | None = None, about: list[str] = (),
                embedder: Embedder | None = None) -> tuple[str, TraceStep]:
    """The answer to one simple step, read off its best ``passages`` hits (or "not found"), without
    a first part that repeats the step (``drop_echo``).  A reply that names what the step is
    ``about`` (asked for Ann's mother, a small model may copy Ann's own name or write a sentence
    about her) gives what the sentence says after her name (``said_about``); with nothing there, it
    is sent back once (``chain_reread``).  A reply of the wrong kind (a date, asked where or who;
    no date, asked when: ``fits_kind``) is sent back once too (``chain_rekind``).  A second reply
    that still names her, or is still of the wrong kind, counts as not found.  Asked for a role
    (the composer), a name that no sentence speaking of that role names (the director, written
    beside "music by ...": ``role_unsaid``) is sent back once, and the second reply is kept.  A passage longer
    than ``passage_chars`` shows its first sentence and the sentences closest to the step
    (``best_part``, with an ``embedder``; else its first ``passage_chars``)."""
    prompts = as_prompt_set(prompts)
    trace: list[TraceStep] = []
    shown = hop.hits[:passages]
    wanted = wanted_kind(hop.query)
    with traced(trace, llm.ledger, "read", query=hop.query) as entry:
        text = passages_text(shown, hop.query, passage_chars, embedder)
        entry.prompts = [prompts.version("chain_read")]
        entry.messages = [{"role": "user", "content": render("chain_read", prompts.template("chain_read"),
                                                             step=hop.query, passages=text or "(nothing found)")}]
        entry.kept = [hit_summary(h) for h in shown]
        try:
            answer, entry.raw = _read_reply(llm, entry.messages, hop.query, entry)
            named = [n for n in about if names_one_of(answer, [n])]
            rest = said_about(answer, named, lambda part: fits_kind(part, wanted)) if answer and named else ""
            if rest:
                entry.notes.append(f"{answer!r} is a sentence about {', '.join(named)}: kept what it says, {rest!r}")
                answer = rest
            elif answer and named and llm.has_room(calls=2):
                entry.notes.append(f"{answer!r} names {', '.join(named)}, what the step is about: asked once more")
                answer = _ask_again(llm, entry, prompts, "chain_reread", hop.query, said=answer,
                                    about=" and ".join(named))
            elif not fits_kind(answer, wanted) and llm.has_room(calls=2):
                entry.notes.append(f"{answer!r} is not {wanted}, what the step asks for: asked once more")
                answer = _ask_again(llm, entry, prompts, "chain_rekind", hop.query, said=answer, wanted=wanted)
            elif (role := asked_role(hop.query)) and role_unsaid(answer, role[1], text) and llm.has_room(calls=2):
                entry.notes.append(f"no sentence that names {answer!r} speaks of {role[0]}, what the step asks "
                                   "for: asked once more")
                answer = _ask_again(llm, entry, prompts, "chain_rekind", hop.query, said=answer, wanted=role[0])
            answer = refuse_subject(answer, about, entry)
            if not fits_kind(answer, wanted):  # "not found" fits every kind
                entry.notes.append(f"{answer!r} is not {wanted}: counted as not found")
                answer = NOT_FOUND
        except StructuredOutputError as exc:
            entry.raw, answer = exc.raw_replies[-1] if exc.raw_replies else "", NOT_FOUND
            entry.notes.append(f"no valid reply ({exc.last_error}); counted as not found")
        entry.parsed = answer or NOT_FOUND
    return entry.parsed, trace[0]


def read_step(llm: LLM, hop: Hop, number: int, settings: ChainConfig, prompts: PromptSet, about: list[str],
              embedder: Embedder | None = None) -> tuple[str, list[TraceStep]]:
    """Step ``number``'s answer and the trace of its reads: a step that asks one family relation
    (``simple_relation``) is read off the family the model writes down (``read_relative``); any
    other step, or one whose family has no such relative, is read as a question (``read_answer``)
    while the budget keeps room for the final answer."""
    answer, entries = "", []
    if (relative := simple_relation(hop.query)) is not None:
        answer, entry = read_relative(llm, hop, *relative, settings.hop_passages, settings.passage_chars, prompts,
                                      about, embedder)
        entries.append(entry)
    if not answer and (not entries or llm.has_room(calls=2)):
        answer, entry = read_answer(llm, hop, settings.hop_passages, settings.passage_chars, prompts, about,
                                    embedder)
        entries.append(entry)
    for entry in entries:
        entry.iteration = number
    return answer, entries


def passages_text(hits: list[Hit], query: str, passage_chars: int, embedder: Embedder | None) -> str:
    """Numbered passages for a read prompt: each hit's title and the part of its text that best
    matches ``query`` (``best_part``)."""
    return "\n\n".join(f"[{n}] {hit.title}\n{fence(best_part(hit.text, query, passage_chars, embedder, hit.title))}"
                       for n, hit in enumerate(hits, start=1))


def read_relative(llm: LLM, hop: Hop, relation: str, person: str, passages: int = 3, passage_chars: int = 600,
                  prompts: PromptSet | Mapping[str, str] | None = None, about: list[str] = (),
                  embedder: Embedder | None = None) -> tuple[str, TraceStep]:
    """The answer to a step that asks one family relation of ``person`` ("Who is the mother of
    X?"): the model writes down X's family from the best ``passages`` hits (``chain_family``), and
    the relative asked for is taken from it; "" when the family it wrote has none that is not one
    of ``about``."""
    prompts = as_prompt_set(prompts)
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "family", query=hop.query) as entry:
        shown = hop.hits[:passages]
        entry.prompts = [prompts.version("chain_family")]
        entry.messages = [{"role": "user", "content": render(
            "chain_family", prompts.template("chain_family"), person=person,
            passages=passages_text(shown, hop.query, passage_chars, embedder) or "(nothing found)")}]
        entry.kept = [hit_summary(h) for h in shown]
        try:
            reply = llm.structured(entry.messages, Family, step="family", max_tokens=160, temperature=0.0)
            entry.raw = reply.raw
            entry.parsed = relative_in(reply.value, relation, [person, *about])
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
    question_hits: list[Hit] = []
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
            hop.answer, entries = read_step(llm, hop, number, c, prompts, read_about(hop, mentioned, hops), embedder)
            result.trace.extend(entries)
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
        result.short_answer = tidy_answer(answer, question, facts_text(hops),
                                          [hit.text for hits in (question_hits, *(h.hits for h in hops)) for hit in hits])
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
