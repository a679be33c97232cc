"""Re-ingest benchmark (issue 17): one large single-file source (20 MB by default), two of its
paragraphs edited, ingested again.

Goals (printed, never asserted): only the changed chunks are embedded again; the old versions
are gone, so the chunk count after equals the count before; the re-ingest takes at most 10 % of
the full ingest's time, both measured in this run with the real embedding model.

Usage: python bench/bench_reingest.py [--megabytes 20]
"""
from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from common import bench_config, table

from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.ingest import ingest
from helpers.knowledge.vectorstore import MilvusStore

WORDS = ("animation studio season episode voice cast writer showrunner rating award critic town family school "
         "plant tavern church mayor police doctor teacher bus driver comic store couch gag opening sequence "
         "colour paint digital high definition widescreen movie short crossover guest star catchphrase").split()


class CountingEmbedder(Embedder):
    """The real embedder, counting the texts it embeds."""

    def __init__(self, inner: Embedder):
        self.inner, self.name, self.dimension, self.embedded = inner, inner.name, inner.dimension, 0

    def embed(self, texts):
        self.embedded += len(texts)
        return self.inner.embed(texts)


def write_source(path: Path, megabytes: float) -> list[str]:
    """A Markdown file of numbered sections with distinct paragraphs; returns the paragraphs."""
    rng = random.Random(7)
    paragraphs, size = [], 0
    while size < megabytes * 1_000_000:
        n = len(paragraphs)
        text = f"Paragraph {n}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 110))) + "."
        paragraphs.append(text)
        size += len(text) + 30
    sections = [f"## Part {n // 8}\n\n" + "\n\n".join(paragraphs[n:n + 8]) for n in range(0, len(paragraphs), 8)]
    path.write_text("# A large source\n\n" + "\n\n".join(sections) + "\n")
    return paragraphs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "large.md"
        paragraphs = write_source(source, args.megabytes)
        config = bench_config(**{"vector_db.uri": str(Path(tmp) / "milvus.db")})
        store = MilvusStore(config.vector_db.uri)
        embedder = CountingEmbedder(get_embedder(config.embedding))

        started = time.perf_counter()
        first = ingest([str(source)], "large", "a large source", config, store=store, embedder=embedder,
                       progress=False)
        full_seconds, full_embedded = time.perf_counter() - started, embedder.embedded
        before = store.info("large").count

        text = source.read_text()
        for n in (len(paragraphs) // 3, 2 * len(paragraphs) // 3):
            text = text.replace(paragraphs[n], paragraphs[n].replace(f"Paragraph {n}:", f"Paragraph {n} (edited):"))
        source.write_text(text)
        embedder.embedded = 0
        started = time.perf_counter()
        second = ingest([str(source)], "large", "a large source", config, store=store, embedder=embedder,
                        progress=False)
        re_seconds = time.perf_counter() - started
        after = store.info("large").count
        store.close()
        megabytes = source.stat().st_size / 1e6

    ratio = re_seconds / full_seconds
    print(f"== re-ingest of a {megabytes:.1f} MB single-file source, 2 paragraphs edited ==")
    print(table([
        {"run": "full ingest", "chunks": first.chunks_total, "embedded": full_embedded, "added": first.chunks_added,
         "removed": first.chunks_removed, "seconds": round(full_seconds, 1)},
        {"run": "re-ingest", "chunks": second.chunks_total, "embedded": embedder.embedded,
         "added": second.chunks_added, "removed": second.chunks_removed, "seconds": round(re_seconds, 1)},
    ]))
    print("\n== goals ==")
    print(f"only changed chunks embedded again: {embedder.embedded} embedded, {second.chunks_added} added "
          f"({'met' if embedder.embedded == second.chunks_added == second.chunks_removed else 'NOT met'})")
    print(f"count before = count after: {before} vs {after} ({'met' if before == after else 'NOT met'})")
    print(f"re-ingest time: {ratio:.1%} of the full ingest ({'met' if ratio <= 0.10 else 'NOT met'}, goal <= 10 %)")


if __name__ == "__main__":
    main()
