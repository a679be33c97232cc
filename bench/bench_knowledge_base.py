"""Knowledge-base benchmark (issue: knowledge base).

1. Ingest throughput: chunks/s end to end (read, chunk, hash, embed, insert,
   flush) vs the embedding model alone on the same chunks in one call (its
   fastest way), in the same run (goal: ingest >= 85% of the embedding-only rate).
2. Search latency (median, p95) for top-5 on a 6,000-chunk collection after
   flush, dense and hybrid.  The 6k rows are the corpus chunks repeated with
   small perturbations of their real vectors (embedding 6k distinct chunks
   would take ~7 minutes here and does not change search cost).

Usage: python bench/bench_knowledge_base.py [--copies 4] [--repeats 3] [--rows 6000] [--queries 50]
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from common import BENCH_OUT, bench_config, search_latency_ms, table

from helpers.config import PROJECT_ROOT
from helpers.knowledge.chunking import chunk_documents
from helpers.knowledge.embeddings import get_embedder
from helpers.knowledge.ingest import ingest
from helpers.knowledge.loaders import expand_sources, load_source
from helpers.knowledge.vectorstore import MilvusStore

CORPUS = PROJECT_ROOT / "data" / "simpsons"


def make_copies(folder: Path, copies: int) -> Path:
    """The corpus ``copies`` times over (distinct paths, so distinct chunk ids)."""
    for i in range(copies):
        target = folder / f"copy{i}"
        shutil.copytree(CORPUS, target, ignore=shutil.ignore_patterns("SOURCES.md"))
    return folder


def ingest_vs_embedding(copies: int, repeats: int) -> dict:
    """Best of ``repeats`` rounds, each timing the embedding alone and then a whole ingest into a new collection."""
    config = bench_config()
    embedder = get_embedder(config.embedding)
    embed_rates, ingest_rates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = make_copies(Path(tmp) / "corpus", copies)
        docs = [d for s in expand_sources([str(corpus)]) for d in load_source(s)]
        chunks = chunk_documents(docs, config.chunking.chunk_size, config.chunking.chunk_overlap)
        embedder.embed([c.text for c in chunks[:32]])  # warm-up
        store = MilvusStore(str(Path(tmp) / "milvus.db"))
        for round_number in range(repeats):
            started = time.perf_counter()
            embedder.embed([c.text for c in chunks])  # one call: the model sorts all texts by length (its best)
            embed_rates.append(len(chunks) / (time.perf_counter() - started))
            started = time.perf_counter()
            report = ingest([str(corpus)], f"bench_{round_number}", "benchmark copy of the corpus", config,
                            store=store, embedder=embedder, progress=False)
            ingest_rates.append(report.chunks_added / (time.perf_counter() - started))
        store.close()
    embed_rate, ingest_rate = max(embed_rates), max(ingest_rates)
    return {"chunks": len(chunks), "rounds": repeats, "embedding only chunks/s": embed_rate,
            "ingest chunks/s": ingest_rate, "ingest / embedding %": 100 * ingest_rate / embed_rate}


def search_latency(rows: int, queries: int) -> list[dict]:
    config = bench_config()
    embedder = get_embedder(config.embedding)
    docs = [d for s in expand_sources([str(CORPUS)]) for d in load_source(s)]
    chunks = chunk_documents(docs, config.chunking.chunk_size, config.chunking.chunk_overlap)
    vectors = embedder.embed([c.text for c in chunks])
    rng = np.random.default_rng(0)
    path = BENCH_OUT / "latency.db"
    shutil.rmtree(path, ignore_errors=True)
    store = MilvusStore(str(path))
    store.create_collection("latency", "latency benchmark", embedder)
    batch = []
    for i in range(rows):
        chunk = chunks[i % len(chunks)]
        vector = vectors[i % len(chunks)] + rng.normal(0, 0.02, vectors.shape[1]).astype(np.float32)
        row = chunk.row((vector / np.linalg.norm(vector)).tolist())
        row["id"] = f"{chunk.id[:24]}{i:08d}"
        batch.append(row)
        if len(batch) == 500:
            store.insert("latency", batch)
            batch = []
    store.insert("latency", batch)
    store.flush("latency")
    questions = [c.text.split("\n", 1)[-1][:80] for c in chunks[:queries]]
    results = []
    for mode in ("dense", "hybrid"):
        median, p95 = search_latency_ms(store, "latency", embedder, questions, mode)
        results.append({"mode": mode, "rows": rows, "queries": len(questions), "median ms": median, "p95 ms": p95})
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the ingest comparison (best of)")
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    print("== ingest throughput vs embedding alone (goal >= 85%) ==")
    print(table([ingest_vs_embedding(args.copies, args.repeats)]))
    print("\n== search latency, top-5 after flush (includes embedding the query) ==")
    print(table(search_latency(args.rows, args.queries)))


if __name__ == "__main__":
    main()
