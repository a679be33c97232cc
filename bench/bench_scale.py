"""Cost as the corpus grows, and the evaluation's throughput with parallel workers (issue 60).

On this machine, nothing else running:

- ingest: the 2WikiMultiHopQA corpus (one chunk per paragraph) into a fresh Milvus Lite directory:
  seconds per 1,000 chunks to embed them (MiniLM on this CPU) and to insert and flush them, apart;
- search: the same collection grown to each of ``--sizes`` chunks (beyond the real corpus, synthetic
  rows: a real paragraph's vector with noise, and a text drawn from the corpus's words, so dense and BM25
  both have work), and at each size the latency of ``--queries`` searches (the dev questions), dense and
  hybrid, p50 and p95, with the memory of this process (Milvus Lite runs inside it, beside the embedding model)
  and the directory's size on disk;
- throughput: ``--eval-questions`` dev questions answered by naive RAG through a local llama.cpp server
  (``python -m llama_cpp.server``, the fast 0.5B model) with 1, 2 and 4 workers: questions per minute,
  and the ratio to 1 worker (that server answers one request at a time: on one machine the workers only
  overlap the retrieval and the bookkeeping with the model's work).

Rows (with the commit, date, CPU and model) go to ``--out DIR/scale.jsonl``; ``bench/tables.py`` makes
``docs/scale.md`` and its plot from them.  Figures are printed, never asserted.

Usage: python bench/bench_scale.py [--sizes 6000,60000,600000] [--queries 50] [--eval-questions 8]
                                   [--workers 1,2,4] [--paragraphs N] [--out bench/results/scale]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from pathlib import Path

import numpy as np
from common import BENCH_OUT, PROJECT_ROOT, search_latency_ms, table

DATA = PROJECT_ROOT / "data" / "2wiki"
COLLECTION = "scale"


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid`` and all its descendants, in MiB (Linux ``/proc``)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, StopIteration):
            continue
    return total / 1024


def disk_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def synthetic_rows(paragraphs: list[dict], vectors: np.ndarray, count: int, start: int, rng: random.Random,
                   words: list[str]) -> list[dict]:
    """``count`` rows like the real ones: a real paragraph's vector plus noise (unit length), a text of
    corpus words, and the store's metadata fields."""
    rows = []
    for n in range(start, start + count):
        base = rng.randrange(len(paragraphs))
        noisy = vectors[base] + np.random.default_rng(n).normal(0, 0.05, vectors.shape[1]).astype(np.float32)
        rows.append({"id": f"syn{n}", "vector": (noisy / np.linalg.norm(noisy)).tolist(),
                     "text": " ".join(rng.choices(words, k=60)), "source": "synthetic", "title": f"synthetic {n}",
                     "section": "", "chunk_index": 0, "content_hash": ""})
    return rows


def measure_store(sizes: list[int], queries: int, stamp: dict, config, paragraphs_limit: int | None = None) -> list[dict]:
    """The ingest row and one search row per size (``paragraphs_limit``: the corpus's first N only)."""
    from helpers.knowledge.embeddings import get_embedder
    from helpers.knowledge.vectorstore import MilvusStore

    paragraphs = json.loads((DATA / "corpus.json").read_text())[:paragraphs_limit]
    questions = [q["question"] for q in json.loads((DATA / "dev.json").read_text())][:queries]
    embedder = get_embedder(config.embedding)
    folder = BENCH_OUT / "scale" / "milvus.db"
    shutil.rmtree(folder, ignore_errors=True)
    store = MilvusStore(str(folder))
    store.create_collection(COLLECTION, "the 2Wiki corpus, grown with synthetic rows", embedder)
    texts = [f"{p['title']}\n{p['text']}" for p in paragraphs]
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    embed_s = time.perf_counter() - started
    rows = [{"id": f"p{i}", "vector": v.tolist(), "text": t[:8000], "source": "corpus.json", "title": p["title"],
             "section": "", "chunk_index": 0, "content_hash": ""} for i, (p, v, t) in enumerate(zip(paragraphs, vectors, texts))]
    started = time.perf_counter()
    for at in range(0, len(rows), 1000):
        store.insert(COLLECTION, rows[at: at + 1000])
    store.flush(COLLECTION)
    insert_s = time.perf_counter() - started
    out = [{"part": "ingest", "chunks": len(rows), "embed s / 1k": round(1000 * embed_s / len(rows), 2),
            "insert s / 1k": round(1000 * insert_s / len(rows), 2), **stamp}]
    print(f"ingest: {len(rows)} chunks, embed {out[0]['embed s / 1k']} s / 1k, insert+flush "
          f"{out[0]['insert s / 1k']} s / 1k", flush=True)
    rng, words = random.Random(7), " ".join(p["text"] for p in paragraphs[:2000]).split()
    count = len(rows)
    for size in sizes:
        started = time.perf_counter()
        while count < size:
            batch = synthetic_rows(paragraphs, vectors, min(10_000, size - count), count, rng, words)
            store.insert(COLLECTION, batch)
            count += len(batch)
            if count % 100_000 == 0:
                print(f"  {count:,} chunks ({time.perf_counter() - started:.0f} s)", flush=True)
        store.flush(COLLECTION)
        grow_s = time.perf_counter() - started
        store.close()  # opened again, the collection is loaded afresh, so the search sees every row
        store = MilvusStore(str(folder))
        dense, hybrid = (search_latency_ms(store, COLLECTION, embedder, questions, mode) for mode in ("dense", "hybrid"))
        row = {"part": "search", "chunks": count, "dense p50 ms": round(dense[0], 1), "dense p95 ms": round(dense[1], 1),
               "hybrid p50 ms": round(hybrid[0], 1), "hybrid p95 ms": round(hybrid[1], 1),
               "process MiB": round(process_rss(), 0), "disk MiB": round(disk_mib(folder), 1),
               "grow s": round(grow_s, 1), **stamp}
        out.append(row)
        print(f"{count:>8} chunks: dense p50/p95 {row['dense p50 ms']}/{row['dense p95 ms']} ms, hybrid "
              f"{row['hybrid p50 ms']}/{row['hybrid p95 ms']} ms, process {row['process MiB']:.0f} MiB, disk "
              f"{row['disk MiB']:.0f} MiB (grown in {grow_s:.0f} s)", flush=True)
    store.close()
    return out


def process_rss() -> float:
    """The memory of this process (Milvus Lite runs inside it) and of any process it started, in MiB."""
    return rss_mib(os.getpid())


def measure_workers(workers: list[int], count: int, stamp: dict) -> list[dict]:
    """Questions per minute of naive RAG through a local llama.cpp server, per number of workers."""
    from helpers.config import FAST_OVERRIDES, load_config
    from helpers.evaluation.harness import load_questions, prepare_corpus, run_evaluation, sample_by_type
    from helpers.models.llama_server import llama_server
    from helpers.models.model_files import resolve_gguf

    model = FAST_OVERRIDES["llm.model"]
    base = load_config(overrides={**FAST_OVERRIDES, "vector_db.uri": str(BENCH_OUT / "scale" / "eval.db")})
    prepare_corpus(DATA / "corpus.json", base)
    questions = sample_by_type(load_questions(DATA / "dev.json"), count)
    out = []
    with llama_server(resolve_gguf(model), model, context_size=base.llm.context_size, threads=2,
                      seed=base.llm.seed) as url:
        config = load_config(overrides={**FAST_OVERRIDES, "vector_db.uri": base.vector_db.uri,
                                        "llm.provider": "openai", "llm.base_url": url, "llm.model": model})
        for n in workers:
            folder = BENCH_OUT / "scale" / f"eval-{n}"
            shutil.rmtree(folder, ignore_errors=True)
            started = time.perf_counter()
            summary = run_evaluation(questions, ["naive"], config, folder, progress=False, workers=n)
            seconds = time.perf_counter() - started
            out.append({"part": "eval", "workers": n, "questions": summary["naive"]["questions"],
                        "seconds": round(seconds, 1), "questions / min": round(60 * len(questions) / seconds, 2),
                        **stamp, "model": model, "provider": "openai (llama_cpp.server)"})
            print(f"{n} worker(s): {len(questions)} questions in {seconds:.0f} s", flush=True)
    first = out[0]["questions / min"]
    for row in out:
        row["vs 1 worker"] = round(row["questions / min"] / first, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="6000,60000,600000", help="collection sizes (chunks) to search")
    parser.add_argument("--queries", type=int, default=50, help="searches per size and mode")
    parser.add_argument("--eval-questions", type=int, default=8, help="dev questions per worker count")
    parser.add_argument("--workers", default="1,2,4", help="worker counts for the throughput part ('' skips it)")
    parser.add_argument("--paragraphs", type=int, help="ingest only the corpus's first N paragraphs (a quick try)")
    parser.add_argument("--out", help="a folder for scale.jsonl (for docs/scale.md)")
    args = parser.parse_args()
    from helpers.config import load_config
    from helpers.evaluation.harness import run_stamp
    config = load_config()
    stamp = {k: v for k, v in run_stamp(config).items() if k in ("commit", "date", "cpu")}
    rows = measure_store([int(s) for s in args.sizes.split(",")], args.queries, stamp, config, args.paragraphs)
    if args.workers:
        rows += measure_workers([int(n) for n in args.workers.split(",")], args.eval_questions, stamp)
    print()
    for part in ("ingest", "search", "eval"):
        print(table([{k: v for k, v in r.items() if k not in ("commit", "date", "cpu", "part")}
                     for r in rows if r["part"] == part]) + "\n")
    search = [r for r in rows if r["part"] == "search"]
    if len(search) > 1:
        print(f"dense p95 at {search[-1]['chunks']:,} chunks: {search[-1]['dense p95 ms']} ms, "
              f"{search[-1]['dense p95 ms'] / search[0]['dense p95 ms']:.1f}x that at {search[0]['chunks']:,}")
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "scale.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"rows: {folder / 'scale.jsonl'}")


if __name__ == "__main__":
    main()
