"""The DeepSearcher pipeline: the steps, each in its own module (named as its notebook names it),
chained into one loop:

    decompose -> [route -> retrieve -> relevance -> reflect]* -> report (``report_writer``) or synthesize

A question that asks how something changed gets, after the loop, a timeline search (``timeline``) and
a report told in time order (``report_story``).

Each step has its own prompt (``helpers/prompts``), takes an optional edited
``template``, and returns its output plus a ``TraceStep``, so a notebook can run
and change any step alone.  ``run_pipeline`` chains them: the loop repeats
while the reflection step returns gap queries and ``max_iter`` and the budget
allow.  A failing step degrades (and says so in the trace) instead of aborting.
"""
from __future__ import annotations

import time

from helpers.config import Config
from helpers.errors import BudgetExceededError, DeepSearchLabError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.query_dedup import QueryDeduper
from helpers.knowledge.retrieval import by_collection_in_turn, merge_hits
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, Budget, make_llm
from helpers.prompts import PromptSet, as_prompt_set
from helpers.results import Hit, Result, TraceStep
from helpers.strategies.answer import read_short_answer
from helpers.strategies.decompose import decompose, drop_off_topic
from helpers.strategies.evidence import EvidenceLog
from helpers.strategies.reflect import reflect
from helpers.strategies.relevance import filter_relevant
from helpers.strategies.report_story import PROMPTS as STORY_PROMPTS, story_outline, write_story
from helpers.strategies.report_writer import outline, write_report
from helpers.strategies.retrieve import retrieve
from helpers.strategies.route import check_route, describe_collections, route
from helpers.strategies.synthesize import passage_listing, synthesize
from helpers.strategies.timeline import asks_about_change, timeline_search


def run_pipeline(question: str, config: Config, *, llm: LLM | None = None, store: VectorStore | None = None,
                 embedder: Embedder | None = None, collections: list[str] | None = None,
                 prompts: PromptSet | dict | None = None) -> Result:
    """Answer ``question`` with the DeepSearcher loop; never raises for model misbehaviour.

    ``prompts`` (a ``PromptSet`` or ``{name: text}``) replaces any of the step prompts with edited texts.

    ``pipeline.answer`` chooses a report (``report``) or a short answer (``short``); a report is written
    section by section (``pipeline.report_style: sections``, see ``report_writer``) or in one call (``single``).
    ``Result.sources`` lists the passages the answer was written from, numbered as it cites them,
    then every other passage found, in turn order (``EvidenceLog``); those the relevance judge
    found unhelpful come last."""
    started = time.perf_counter()
    p = config.pipeline
    llm = llm or make_llm(config, Budget(max_calls=p.max_calls, max_prompt_tokens=p.max_prompt_tokens))
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    result = Result(question, "deepsearcher", usage=llm.ledger,
                    settings={"max_iter": p.max_iter, "relevance": p.relevance, "top_k": config.search.top_k,
                              "model": config.llm.model, "mode": config.search.mode, "answer": p.answer})
    described = describe_collections(store, collections)
    evidence = EvidenceLog()
    prompts = as_prompt_set(prompts)
    llm.repair_template = prompts.template("structured_repair")
    try:
        _search_loop(llm, question, config, store, embedder, described, evidence, result.trace, prompts)
    except DeepSearchLabError as exc:  # a backend or database failure: report it in the result
        result.error = f"{type(exc).__name__}: {exc}"
    kept = [h for h in evidence.ranked() if h.id not in evidence.demoted]
    used: list[Hit] = []
    answer = ""
    if result.error is None:
        short = p.answer == "short"
        story = tells_a_story(question, config)
        if story and p.timeline_passages:
            themes = [name for name in described if any(h.collection == name for h in kept)]
            searches, step = timeline_search(store, embedder, question, themes, p.timeline_passages,
                                             per_page=3, mode=config.search.mode)
            result.trace.append(step)
            for query, hits in searches:
                evidence.add(query, hits)
        sections = [] if short or p.report_style == "single" else \
            story_outline(evidence.searches, evidence.demoted, p.report_sections, p.story_passages) if story else \
            outline(evidence.searches, evidence.demoted, p.report_sections, p.section_passages)
        try:
            if short:
                reply, used, step = read_short_answer(llm, question, kept, p.synthesis_chunks, prompts=prompts)
                result.trace.append(step)
                result.short_answer, answer = reply.answer, reply.explanation or reply.answer
            elif story and len(sections) >= 2:
                result.title, answer, used, steps = write_story(
                    llm, question, sections, {name: prompts.template(name) for name in STORY_PROMPTS},
                    point_chars=p.story_point_chars)
                result.trace.extend(steps)
            elif len(sections) >= 2:
                answer, used, steps = write_report(llm, question, sections, {
                    name: prompts.template(name) for name in (
                        "report_section", "report_section_per_passage", "report_overview")},
                    per_passage=p.section_points == "per_passage", point_chars=p.section_point_chars)
                result.trace.extend(steps)
            if not answer:
                if p.report_style == "sections":
                    why = "none was written" if len(sections) >= 2 else "a report needs two"
                    result.trace.append(TraceStep("outline", notes=[
                        f"{len(sections)} section(s) with passages of their own ({why}): one call writes the report"]))
                answer, used, step = synthesize(llm, question, by_collection_in_turn(kept), p.synthesis_chunks,
                                                style=p.synthesis_style, step="synthesize", prompts=prompts,
                                                reply_tokens=p.report_max_tokens)
                result.trace.append(step)
        except BudgetExceededError as exc:
            result.trace.append(TraceStep("budget", notes=[f"{exc}; listing the passages instead"]))
            used = by_collection_in_turn(kept)[: p.synthesis_chunks]
            answer = passage_listing(used, "The model budget ran out before a report could be written.")
        except DeepSearchLabError as exc:
            result.error = f"{type(exc).__name__}: {exc}"
    result.answer = answer
    result.sources = evidence.sources(answer, first=used)
    result.seconds = time.perf_counter() - started
    return result


def tells_a_story(question: str, config: Config) -> bool:
    """True when the report is a story of change told in time order: a sectioned report
    (``pipeline.report_shape: auto``) for a question that asks how something changed."""
    p = config.pipeline
    return p.answer == "report" and p.report_style == "sections" and p.report_shape == "auto" and \
        asks_about_change(question)


def answer_reserve(config: Config, llm: LLM, question: str = "") -> tuple[int, int]:
    """What the answer after the loop needs, kept back from the search: its calls (each section and the
    overview, or one; a story also plans) and a typical prompt size (less when the budget is small)."""
    p = config.pipeline
    sections = p.answer == "report" and p.report_style == "sections"
    story = tells_a_story(question, config)  # a theme's passages in full, for about four themes, and two short calls
    prompt = min(6000 if story else 5000 if sections else min(llm.context_size // 2, 3000),
                 (llm.budget.max_prompt_tokens or 10**9) // (2 if story else 3))
    return (p.report_sections + 1 + story if sections else 1), prompt


def _search_loop(llm: LLM, question: str, config: Config, store: VectorStore, embedder: Embedder,
                 described: dict[str, str], evidence: EvidenceLog, trace: list[TraceStep],
                 prompts: PromptSet) -> None:
    """search the question, decompose, then route -> retrieve -> relevance -> reflect while the model
    finds gaps; every search goes into ``evidence``.

    The question's own top-k is never demoted by the relevance judge.  Stops early when the budget
    left is only enough for the final report; chunks retrieved but not yet judged stay as they are."""
    p = config.pipeline
    final_calls, reserve_prompt = answer_reserve(config, llm, question)
    own, step = retrieve(store, embedder, [(name, question) for name in described], config.search.top_k,
                         config.search.mode, 0, config.search.max_per_document, limit=config.search.top_k)
    step.notes.append("the question itself, searched first: these passages are never dropped")
    trace.append(step)
    evidence.add(question, own)
    protected = {h.id for h in own}
    judged: set[str] = set()
    unjudged: list[Hit] = list(own)
    try:
        pending, step = decompose(llm, question, p.max_subqueries, prompts.template("decompose"), described)
        pending, step.dropped = drop_off_topic(embedder, question, pending, p.subquery_focus)
        if step.dropped:
            step.notes.append(f"dropped {len(step.dropped)} sub-quer{'y' if len(step.dropped) == 1 else 'ies'} "
                              f"far from the question (similarity under {step.dropped[0]['floor']})")
        trace.append(step)
        deduper = QueryDeduper(embedder, config.agent.dedup_threshold)
        deduper.remember([question, *pending])
        asked: list[str] = []
        for iteration in range(1, p.max_iter + 1):
            for subquery in pending:
                if not llm.has_room(2 + final_calls, reserve_prompt):
                    trace.append(TraceStep("budget", iteration, notes=["budget nearly spent: stop searching"]))
                    break
                routes, step = route(llm, subquery, described, iteration, prompts.template("route_system"),
                                     prompts.template("route_user"))
                if p.route_check:
                    routes, note = check_route(store, embedder, subquery, routes, described)
                    if note:
                        step.notes.append(note)
                trace.append(step)
                hits, step = retrieve(store, embedder, routes, config.search.top_k, config.search.mode,
                                      iteration, config.search.max_per_document)
                trace.append(step)
                evidence.add(subquery, hits)
                unjudged = merge_hits(unjudged, [h for h in hits if h.id not in judged])
                asked.append(subquery)
            if unjudged and llm.has_room(1 + final_calls, reserve_prompt):
                judge = "relevance_single" if p.relevance == "per_chunk" else "relevance_batch"
                relevant, step = filter_relevant(llm, question, unjudged, p.relevance, p.relevance_threshold,
                                                 iteration, prompts.template(judge), accept=p.relevance_accept)
                unhelpful = {h.id for h in unjudged} - {h.id for h in relevant}
                if unhelpful & protected:
                    step.notes.append(f"{len(unhelpful & protected)} passage(s) of the question's own search "
                                      "judged unhelpful: kept anyway (a small model's verdict never removes them)")
                evidence.demote(unhelpful - protected)
                judged |= {h.id for h in unjudged}
                trace.append(step)
                unjudged = []
            if iteration == p.max_iter:
                break
            if not llm.has_room(2 + final_calls, reserve_prompt):
                trace.append(TraceStep("budget", iteration,
                                       notes=["budget nearly spent: no reflection, stop searching"]))
                break
            kept = [h for h in evidence.ranked() if h.id not in evidence.demoted]
            pending, step = reflect(llm, question, asked, kept, iteration, template=prompts.template("reflect"),
                                    deduper=deduper)
            trace.append(step)
            if not pending:
                break
    except BudgetExceededError as exc:  # a step's retries ran into the budget: go on to the report
        trace.append(TraceStep("budget", notes=[f"{exc}; stopping the search"]))
    if unjudged:
        trace.append(TraceStep("budget", notes=[f"{len(unjudged)} chunk(s) were not judged (no budget left); "
                                                "they stay in the evidence"]))
