"""Described Milvus collections: create, insert, search (dense or hybrid), inspect.

The default store is Milvus Lite, a directory under ``data/``; ``MILVUS_URI``
(``http://host:port``) points the same code at a Milvus server.  Each
collection records, in its description, what it holds (read by the router)
and which embedding model and dimension built it; using it with another model
is refused with a message naming both.

Every row has a dense vector and a BM25 sparse vector computed by Milvus from
the text, so dense and hybrid search work on the same collection.

Field limits (``TEXT_MAX``, ``FIELD_MAX``) are enforced before insert (``clip``,
``stored_source``), filters quote any string safely (``source_filter``), and
reads of many rows go page by page (``rows``), so no result is silently cut.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from helpers.config import Config, is_server_uri
from helpers.errors import DatabaseLockedError, EmbeddingMismatchError, VectorStoreError
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.store import CollectionInfo
from helpers.results import Hit

# Milvus Lite's in-process gRPC server logs a traceback for calls it does not implement
# (e.g. AllocTimestamp, which pymilvus probes); they are harmless, so keep them quiet.
logging.getLogger("grpc._server").setLevel(logging.CRITICAL)

TEXT_MAX = 8192  # UTF-8 bytes of the text field
FIELD_MAX = 512  # UTF-8 bytes of the source, title and section fields
META_PROPERTY = "deepsearch.meta"  # collection property: description, embedding model, dimension
OUTPUT_FIELDS = ["text", "source", "title", "section", "chunk_index"]
_LOCAL_GRPC = {"grpc.keepalive_time_ms": 2**31 - 1, "grpc.keepalive_permit_without_calls": False}


def lock_holders(path: Path) -> list[str]:
    """PIDs (and command lines) of other processes with files open under ``path``."""
    holders = []
    for proc in Path("/proc").glob("[0-9]*"):
        if proc.name == str(os.getpid()):
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if str(os.readlink(fd)).startswith(str(path)):
                    cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                    holders.append(f"pid {proc.name} ({cmd[:80]})")
                    break
        except OSError:
            continue
    return holders


def clip(value: str, limit: int = FIELD_MAX) -> str:
    """``value`` cut to at most ``limit`` UTF-8 bytes, never inside a character."""
    data = value.encode()
    return value if len(data) <= limit else data[:limit].decode(errors="ignore")


def stored_source(source: str) -> str:
    """How ``source`` is stored in the source field, and matched by filters: itself when it
    fits, else a prefix, "…" and a hash of the whole (stable, unique, and fits itself)."""
    if len(source.encode()) <= FIELD_MAX:
        return source
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return clip(source, FIELD_MAX - len(digest) - 3) + "…" + digest


def milvus_string(value: str) -> str:
    """``value`` as a Milvus filter string literal.  Only backslash, double quote and line breaks
    are escaped; other characters stay raw (Milvus rejects the ``\\uXXXX`` escapes json.dumps writes)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def source_filter(source: str) -> str:
    """The Milvus filter selecting the rows of ``source`` (any string: accents, dashes, quotes, long paths)."""
    return f"source == {milvus_string(stored_source(source))}"


def title_filter(titles: list[str]) -> str:
    """The Milvus filter selecting the rows whose title is one of ``titles`` (as stored)."""
    return f"title in [{', '.join(milvus_string(t) for t in titles)}]"


_COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


def check_collection_name(name: str) -> None:
    """Refuse a collection name Milvus would reject: it must start with a letter or an underscore
    and hold only letters, digits and underscores, at most 255 characters."""
    if not _COLLECTION_NAME.fullmatch(name):
        raise VectorStoreError(
            f"collection name {name[:80]!r}{'…' if len(name) > 80 else ''} is not allowed: Milvus names start with "
            "a letter or an underscore and hold only letters, digits and underscores (at most 255), "
            "e.g. 'simpsons_characters'.")


def check_local_path(path: Path) -> None:
    """Refuse a Milvus Lite path that cannot hold a database, saying what to do."""
    fix = "Set DSL_MILVUS_URI (or vector_db.uri) to a path such as data/milvus/deepsearch.db."
    if not path.name.endswith(".db"):
        raise VectorStoreError(f"the Milvus Lite path {path} must end in .db (Milvus Lite creates a directory "
                               f"of that name). {fix}")
    resolved = path.resolve()
    if len(resolved.parts) > 1 and resolved.parts[1] in ("proc", "sys", "dev"):
        raise VectorStoreError(f"the Milvus Lite path {path} is under /{resolved.parts[1]}, a system file system "
                               f"where no database can be stored. {fix}")
    if resolved.exists() and not resolved.is_dir():
        raise VectorStoreError(f"the Milvus Lite path {path} is an existing file, not a database directory: "
                               f"move that file away or choose another path. {fix}")


def connect(uri: str, token: str, is_local: bool):
    """A ``MilvusClient`` for ``uri`` (a Milvus Lite directory, created if needed, or a server); a
    locked or unreachable database says what to do."""
    from pymilvus import MilvusClient

    if is_local:
        check_local_path(Path(uri))
        try:
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VectorStoreError(f"cannot create the folder of the Milvus Lite database {uri}: {exc}. "
                                   "Choose a writable path with DSL_MILVUS_URI (or vector_db.uri).") from exc
    try:
        # the client pings every 10 s by default, which the embedded server refuses
        # ("too_many_pings" lines on stderr mid-run); a local server needs no keepalive
        options = {"grpc_options": _LOCAL_GRPC} if is_local else {}
        return MilvusClient(uri=uri, token=token, **options)
    except Exception as exc:  # pymilvus wraps the cause in several exception types
        text = str(exc)
        holders = lock_holders(Path(uri).resolve()) if is_local else []
        if holders or "lock" in text.lower():
            holders = ", ".join(holders) or "another process"
            raise DatabaseLockedError(
                f"the Milvus Lite database {uri} is locked by {holders}. Milvus Lite allows one "
                "process per directory: close the other notebook kernel or program, use another "
                "path (vector_db.uri / MILVUS_URI), or share it through server mode "
                f"(`milvus-lite server --data-dir {uri} --port 19530`, then "
                "MILVUS_URI=http://127.0.0.1:19530).") from exc
        fix = ("Start the Milvus server at that address, or unset MILVUS_URI to use the Milvus Lite directory "
               "(vector_db.uri)" if not is_local else "Check the path, or choose another with DSL_MILVUS_URI")
        raise VectorStoreError(f"cannot open the vector database at {uri}: {text}. {fix}") from exc


class MilvusStore:
    """A Milvus (Lite or server) database holding described collections (implements
    ``helpers.knowledge.store.VectorStore``, plus the writes ingest needs).

    ``page_size`` is how many rows one call reads when a read may return many (``rows``)."""

    def __init__(self, uri: str, token: str = "", page_size: int = 1000):
        # Milvus Lite gives query iterators no server timestamp: pymilvus warns, then uses its own
        # clock (fine).  Set here, as importing pymilvus resets its loggers' levels.
        logging.getLogger("pymilvus.client.iterator.query_iterator").setLevel(logging.ERROR)
        self.is_local = not is_server_uri(uri)
        self.uri = uri
        self.page_size = page_size
        self._loaded: set[str] = set()
        self._meta_cache: dict[str, dict] = {}
        self._titles: dict[str, list[str]] = {}
        self.client = connect(uri, token, self.is_local)
        if self.is_local:  # a damaged collection's files: Milvus Lite logs tracebacks; our errors name it
            for name in ("milvus_lite.adapter.grpc.servicer", "pymilvus.decorators"):
                logging.getLogger(name).setLevel(logging.CRITICAL)

    def close(self) -> None:
        """Close the client and, for Milvus Lite, release the directory lock for other processes."""
        self.client.close()
        if self.is_local:
            from milvus_lite.server_manager import server_manager_instance
            server_manager_instance.release_server(self.uri)

    # collections ---------------------------------------------------------
    def _is_damage(self, name: str, exc: Exception) -> bool:
        """Whether ``exc`` is a file of collection ``name`` that Milvus Lite cannot read (truncated, damaged)."""
        return self.is_local and f"{os.sep}collections{os.sep}{name}{os.sep}" in str(exc)

    def _damaged(self, name: str, exc: Exception) -> VectorStoreError:
        reason = str(getattr(exc, "message", "") or exc).split(": ", 1)[-1][:200]
        return VectorStoreError(
            f"collection '{name}' of the Milvus Lite database {self.uri} is damaged ({reason}); the other "
            f"collections stay usable. Rebuild it: `python -m helpers ingest --collection {name} --force` (a "
            f"knowledge-base collection) or `python -m helpers ingest SOURCES --collection {name} --force`.")

    @contextmanager
    def _using(self, name: str, doing: str) -> Iterator[None]:
        """Library errors while ``doing`` something to collection ``name`` as the project's, a damaged one named."""
        try:
            yield
        except VectorStoreError:
            raise
        except Exception as exc:  # pymilvus raises several types (MilvusException, ParamError, ...)
            if self._is_damage(name, exc):
                raise self._damaged(name, exc) from exc
            raise VectorStoreError(f"cannot {doing} collection '{name}': {exc}") from exc

    def list_collections(self) -> list[str]:
        """The collections; in Milvus Lite, one whose files are damaged is left out, with a warning naming it."""
        try:
            return sorted(self.client.list_collections())
        except Exception:  # Milvus Lite lists by opening every collection: one damaged one fails the list
            if not self.is_local:
                raise
        names = []
        for folder in sorted((Path(self.uri) / "collections").iterdir()):
            try:
                self.client.has_collection(folder.name)
                names.append(folder.name)
            except Exception as exc:  # noqa: BLE001 - damaged: said, and the others are used
                warnings.warn(str(self._damaged(folder.name, exc)), stacklevel=2)
        return names

    def has_collection(self, name: str) -> bool:
        """Whether ``name`` exists (a damaged one does, so that it can be dropped and rebuilt)."""
        try:
            return self.client.has_collection(name)
        except Exception as exc:
            if self._is_damage(name, exc):
                return True
            raise VectorStoreError(f"cannot check collection '{name}': {exc}") from exc

    def _ensure_loaded(self, name: str) -> None:
        """A collection reopened from disk starts 'released': load it once per process."""
        if name not in self._loaded:
            self.client.load_collection(name)
            self._loaded.add(name)

    def _meta(self, name: str) -> dict:
        """The collection's recorded description, embedding model and dimension (read once, then cached)."""
        if name not in self._meta_cache:
            if not self.has_collection(name):
                raise VectorStoreError(f"collection '{name}' does not exist; known: "
                                       f"{', '.join(self.list_collections()) or 'none'}. Ingest it first.")
            with self._using(name, "describe"):
                properties = self.client.describe_collection(name).get("properties", {})
            try:
                self._meta_cache[name] = json.loads(properties.get(META_PROPERTY) or "{}")
            except json.JSONDecodeError:
                self._meta_cache[name] = {}
        return self._meta_cache[name]

    def info(self, name: str) -> CollectionInfo:
        meta = self._meta(name)
        with self._using(name, "count the rows of"):
            self._ensure_loaded(name)
            count = self.client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
        return CollectionInfo(name, meta.get("description", ""), meta.get("embedding_model", "unknown"),
                              int(meta.get("dimension", 0)), int(count))

    def describe_all(self) -> list[CollectionInfo]:
        return [self.info(name) for name in self.list_collections()]

    def create_collection(self, name: str, description: str, embedder: Embedder) -> None:
        from pymilvus import DataType, Function, FunctionType

        check_collection_name(name)

        schema = self.client.create_schema(auto_id=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=embedder.dimension)
        schema.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX, enable_analyzer=True)
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        for field in ("source", "title", "section"):
            schema.add_field(field, DataType.VARCHAR, max_length=FIELD_MAX)
        schema.add_field("chunk_index", DataType.INT64)
        schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                     input_field_names=["text"], output_field_names=["sparse"]))
        index = self.client.prepare_index_params()
        index.add_index("vector", index_type="HNSW", metric_type="COSINE")
        index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        meta = {"description": description, "embedding_model": embedder.name, "dimension": embedder.dimension}
        self.client.create_collection(name, schema=schema, index_params=index,
                                      properties={META_PROPERTY: json.dumps(meta)})
        self._meta_cache[name] = meta

    def drop_collection(self, name: str) -> None:
        if self.has_collection(name):
            self.client.drop_collection(name)
        self._loaded.discard(name)
        self._meta_cache.pop(name, None)
        self._titles.pop(name, None)

    def titles(self, name: str) -> list[str]:
        """The distinct document titles of a collection (read once, then cached until it changes)."""
        if name not in self._titles:
            self._titles[name] = list(dict.fromkeys(row["title"] for row in self.rows(name, ["title"])))
        return self._titles[name]

    def check_embedder(self, name: str, embedder: Embedder) -> None:
        """Refuse to mix embedding models in one collection."""
        meta = self._meta(name)
        model, dimension = meta.get("embedding_model", "unknown"), int(meta.get("dimension", 0))
        if (model, dimension) != (embedder.name, embedder.dimension):
            raise EmbeddingMismatchError(
                f"collection '{name}' was built with embedding model '{model}' "
                f"({dimension} dimensions) but the configured model is '{embedder.name}' "
                f"({embedder.dimension} dimensions). Set embedding.model back to '{model}', "
                f"or rebuild the collection: `python -m helpers ingest ... --collection {name} --force`.")

    # rows ------------------------------------------------------------------
    def existing_ids(self, name: str, ids: list[str]) -> set[str]:
        found: set[str] = set()
        with self._using(name, "read the ids of"):
            self._ensure_loaded(name)
            for start in range(0, len(ids), 500):
                batch = ids[start:start + 500]
                found.update(row["id"] for row in self.client.get(name, ids=batch, output_fields=["id"]))
        return found

    def insert(self, name: str, rows: list[dict]) -> None:
        """Insert rows (``Chunk.row`` builds them within the field limits); raises ``VectorStoreError``."""
        if not rows:
            return
        self._titles.pop(name, None)
        try:
            self.client.insert(name, rows)
        except Exception as exc:  # pymilvus raises several types (MilvusException, ParamError, ...)
            raise VectorStoreError(f"Milvus refused {len(rows)} row(s) for collection '{name}': {exc}") from exc

    def rows(self, name: str, fields: list[str], source: str | None = None, where: str = "") -> Iterator[dict]:
        """Every row of ``name`` (or only those of ``source``, or those passing the filter ``where``),
        read ``page_size`` rows per call."""
        which = f"the rows of source {source!r} of" if source is not None else "the rows of"
        with self._using(name, f"read {which}"):
            self._ensure_loaded(name)
            pages = self.client.query_iterator(name, batch_size=self.page_size, output_fields=fields,
                                               filter=source_filter(source) if source is not None else where)
            try:
                while page := pages.next():
                    yield from page
            finally:
                pages.close()

    def delete_ids(self, name: str, ids: list[str]) -> None:
        """Delete rows by id (in pages of ``page_size``)."""
        self._titles.pop(name, None)
        for start in range(0, len(ids), self.page_size):
            self.client.delete(name, ids=ids[start:start + self.page_size])

    def flush(self, name: str) -> None:
        """Seal new rows so searches use the index (un-flushed rows are searched brute force)."""
        self.client.flush(name)

    def source_chunks(self, name: str, source: str) -> list[Hit]:
        """All chunks of one source document, in order (the agent's 'visit'); ``source`` may be
        the full name or the stored form a hit carries."""
        hits = [stored_hit(name, row, 1.0) for row in self.rows(name, ["id", *OUTPUT_FIELDS], source)]
        return sorted(hits, key=lambda h: h.chunk_index)

    def titled_chunks(self, name: str, titles: list[str], vector: list[float]) -> list[Hit]:
        """Every chunk of the documents titled ``titles``, most similar to ``vector`` first.

        Read by filter and ranked here: a vector search with so narrow a filter can come back
        empty (the index's graph walk rarely meets the few rows that pass)."""
        rows = list(self.rows(name, ["id", *OUTPUT_FIELDS, "vector"], where=title_filter(titles)))
        query = _unit(vector)
        hits = [stored_hit(name, row, float(query @ _unit(row["vector"]))) for row in rows]
        return sorted(hits, key=lambda h: h.score, reverse=True)

    # search ----------------------------------------------------------------
    def search(self, name: str, query: str, embedder: Embedder, k: int = 5, mode: str = "dense",
               ranker: str = "rrf", weights: tuple[float, float] = (0.7, 0.3),
               vector: list[float] | None = None) -> list[Hit]:
        """Top-k chunks for ``query``: dense (cosine) or hybrid (dense + BM25, fused).

        ``vector`` is the query's embedding when the caller already has it.  Hybrid hits
        keep the fused score as ``score`` and carry their cosine ``similarity`` too, so
        thresholds and merging across collections stay on one scale."""
        from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

        self.check_embedder(name, embedder)
        with self._using(name, "load"):
            self._ensure_loaded(name)
        if vector is None:
            vector = embedder.embed([query])[0].tolist()
        if mode == "dense":
            with self._using(name, "search"):
                results = self.client.search(name, data=[vector], anns_field="vector", limit=k,
                                             output_fields=OUTPUT_FIELDS, search_params={"metric_type": "COSINE"})
            return [stored_hit(name, row, row["distance"]) for row in results[0]]
        requests = [
            AnnSearchRequest(data=[vector], anns_field="vector", param={"metric_type": "COSINE"}, limit=k * 2),
            AnnSearchRequest(data=[query], anns_field="sparse", param={"metric_type": "BM25"}, limit=k * 2),
        ]
        fusion = RRFRanker(60) if ranker == "rrf" else WeightedRanker(*weights)
        with self._using(name, "search"):
            results = self.client.hybrid_search(name, requests, fusion, limit=k,
                                                output_fields=[*OUTPUT_FIELDS, "vector"])
        query_unit = _unit(vector)
        return [stored_hit(name, row, row["distance"], float(query_unit @ _unit(row["entity"]["vector"])))
                for row in results[0]]


def stored_hit(collection: str, row: dict, score: float, similarity: float | None = None) -> Hit:
    """A stored row (or a search result's entity) as a ``Hit``."""
    entity = row.get("entity", row)
    return Hit(str(row.get("id", entity.get("id"))), entity["text"], float(score), collection,
               entity["source"], entity["title"], entity["section"], int(entity["chunk_index"]), similarity)


def _unit(vector) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / (np.linalg.norm(array) or 1.0)


_STORES: dict[str, MilvusStore] = {}


def open_store(config: Config) -> MilvusStore:
    """The vector store for ``config.vector_db``, opened once per process (Milvus Lite locks per process)."""
    uri = config.vector_db.uri
    if not is_server_uri(uri):
        uri = str(config.resolve_path(uri))
    if uri not in _STORES:
        _STORES[uri] = MilvusStore(uri, config.vector_db.token)
    return _STORES[uri]


def close_store(config: Config) -> None:
    """Close and forget the store for ``config`` (releases the Milvus Lite lock)."""
    for uri, store in list(_STORES.items()):
        if uri in (config.vector_db.uri, str(config.resolve_path(config.vector_db.uri))):
            store.close()
            del _STORES[uri]
