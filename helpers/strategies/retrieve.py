"""Retrieve (notebook 04): the routed searches run, at most a few passages of one document each."""
from __future__ import annotations

from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.retrieval import at_most_per_document, merge_hits, search_collections
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
