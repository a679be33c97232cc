"""Route (notebook 03): each sub-query sent to the collections whose descriptions fit it; the
route check adds the collection whose passages match the sub-query best when the model left it out."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, create_model

from helpers.errors import StructuredOutputError
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.retrieval import search_collections
from helpers.knowledge.store import VectorStore
from helpers.models.llm import LLM
from helpers.prompts import prompt_version, render
from helpers.results import TraceStep, traced


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
