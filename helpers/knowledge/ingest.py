"""Ingestion: sources -> documents -> chunks -> embeddings -> a described collection.

* Idempotent: chunk ids are content hashes, rows already present are skipped,
  and rows are inserted batch by batch, so an interrupted ingest resumes.
* Exact: afterwards the collection holds what the given files and folders hold now.
  Chunks an edited file no longer produces are deleted, and so are the chunks of
  files deleted or no longer readable (``keep_removed=True`` keeps those), at any
  size (every row is read page by page).
* ``force=True`` drops and rebuilds the collection.
* Besides paths, URLs and ``wikipedia:Title``, a source may be any LangChain document
  loader (``PyPDFLoader(path)``, ``WebBaseLoader(url)``, ...): its documents are chunked,
  embedded and stored like ours, under the ``source`` their metadata names.
* One bad file never aborts the rest: an unreadable one (missing, binary, empty,
  undecodable, a named pipe) is skipped, and a batch Milvus refuses is retried
  source by source, so only the refused source is left out (whole, never half
  stored).  The report says what was added, removed and skipped, and why.
* An ingest that stores nothing raises ``IngestError`` and leaves no new, empty collection.
* The collection is flushed at the end, so searches use the index.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from helpers.config import PROJECT_ROOT, Config
from helpers.errors import IngestError, VectorStoreError
from helpers.knowledge.chunking import Chunk, chunk_document, chunk_record
from helpers.knowledge.embeddings import Embedder, get_embedder, warn_if_cut
from helpers.knowledge.loaders import (Document, SourceError, display_path, expand_sources, is_web, load_source,
                                       load_with_langchain, loader_name)
from helpers.knowledge.vectorstore import MilvusStore, check_collection_name, open_store, stored_source

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
    sources_removed: list[str] = field(default_factory=list)  # no longer in the folders, or unreadable
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)

    def summary(self) -> str:
        lines = [f"{self.collection}: {self.files_read} source(s) read, {self.chunks_total} chunks, "
                 f"{self.chunks_added} added, {self.chunks_present} already present"
                 + (f", {self.chunks_removed} outdated removed" if self.chunks_removed else "")]
        if self.chunks_cut:
            lines.append(f"  {self.chunks_cut} chunk(s) longer than the embedding window (cut when embedded)")
        if self.sources_removed:
            more = f" and {len(self.sources_removed) - 5} more" if len(self.sources_removed) > 5 else ""
            lines.append(f"  removed the chunks of {len(self.sources_removed)} source(s) no longer there or "
                         f"unreadable: {', '.join(self.sources_removed[:5])}{more}")
        for source, reason in self.skipped:
            lines.append(f"  skipped {source}: {reason}")
        return "\n".join(lines)


def _chunks_for(doc: Document, config: Config) -> list[Chunk]:
    if doc.metadata.get("corpus_record"):
        return chunk_record(doc)
    return chunk_document(doc, config.chunking.chunk_size, config.chunking.chunk_overlap)


def _read(files: list, config: Config, report: IngestReport, progress: bool) -> dict[str, list[Chunk]]:
    """The chunks of every readable source (a path or URL, or a LangChain loader), by source;
    unreadable ones go to ``report.skipped``."""
    chunks: dict[str, list[Chunk]] = {}
    for source in tqdm(files, desc=f"read {report.collection}", unit="file", disable=not progress, leave=False):
        is_path = isinstance(source, str)
        try:
            docs = load_source(source) if is_path else load_with_langchain(source)
        except SourceError as exc:
            report.skipped.append((source if is_path else loader_name(source), str(exc).split(": ", 1)[-1]))
            continue
        report.files_read += 1
        for doc in docs:
            chunks.setdefault(doc.source, []).extend(_chunks_for(doc, config))
    return {source: doc_chunks for source, doc_chunks in chunks.items() if doc_chunks}


def _nothing_ingested(report: IngestReport) -> str:
    reasons = "; ".join(f"{source}: {reason}" for source, reason in report.skipped[:5]) or "they hold no text"
    more = f" (and {len(report.skipped) - 5} more)" if len(report.skipped) > 5 else ""
    return (f"nothing was ingested into '{report.collection}': {reasons}{more}. "
            "Fix these sources or give other files, folders, URLs or wikipedia:Title.")


def _local_scope(sources: list[str], files: list[str]) -> Callable[[str], bool]:
    """Whether a stored source name belongs to the local files and folders given (a folder: any
    file below it; a JSON corpus: its ``path#title`` records, and those stored before the path was
    recorded, as ``name.json#title``).  Web sources never do."""
    exact, prefixes = set(), []
    for source in (s for s in [*sources, *files] if not is_web(s)):
        path = Path(source)
        if path.is_dir():
            prefixes.append(display_path(path).rstrip("/") + "/")
        else:
            exact.add(stored_source(display_path(path)))
            if path.suffix.lower() == ".json":
                prefixes += [f"{display_path(path)}#", f"{path.name}#"]
    return lambda name: name in exact or name.startswith(tuple(prefixes))


def _embed_and_insert(store: MilvusStore, collection: str, embedder: Embedder, chunks: list[Chunk],
                      batch_size: int, progress: bool) -> tuple[Counter[str], dict[str, str]]:
    """Embed and insert ``chunks`` batch by batch.  A batch Milvus refuses is retried source by
    source, and a source refused is left out from then on; returns the rows added per source
    and, for each refused source, why."""
    added: Counter[str] = Counter()
    refused: dict[str, str] = {}
    with tqdm(total=len(chunks), desc=f"embed {collection}", unit="chunk", disable=not progress, leave=False) as bar:
        for start in range(0, len(chunks), batch_size):
            bar.update(min(batch_size, len(chunks) - start))
            batch = [c for c in chunks[start:start + batch_size] if c.source not in refused]
            if not batch:
                continue
            groups: dict[str, list[dict]] = {}
            for chunk, vector in zip(batch, embedder.embed([c.text for c in batch])):
                groups.setdefault(chunk.source, []).append(chunk.row(vector.tolist()))
            try:
                store.insert(collection, [row for group in groups.values() for row in group])
            except VectorStoreError:
                for source, group in groups.items():
                    try:
                        store.insert(collection, group)
                    except VectorStoreError as exc:
                        refused[source] = str(exc)
            added.update({source: len(group) for source, group in groups.items() if source not in refused})
    return added, refused


def _remove_outdated(store: MilvusStore, collection: str, kept: dict[str, set[str]],
                     gone: Callable[[str], bool]) -> tuple[int, list[str]]:
    """Delete the rows of each kept source (by stored name) that it no longer produces, and every
    row of a source ``gone`` names; returns the rows deleted and the sources removed."""
    current = set().union(*kept.values())
    stale, removed = [], set()
    for row in store.rows(collection, ["id", "source"]):
        if row["id"] in current:
            continue
        if row["source"] in kept:
            stale.append(row["id"])
        elif gone(row["source"]):
            stale.append(row["id"])
            removed.add(row["source"])
    store.delete_ids(collection, stale)
    return len(stale), sorted(removed)


def ingest(sources: list, collection: str, description: str, config: Config, *,
           force: bool = False, keep_removed: bool = False, store: MilvusStore | None = None,
           embedder: Embedder | None = None, progress: bool = True, batch_size: int = 64) -> IngestReport:
    """Ingest ``sources`` (files, folders, URLs, ``wikipedia:Title``, LangChain document loaders)
    into ``collection``.

    Chunks of files deleted from the given folders, or no longer readable, are removed unless
    ``keep_removed``.  Raises ``IngestError`` when nothing at all can be ingested."""
    check_collection_name(collection)  # before any file is read
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    report = IngestReport(collection)
    paths = [s for s in sources if isinstance(s, str)]
    expanded = expand_sources(paths)
    files = expanded + [s for s in sources if not isinstance(s, str)]  # LangChain loaders are read as they are
    if not files:
        raise IngestError(f"no sources found in {sources}: give files, folders, URLs or wikipedia:Title")
    chunks_by_source = _read(files, config, report, progress)
    if not chunks_by_source:
        raise IngestError(_nothing_ingested(report))

    if force:
        store.drop_collection(collection)
    existed = store.has_collection(collection)
    if existed:
        store.check_embedder(collection, embedder)
    else:
        store.create_collection(collection, description, embedder)

    unique = {c.id: c for chunks in chunks_by_source.values() for c in chunks}
    report.chunks_total = len(unique)
    present = store.existing_ids(collection, list(unique)) if existed else set()
    # similar lengths side by side: each embedding batch pads to its longest text, so this saves work
    new = sorted((c for c in unique.values() if c.id not in present), key=lambda c: len(c.text))
    report.chunks_present = len(unique) - len(new)
    report.chunks_cut = warn_if_cut(embedder, [c.text for c in new])
    added, refused = _embed_and_insert(store, collection, embedder, new, batch_size, progress)
    report.skipped += [(source, f"not stored: {reason}") for source, reason in refused.items()]
    report.chunks_added = sum(n for source, n in added.items() if source not in refused)
    kept = {stored_source(source): {c.id for c in chunks}
            for source, chunks in chunks_by_source.items() if source not in refused}

    if existed or refused:
        left_out = {stored_source(source) for source in refused}
        in_scope = _local_scope(paths, expanded) if kept and not keep_removed else (lambda name: False)
        report.chunks_removed, removed = _remove_outdated(
            store, collection, kept, lambda name: name in left_out or in_scope(name))
        report.sources_removed = [name for name in removed if name not in left_out]
    if not kept:
        if not existed:
            store.drop_collection(collection)
        raise IngestError(_nothing_ingested(report))
    store.flush(collection)
    return report


def read_manifest(path: Path = MANIFEST) -> list[dict]:
    """The described collections of a knowledge base: ``[{"name", "description", "path"}, ...]``."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise IngestError(f"cannot read the collection manifest {path}: {exc}") from exc
    return entries


def ingest_manifest(config: Config, path: Path = MANIFEST, *, force: bool = False, keep_removed: bool = False,
                    only: list[str] | None = None, progress: bool = True) -> list[IngestReport]:
    """Ingest every collection of a manifest (paths relative to the manifest's folder)."""
    reports = []
    for entry in read_manifest(path):
        if only and entry["name"] not in only:
            continue
        folder = str(path.parent / entry["path"])
        reports.append(ingest([folder], entry["name"], entry["description"], config,
                              force=force, keep_removed=keep_removed, progress=progress))
    return reports
