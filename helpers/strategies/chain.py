"""Hop-by-hop search ("chain"), after DeepSearcher's ChainOfRAG agent and IRCoT:

    search the question -> [read the newest passages -> search the next query]* -> answer from the facts

A multi-hop question ("When did Lothair II's mother die?") names only its first
entity; the second one (the mother) appears only in the first passage found.  So
one model call per hop reads the newest passages and writes two short things:
the fact they give (often that bridge entity) and the next simple query, written
from what is now known.  The chain stops when the model writes no next query or
repeats an earlier one, or when the hop limit or the budget is reached; a last
short call answers from the facts found.

Evidence only grows: the question's own search comes first and every passage any
search returned stays in the result (nothing is dropped by a model verdict).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from helpers.config import Config
from helpers.errors import BudgetExceededError, DeepSearchLabError, StructuredOutputError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.query_dedup import QueryDeduper
from helpers.knowledge.retrieval import search_collections
from helpers.knowledge.vectorstore import VectorStore, open_store
from helpers.models.llm import LLM, Budget, make_llm
from helpers.prompts import fence, render
from helpers.results import Hit, Result, TraceStep, hit_summary, traced
from helpers.strategies.evidence import EvidenceLog

NOT_FOUND = "not found"


class ChainStep(BaseModel):
    found: str = Field(description="the fact these results give, or 'not found'")
    next: str = Field(description="the next search query, or empty when the facts answer the question")


class ChainAnswer(BaseModel):
    answer: str = Field(description="the shortest complete answer")


@dataclass
class Hop:
    """One search of the chain: its query, what it returned, what was shown and what the model read there."""

    query: str
    hits: list[Hit]
    shown: list[Hit] = field(default_factory=list)
    found: str = ""

    @property
    def found_something(self) -> bool:
        return bool(self.found) and NOT_FOUND not in self.found.lower()


def known_facts(hops: list[Hop]) -> str:
    """The facts found so far, one line each with the query that found it (for prompts)."""
    lines = [f"- {hop.found} (search: {hop.query})" for hop in hops if hop.found_something]
    return "\n".join(lines) or "- none yet"


def read_hop(llm: LLM, question: str, hops: list[Hop], template: str | None = None,
             passage_chars: int = 500) -> tuple[ChainStep | None, TraceStep]:
    """One model call on the newest hop's shown passages: the fact they give and the next query.
    Returns None (and a trace note) when the model never gives a valid reply."""
    hop = hops[-1]
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "read", len(hops), query=hop.query) as entry:
        passages = "\n\n".join(f"[{n}] {hit.title}\n{fence(hit.text[:passage_chars])}"
                               for n, hit in enumerate(hop.shown, start=1)) or "(nothing new)"
        entry.messages = [{"role": "user", "content": render(
            "chain_step", template, question=question, known=known_facts(hops[:-1]), query=hop.query,
            passages=passages)}]
        entry.kept = [hit_summary(h) for h in hop.shown]
        try:
            reply = llm.structured(entry.messages, ChainStep, step="read", max_tokens=96)
            entry.raw, step = reply.raw, reply.value
            step.found, step.next = " ".join(step.found.split()), " ".join(step.next.split())
            entry.parsed = step.model_dump()
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            entry.notes.append(f"no valid reply ({exc.last_error}); the chain stops here")
            step = None
    return step, trace[0]


def answer_from_facts(llm: LLM, question: str, hops: list[Hop],
                      template: str | None = None) -> tuple[str, TraceStep]:
    """A short answer written from the facts the chain found (not from whole passages)."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "answer", question=question) as entry:
        entry.messages = [{"role": "user", "content": render("chain_answer", template, question=question,
                                                             known=fence(known_facts(hops)))}]
        try:
            reply = llm.structured(entry.messages, ChainAnswer, step="answer", max_tokens=64)
            entry.raw, answer = reply.raw, " ".join(reply.value.answer.split())
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            answer = "; ".join(hop.found for hop in hops if hop.found_something)
            entry.notes.append(f"no valid answer ({exc.last_error}); answering with the facts themselves")
        entry.parsed = answer
    return answer, trace[0]


def run_chain(question: str, config: Config, *, llm: LLM | None = None, store: VectorStore | None = None,
              embedder: Embedder | None = None, collections: list[str] | None = None) -> Result:
    """Answer ``question`` hop by hop; never raises for model misbehaviour.

    ``Result.sources`` lists every passage found, in turn order (see ``EvidenceLog``)."""
    started = time.perf_counter()
    c = config.chain
    llm = llm or make_llm(config, Budget(max_calls=c.max_calls, max_prompt_tokens=c.max_prompt_tokens))
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    names = [n for n in (collections or store.list_collections()) if store.info(n).count > 0]
    result = Result(question, "chain", usage=llm.ledger,
                    settings={"max_hops": c.max_hops, "hop_passages": c.hop_passages, "top_k": config.search.top_k,
                              "mode": config.search.mode, "model": config.llm.model})
    evidence = EvidenceLog()
    hops: list[Hop] = []
    deduper = QueryDeduper(embedder, c.dedup_threshold)
    query = question
    answer = ""
    try:
        while query:
            hop = _search(store, embedder, query, names, config, evidence, result.trace, len(hops))
            hops.append(hop)
            deduper.remember([query])
            if len(hops) > c.max_hops or not llm.has_room(calls=2):
                result.trace.append(TraceStep("stop", len(hops), notes=[
                    "hop limit reached" if len(hops) > c.max_hops else "budget kept for the answer"]))
                break
            step, entry = read_hop(llm, question, hops, passage_chars=c.passage_chars)
            result.trace.append(entry)
            if step is None:
                break
            hop.found = step.found
            query = _next_query(step.next, deduper, entry)
        if any(hop.found_something for hop in hops):
            answer, entry = answer_from_facts(llm, question, hops)
            result.trace.append(entry)
    except BudgetExceededError as exc:
        result.trace.append(TraceStep("budget", notes=[f"{exc}; answering with the facts found"]))
    except DeepSearchLabError as exc:  # a backend or database failure: report it in the result
        result.error = f"{type(exc).__name__}: {exc}"
    if not answer and result.error is None:
        answer = "; ".join(hop.found for hop in hops if hop.found_something) or \
            "The search found no fact that answers this question."
    result.answer = answer
    result.sources = evidence.sources(answer)
    result.seconds = time.perf_counter() - started
    return result


def _search(store: VectorStore, embedder: Embedder, query: str, names: list[str], config: Config,
            evidence: EvidenceLog, trace: list[TraceStep], hop_number: int) -> Hop:
    """Search ``query``, add the hits to the evidence, and pick the new ones the model will read."""
    with traced(trace, None, "search", hop_number, query=query) as entry:
        hits = search_collections(store, embedder, query, names, k=config.search.top_k, mode=config.search.mode,
                                  ranker=config.search.ranker)[: config.search.top_k]
        shown_before = evidence.shown_ids()
        fresh = [h for h in hits if h.id not in shown_before]
        hop = Hop(query, hits, shown=fresh[: config.chain.hop_passages])
        evidence.add(query, hits, shown=hop.shown)
        entry.kept = [hit_summary(h) for h in hits]
        if not fresh:
            entry.notes.append("every passage found was read before")
    return hop


def _next_query(proposed: str, deduper: QueryDeduper, entry: TraceStep) -> str:
    """The model's next query, or "" when it wrote none or one too close to an earlier search."""
    if not proposed or proposed.strip('"\' .').lower() in ("", "none", "null", "n/a"):
        entry.notes.append("no next query: the chain is done")
        return ""
    checked = deduper.filter([proposed], remember=False)
    if not checked.kept:
        entry.notes.append(f"next query {proposed!r} repeats an earlier search: the chain stops")
        return ""
    return proposed
