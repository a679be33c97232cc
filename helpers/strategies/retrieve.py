"""Retrieve (notebook 04): the routed searches run, at most a few passages of one document each."""
from __future__ import annotations

from helpers.config import SearchConfig
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.retrieval import merge_hits, search
from helpers.knowledge.store import VectorStore
from helpers.results import Hit, TraceStep, hit_summary, traced


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
        for collection, query in routes:
            if store.info(collection).count == 0:
                entry.notes.append(f"collection '{collection}' is empty")
                continue
            groups.append(search(store, embedder, query, [collection], SearchConfig(top_k=k, mode=mode),
                                 max_per_document=max_per_document))
        hits = merge_hits(*groups)[:limit]
        entry.kept = [hit_summary(h) for h in hits]
    return hits, trace[0]
