"""The DeepSearcher pipeline, one function per step:

    decompose -> [route -> retrieve -> filter for relevance -> reflect]* -> synthesize

Each step has its own prompt (``helpers/prompts``), takes an optional edited
``template``, and returns its output plus a ``TraceStep``, so a notebook can run
and change any step alone.  ``run_pipeline`` chains them: the loop repeats
while the reflection step returns gap queries and ``max_iter`` and the budget
allow.  A failing step degrades (and says so in the trace) instead of aborting.
"""
from __future__ import annotations

import time
from typing import Literal, Mapping

from pydantic import BaseModel, Field, create_model

from helpers.config import Config
from helpers.errors import BudgetExceededError, DeepSearchLabError, StructuredOutputError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.query_dedup import QueryDeduper
from helpers.knowledge.retrieval import (at_most_per_document, by_collection_in_turn, fit_chunks, merge_hits,
                                         numbered_chunks, search_collections)
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, Budget, make_llm
from helpers.prompts import PromptSet, as_prompt_set, fence, prompt_version, render
from helpers.results import Hit, Result, TraceStep, hit_summary, traced
from helpers.strategies.answer import read_short_answer
from helpers.strategies.evidence import EvidenceLog
from helpers.strategies.report_writer import outline, write_report
from helpers.strategies.reports import check_point_sources, render_report, report_schema

NOTHING_FOUND = ("The knowledge base holds nothing relevant to this question, so no report was written "
                 "(nothing was invented).")


class SubQueries(BaseModel):
    queries: list[str] = Field(description="short search queries")


class Gaps(BaseModel):
    gaps: list[str] = Field(description="new search queries; empty when nothing is missing")


class RelevantNumbers(BaseModel):
    relevant: list[int]


class RelevantFlag(BaseModel):
    relevant: bool


def _clean_queries(queries: list[str], limit: int, exclude: list[str] = ()) -> list[str]:
    seen = {q.strip().lower() for q in exclude}
    kept = []
    for query in queries:
        query = " ".join(str(query).split())
        if query and query.lower() not in seen:
            seen.add(query.lower())
            kept.append(query)
    return kept[:limit]


# -- decompose ------------------------------------------------------------------
def collection_topics(collections: dict[str, str] | None) -> str:
    """One line per collection: its description up to the first colon (what it is about)."""
    lines = [f"- {text.split(':')[0].strip()}" for text in (collections or {}).values() if text.strip()]
    return "\n".join(lines) or "- (not listed)"


def decompose(llm: LLM, question: str, max_subqueries: int = 4, template: str | None = None,
              collections: dict[str, str] | None = None) -> tuple[list[str], TraceStep]:
    """Split the question into at most ``max_subqueries`` search queries.

    With ``collections`` (name -> description) the prompt lists what the knowledge base
    is about, so that a broad question is split along the topics it can answer."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "decompose", question=question) as entry:
        entry.prompts = [prompt_version("decompose", template)]
        entry.messages = [{"role": "user", "content": render("decompose", template, question=question,
                                                             max_subqueries=max_subqueries,
                                                             topics=collection_topics(collections))}]
        try:
            reply = llm.structured(entry.messages, SubQueries, step="decompose")
            entry.raw = reply.raw
            queries = _clean_queries(reply.value.queries, max_subqueries)
        except StructuredOutputError as exc:
            entry.raw, queries = exc.raw_replies[-1] if exc.raw_replies else "", []
            entry.notes.append(f"decomposition failed ({exc.last_error}); searching with the question itself")
        if not queries:
            queries = [question]
        entry.parsed = queries
    return queries, trace[0]


def similarities_to(embedder: Embedder, question: str, queries: list[str]) -> list[float]:
    """Cosine similarity of each query to the question (the embedder returns unit vectors)."""
    vectors = embedder.embed([question, *queries])
    return [float(v @ vectors[0]) for v in vectors[1:]]


def drop_off_topic(embedder: Embedder, question: str, queries: list[str],
                   focus: float) -> tuple[list[str], list[dict]]:
    """Keep the sub-queries that stay close to the question; return them and the dropped ones.

    A sub-query is dropped when its embedding similarity to the question is under ``focus``
    times that of the closest sub-query (0 keeps all).  Small models given the list of topics
    sometimes add a query per topic, e.g. "sourdough bread baking" for a Simpsons question."""
    if focus <= 0 or len(queries) < 2:
        return queries, []
    similarity = similarities_to(embedder, question, queries)
    floor = focus * max(similarity)
    kept = [q for q, s in zip(queries, similarity) if s >= floor]
    dropped = [{"query": q, "similarity": round(s, 3), "floor": round(floor, 3)}
               for q, s in zip(queries, similarity) if s < floor]
    return kept, dropped


# -- route ----------------------------------------------------------------------
def route_schema(collections: list[str]) -> type[BaseModel]:
    """A schema whose collection field only admits the known names (the grammar enforces it)."""
    route = create_model("Route", collection=(Literal[tuple(collections)], ...), query=(str, ...))
    return create_model("Routing", routes=(list[route], ...))


def describe_collections(store: VectorStore, names: list[str] | None = None) -> dict[str, str]:
    """name -> description, for the collections the router may choose (undescribed ones are left out)."""
    described = {}
    for name in names or store.list_collections():
        description = store.info(name).description.strip()
        if description:
            described[name] = description
    return described


def route(llm: LLM, subquery: str, collections: dict[str, str], iteration: int = 0,
          system_template: str | None = None,
          user_template: str | None = None) -> tuple[list[tuple[str, str]], TraceStep]:
    """Choose collections (possibly none) for one sub-query, each with a rewritten query.

    If the model never gives a valid reply, every described collection is searched
    with the sub-query itself, and the trace says so.
    """
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "route", iteration, subquery=subquery) as entry:
        listing = "\n".join(f"- {name}: {text}" for name, text in collections.items())
        entry.prompts = [prompt_version("route_system", system_template), prompt_version("route_user", user_template)]
        entry.messages = [
            {"role": "system", "content": render("route_system", system_template, collections=listing)},
            {"role": "user", "content": render("route_user", user_template, subquery=subquery)},
        ]
        try:
            reply = llm.structured(entry.messages, route_schema(list(collections)), step="route")
            entry.raw = reply.raw
            chosen: dict[str, str] = {}
            for item in reply.value.routes:
                chosen.setdefault(item.collection, " ".join(item.query.split()) or subquery)
            routes = list(chosen.items())
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            routes = [(name, subquery) for name in collections]
            entry.notes.append(f"routing failed ({exc.last_error}); searching all described collections")
        entry.parsed = [{"collection": c, "query": q} for c, q in routes]
    return routes, trace[0]


def check_route(store: VectorStore, embedder: Embedder, subquery: str, routes: list[tuple[str, str]],
                collections: dict[str, str]) -> tuple[list[tuple[str, str]], str]:
    """Check the router's choice against the data: add the collection holding the chunk that
    matches ``subquery`` best when the model chose others (small models often pick one collection
    for everything).  A choice of no collection at all is left alone.  Returns the routes and a
    note for the trace (empty when nothing was added)."""
    if not routes:
        return routes, ""
    probes = search_collections(store, embedder, subquery, list(collections), k=1)
    if not probes:
        return routes, ""
    best = max(probes, key=lambda hit: hit.similarity)
    if best.collection in {name for name, _ in routes}:
        return routes, ""
    return [*routes, (best.collection, subquery)], (
        f"route check: added '{best.collection}', whose best chunk matches the sub-query most "
        f"closely (similarity {best.similarity:.2f})")


# -- retrieve -------------------------------------------------------------------
def retrieve(store: VectorStore, embedder: Embedder, routes: list[tuple[str, str]], k: int = 5,
             mode: str = "dense", iteration: int = 0, max_per_document: int = 0,
             limit: int | None = None) -> tuple[list[Hit], TraceStep]:
    """Top-k chunks per (collection, query) pair, merged without duplicates (the best ``limit`` of them).

    With ``max_per_document`` the top-k holds at most that many chunks of one document
    (more candidates are fetched, then the surplus of a dominant document is skipped)."""
    trace: list[TraceStep] = []
    with traced(trace, None, "retrieve", iteration, routes=[{"collection": c, "query": q} for c, q in routes],
                k=k, mode=mode, max_per_document=max_per_document) as entry:
        groups = []
        fetch = k * 3 if max_per_document else k
        for collection, query in routes:
            if store.info(collection).count == 0:
                entry.notes.append(f"collection '{collection}' is empty")
                continue
            found = search_collections(store, embedder, query, [collection], k=fetch, mode=mode)
            groups.append(at_most_per_document(found, max_per_document)[:k])
        hits = merge_hits(*groups)[:limit]
        entry.kept = [hit_summary(h) for h in hits]
    return hits, trace[0]


# -- relevance ------------------------------------------------------------------
def filter_relevant(llm: LLM, question: str, hits: list[Hit], method: str = "batch", threshold: float = 0.35,
                    iteration: int = 0, template: str | None = None, preview_chars: int = 400,
                    accept: float | None = None) -> tuple[list[Hit], TraceStep]:
    """Keep the chunks that help answer ``question``.

    ``threshold`` and ``accept`` are on the cosine ``similarity`` scale (dense and hybrid hits both carry it).

    * ``batch``: drop chunks scoring under ``threshold``, keep those scoring at least ``accept``
      (when given) without asking, then ONE call judges the rest (the model returns the numbers
      of the helpful ones).
    * ``per_chunk``: one call per chunk (what DeepSearcher does; slow, for comparison).
    * ``threshold``: no model call, keep chunks scoring at least ``threshold``.
    * ``none``: keep everything.
    """
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "relevance", iteration, method=method, question=question,
                candidates=len(hits)) as entry:
        candidates = hits if method in ("none", "per_chunk") else [h for h in hits if h.similarity >= threshold]
        below = [h for h in hits if h not in candidates]
        if below:
            entry.notes.append(f"{len(below)} chunk(s) under the score threshold {threshold}")
        kept = candidates
        sure = ({h.id for h in candidates if accept is not None and h.similarity >= accept}
                if method == "batch" else set())
        if sure:
            entry.notes.append(f"{len(sure)} chunk(s) scoring at least {accept} kept without asking")
        asked = [h for h in candidates if h.id not in sure]
        if method == "batch" and asked:
            entry.prompts = [prompt_version("relevance_batch", template)]
            entry.messages = [{"role": "user", "content": render(
                "relevance_batch", template, question=question,
                chunks=numbered_chunks(asked, max_chars=preview_chars))}]
            try:
                reply = llm.structured(entry.messages, RelevantNumbers, step="relevance")
                entry.raw = reply.raw
                chosen = {n for n in reply.value.relevant if 1 <= n <= len(asked)}
                judged = {h.id for n, h in enumerate(asked, start=1) if n in chosen}
                kept = [h for h in candidates if h.id in sure or h.id in judged]
            except StructuredOutputError as exc:
                entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
                entry.notes.append(f"relevance check failed ({exc.last_error}); kept every candidate")
        elif method == "per_chunk":
            entry.prompts = [prompt_version("relevance_single", template)]
            kept = []
            for hit in candidates:
                messages = [{"role": "user", "content": render(
                    "relevance_single", template, question=question, chunk=fence(hit.text[:preview_chars]))}]
                entry.messages = messages
                try:
                    if llm.structured(messages, RelevantFlag, step="relevance").value.relevant:
                        kept.append(hit)
                except StructuredOutputError:
                    kept.append(hit)
                    entry.notes.append(f"no valid verdict for chunk {hit.id}; kept it")
        entry.parsed = [h.id for h in kept]
        entry.kept = [hit_summary(h) for h in kept]
        entry.dropped = [hit_summary(h) for h in hits if h not in kept]
    return kept, trace[0]


# -- reflect --------------------------------------------------------------------
def reflect(llm: LLM, question: str, subqueries: list[str], kept: list[Hit], iteration: int = 0,
            max_gaps: int = 3, template: str | None = None,
            deduper: QueryDeduper | None = None) -> tuple[list[str], TraceStep]:
    """Return up to ``max_gaps`` new queries for what is still missing, or [] when covered.

    Exact repeats of earlier searches are always dropped; with a ``deduper`` (which
    remembers the searches made) near-duplicates are dropped too, and the trace says which."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "reflect", iteration, subqueries=subqueries, kept=len(kept)) as entry:
        findings = "\n".join(f"- {h.title} / {h.section or '-'}: {' '.join(h.text.split()[:18])}"
                             for h in kept[:20]) or "- nothing yet"
        entry.prompts = [prompt_version("reflect", template)]
        entry.messages = [{"role": "user", "content": render(
            "reflect", template, question=question, subqueries="\n".join(f"- {q}" for q in subqueries),
            findings=fence(findings))}]
        try:
            reply = llm.structured(entry.messages, Gaps, step="reflect")
            entry.raw = reply.raw
            gaps = _clean_queries(reply.value.gaps, max_gaps, exclude=[question, *subqueries])
            if deduper is not None and gaps:
                checked = deduper.filter(gaps)
                gaps = checked.kept
                entry.dropped = checked.dropped
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            gaps = []
            entry.notes.append(f"reflection failed ({exc.last_error}); stopping the search loop")
        entry.parsed = gaps
    return gaps, trace[0]


# -- synthesize -----------------------------------------------------------------
def passage_listing(hits: list[Hit], why: str) -> str:
    """A report written without the model: ``why``, then the first eight passages with their numbers."""
    lines = [f"{why} The most relevant passages found:"]
    lines += [f"- {h.title} / {h.section or '-'} [{n}]" for n, h in enumerate(hits[:8], start=1)]
    return "\n".join(lines)


SYNTHESIS_PROMPTS = {"structured": "synthesize_structured", "prose": "synthesize"}  # style -> prompt name


def synthesize(llm: LLM, question: str, hits: list[Hit], max_chunks: int = 12, template: str | None = None,
               style: str = "structured", step: str = "synthesize",
               reply_tokens: int | None = None,
               prompts: PromptSet | Mapping[str, str] | None = None) -> tuple[str, list[Hit], TraceStep]:
    """One call writes the report from the kept chunks, citing them as [n] (a short answer to a
    question of fact is ``helpers.strategies.answer.read_short_answer``).

    ``style="structured"`` fills a schema where every point must cite a shown source
    (see ``helpers.strategies.reports``); a point whose cited passages do not hold its words and
    numbers is re-cited to the passage that does, or dropped when none does, and the trace notes it
    (with no point left, the report lists the passages instead).  If the structured call
    fails, a free-text call is made instead.  ``prompts`` (edited texts) supply the prompt when no
    ``template`` is given, and the free-text one.
    Chunks are taken in the order given, as many as fit the context and budget; with none, the
    answer says that nothing relevant was found and no call is made.
    """
    trace: list[TraceStep] = []
    reply_tokens = reply_tokens or llm.max_tokens
    prompt_name = SYNTHESIS_PROMPTS[style]
    prompts = as_prompt_set(prompts)
    template = template if template is not None else prompts.template(prompt_name)
    with traced(trace, llm.ledger, step, question=question, candidates=len(hits), style=style) as entry:
        if not hits:
            entry.notes.append("nothing relevant was found; no model call")
            answer, used = NOTHING_FOUND, []
        else:
            skeleton = render(prompt_name, template, question=question, sources="")
            used, notes = fit_chunks(llm, hits, skeleton, reserve=reply_tokens + 64, max_chunks=max_chunks)
            entry.notes.extend(notes)
            if not used:
                raise BudgetExceededError(f"step '{step}': no passage fits the context or the budget left")
            entry.prompts = [prompt_version(prompt_name, template)]
            entry.messages = [{"role": "user", "content": render(prompt_name, template, question=question,
                                                                 sources=numbered_chunks(used))}]
            answer = ""
            if style == "structured":
                try:
                    reply = llm.structured(entry.messages, report_schema(len(used)), step=step,
                                           max_tokens=reply_tokens)
                    entry.raw = reply.raw
                    entry.notes.extend(check_point_sources(reply.value, [h.text for h in used]))
                    answer = render_report(reply.value) if any(s.points for s in reply.value.sections) else \
                        passage_listing(used, "No point the model wrote is held by the passages it was shown.")
                except StructuredOutputError as exc:
                    entry.notes.append(f"structured report failed ({exc.last_error}); writing free text")
                    prose = SYNTHESIS_PROMPTS["prose"]
                    entry.prompts.append(prompts.version(prose))
                    entry.messages = [{"role": "user", "content": render(prose, prompts.template(prose),
                                                                         question=question,
                                                                         sources=numbered_chunks(used))}]
            if not answer:
                entry.raw = llm.chat(entry.messages, step=step, max_tokens=reply_tokens)
                answer = entry.raw.strip()
            entry.kept = [hit_summary(h) for h in used]
        entry.parsed = answer
    return answer, used, trace[0]


# -- the whole pipeline ------------------------------------------------------------
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
    try:
        _search_loop(llm, question, config, store, embedder, described, evidence, result.trace, prompts)
    except DeepSearchLabError as exc:  # a backend or database failure: report it in the result
        result.error = f"{type(exc).__name__}: {exc}"
    kept = [h for h in evidence.ranked() if h.id not in evidence.demoted]
    used: list[Hit] = []
    answer = ""
    if result.error is None:
        short = p.answer == "short"
        sections = [] if short or p.report_style == "single" else \
            outline(evidence.searches, evidence.demoted, p.report_sections, p.section_passages)
        try:
            if short:
                reply, used, step = read_short_answer(llm, question, kept, p.synthesis_chunks, prompts=prompts)
                result.trace.append(step)
                result.short_answer, answer = reply.answer, reply.explanation or reply.answer
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


def _search_loop(llm: LLM, question: str, config: Config, store: VectorStore, embedder: Embedder,
                 described: dict[str, str], evidence: EvidenceLog, trace: list[TraceStep],
                 prompts: PromptSet) -> None:
    """search the question, decompose, then route -> retrieve -> relevance -> reflect while the model
    finds gaps; every search goes into ``evidence``.

    The question's own top-k is never demoted by the relevance judge.  Stops early when the budget
    left is only enough for the final report; chunks retrieved but not yet judged stay as they are."""
    p = config.pipeline
    # what the final answer needs: its calls (each section and the overview, or one) and a typical
    # prompt size (less when the budget is small)
    sections = p.answer == "report" and p.report_style == "sections"
    final_calls = p.report_sections + 1 if sections else 1
    reserve_prompt = min(5000 if sections else min(llm.context_size // 2, 3000),
                         (llm.budget.max_prompt_tokens or 10**9) // 3)
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
