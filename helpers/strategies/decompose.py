"""Decompose (notebook 02): a broad question split into a few short search queries, each on
another side of it; sub-queries that drift far from the question are dropped (``drop_off_topic``)."""
from __future__ import annotations

from pydantic import BaseModel, Field

from helpers.errors import StructuredOutputError
from helpers.knowledge.embeddings import Embedder
from helpers.models.llm import LLM
from helpers.prompts import prompt_version, render
from helpers.results import TraceStep, traced


class SubQueries(BaseModel):
    queries: list[str] = Field(description="short search queries")


def clean_queries(queries: list[str], limit: int, exclude: list[str] = ()) -> list[str]:
    seen = {q.strip().lower() for q in exclude}
    kept = []
    for query in queries:
        query = " ".join(str(query).split())
        if query and query.lower() not in seen:
            seen.add(query.lower())
            kept.append(query)
    return kept[:limit]


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
            queries = clean_queries(reply.value.queries, max_subqueries)
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
