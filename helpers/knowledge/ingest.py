"""Ingestion: sources -> documents -> chunks -> embeddings -> a described collection.

* Idempotent: chunk ids are content hashes, rows already present are skipped,
  and rows are inserted batch by batch, so an interrupted ingest resumes.
* A file that changed replaces its old chunks: once the new ones are in, chunks of
  that source that are no longer produced are deleted.
* ``force=True`` drops and rebuilds the collection.
* One bad file (binary, empty, undecodable, unreadable) is reported and
  skipped; the rest goes in.  The report says what was added and skipped, and why.
* The collection is flushed at the end, so searches use the index.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from helpers.config import PROJECT_ROOT, Config
from helpers.errors import IngestError
from helpers.knowledge.chunking import Chunk, chunk_document, content_id
from helpers.knowledge.embeddings import Embedder, get_embedder, warn_if_cut
from helpers.knowledge.loaders import Document, SourceError, expand_sources, load_source
from helpers.knowledge.vectorstore import VectorStore, open_store

MANIFEST = PROJECT_ROOT / "data" / "collections.json"


@dataclass
class IngestReport:
    collection: str
    files_read: int = 0
    chunks_total: int = 0
    chunks_added: int = 0
    chunks_present: int = 0
    chunks_cut: int = 0
    chunks_removed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)

    def summary(self) -> str:
        lines = [f"{self.collection}: {self.files_read} source(s) read, {self.chunks_total} chunks, "
                 f"{self.chunks_added} added, {self.chunks_present} already present"
                 + (f", {self.chunks_removed} outdated removed" if self.chunks_removed else "")]
        if self.chunks_cut:
            lines.append(f"  {self.chunks_cut} chunk(s) longer than the embedding window (cut when embedded)")
        for source, reason in self.skipped:
            lines.append(f"  skipped {source}: {reason}")
        return "\n".join(lines)


def _chunks_for(doc: Document, config: Config) -> list[Chunk]:
    if doc.metadata.get("corpus_record"):
        # benchmark corpora: one paragraph, one chunk (titles are what recall is measured on)
        text = f"{doc.title}\n{doc.text.strip()}"
        return [Chunk(content_id(doc.source, text), text, doc.source, doc.title, "", 0)]
    return chunk_document(doc, config.chunking.chunk_size, config.chunking.chunk_overlap)


def ingest(sources: list[str], collection: str, description: str, config: Config, *,
           force: bool = False, store: VectorStore | None = None, embedder: Embedder | None = None,
           progress: bool = True, batch_size: int = 64) -> IngestReport:
    """Ingest ``sources`` (files, folders, URLs, ``wikipedia:Title``) into ``collection``."""
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    report = IngestReport(collection)
    files = expand_sources(sources)
    if not files:
        raise IngestError(f"no sources found in {sources}: give files, folders, URLs or wikipedia:Title")

    if force:
        store.drop_collection(collection)
    existed = store.has_collection(collection)
    if existed:
        store.check_embedder(collection, embedder)
    else:
        store.create_collection(collection, description, embedder)

    chunks: list[Chunk] = []
    ids_by_source: dict[str, set[str]] = {}
    for source in tqdm(files, desc=f"read {collection}", unit="file", disable=not progress, leave=False):
        try:
            docs = load_source(source)
        except SourceError as exc:
            report.skipped.append((source, str(exc).split(": ", 1)[-1]))
            continue
        report.files_read += 1
        for doc in docs:
            doc_chunks = _chunks_for(doc, config)
            chunks.extend(doc_chunks)
            ids_by_source.setdefault(doc.source, set()).update(c.id for c in doc_chunks)
    report.chunks_total = len(chunks)

    unique = list({c.id: c for c in chunks}.values())
    present = store.existing_ids(collection, [c.id for c in unique]) if existed else set()
    # similar lengths side by side: each embedding batch pads to its longest text, so this saves work
    new = sorted((c for c in unique if c.id not in present), key=lambda c: len(c.text))
    report.chunks_present = len(unique) - len(new)
    report.chunks_cut = warn_if_cut(embedder, [c.text for c in new])

    with tqdm(total=len(new), desc=f"embed {collection}", unit="chunk", disable=not progress, leave=False) as bar:
        for start in range(0, len(new), batch_size):
            batch = new[start:start + batch_size]
            vectors = embedder.embed([c.text for c in batch])
            store.insert(collection, [c.row(v.tolist()) for c, v in zip(batch, vectors)])
            report.chunks_added += len(batch)
            bar.update(len(batch))
    if existed:  # a new collection holds no outdated chunks
        for source, ids in ids_by_source.items():
            report.chunks_removed += store.delete_other_chunks(collection, source, ids)
    store.flush(collection)
    return report


def read_manifest(path: Path = MANIFEST) -> list[dict]:
    """The described collections of a knowledge base: ``[{"name", "description", "path"}, ...]``."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise IngestError(f"cannot read the collection manifest {path}: {exc}") from exc
    return entries


def ingest_manifest(config: Config, path: Path = MANIFEST, *, force: bool = False,
                    only: list[str] | None = None, progress: bool = True) -> list[IngestReport]:
    """Ingest every collection of a manifest (paths relative to the manifest's folder)."""
    reports = []
    for entry in read_manifest(path):
        if only and entry["name"] not in only:
            continue
        folder = str(path.parent / entry["path"])
        reports.append(ingest([folder], entry["name"], entry["description"], config,
                              force=force, progress=progress))
    return reports
