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
import re
from collections.abc import Iterator

import numpy as np

from helpers.config import Config, is_server_uri
from helpers.errors import EmbeddingMismatchError, VectorStoreError
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.milvus_client import collection_errors, connect, is_damage, readable_collections
from helpers.knowledge.store import CollectionInfo
from helpers.results import Hit

# Milvus Lite's in-process gRPC server logs a traceback for calls it does not implement
# (e.g. AllocTimestamp, which pymilvus probes); they are harmless, so keep them quiet.
logging.getLogger("grpc._server").setLevel(logging.CRITICAL)

TEXT_MAX = 8192  # UTF-8 bytes of the text field
FIELD_MAX = 512  # UTF-8 bytes of the source, title and section fields
META_PROPERTY = "deepsearch.meta"  # collection property: description, embedding model, dimension
OUTPUT_FIELDS = ["text", "source", "title", "section", "chunk_index"]


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


def collection_schema(client, dimension: int) -> tuple:
    """The schema (a dense vector of ``dimension``, text with its BM25 sparse vector, the metadata fields
    within their limits) and the index parameters of every collection."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX, enable_analyzer=True)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    for field in ("source", "title", "section"):
        schema.add_field(field, DataType.VARCHAR, max_length=FIELD_MAX)
    schema.add_field("chunk_index", DataType.INT64)
    schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                 input_field_names=["text"], output_field_names=["sparse"]))
    index = client.prepare_index_params()
    index.add_index("vector", index_type="HNSW", metric_type="COSINE")
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    return schema, index


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

    def close(self) -> None:
        """Close the client and, for Milvus Lite, release the directory lock for other processes."""
        self.client.close()
        if self.is_local:
            from milvus_lite.server_manager import server_manager_instance
            server_manager_instance.release_server(self.uri)

    # collections ---------------------------------------------------------
    def list_collections(self) -> list[str]:
        """The collections; in Milvus Lite, one whose files are damaged is left out, with a warning naming it."""
        try:
            return sorted(self.client.list_collections())
        except Exception:  # Milvus Lite lists by opening every collection: one damaged one fails the list
            if not self.is_local:
                raise
        return readable_collections(self.client, self.uri)

    def has_collection(self, name: str) -> bool:
        """Whether ``name`` exists (a damaged one does, so that it can be dropped and rebuilt)."""
        try:
            return self.client.has_collection(name)
        except Exception as exc:
            if is_damage(self.is_local, name, exc):
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
            with collection_errors(self.uri, self.is_local, name, "describe"):
                properties = self.client.describe_collection(name).get("properties", {})
            try:
                self._meta_cache[name] = json.loads(properties.get(META_PROPERTY) or "{}")
            except json.JSONDecodeError:
                self._meta_cache[name] = {}
        return self._meta_cache[name]

    def info(self, name: str) -> CollectionInfo:
        meta = self._meta(name)
        with collection_errors(self.uri, self.is_local, name, "count the rows of"):
            self._ensure_loaded(name)
            count = self.client.query(name, filter="", output_fields=["count(*)"])[0]["count(*)"]
        return CollectionInfo(name, meta.get("description", ""), meta.get("embedding_model", "unknown"),
                              int(meta.get("dimension", 0)), int(count))

    def describe_all(self) -> list[CollectionInfo]:
        return [self.info(name) for name in self.list_collections()]

    def create_collection(self, name: str, description: str, embedder: Embedder) -> None:
        check_collection_name(name)
        schema, index = collection_schema(self.client, embedder.dimension)
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
        with collection_errors(self.uri, self.is_local, name, "read the ids of"):
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
        with collection_errors(self.uri, self.is_local, name, f"read {which}"):
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
        with collection_errors(self.uri, self.is_local, name, "load"):
            self._ensure_loaded(name)
        if vector is None:
            vector = embedder.embed([query])[0].tolist()
        if mode == "dense":
            with collection_errors(self.uri, self.is_local, name, "search"):
                results = self.client.search(name, data=[vector], anns_field="vector", limit=k,
                                             output_fields=OUTPUT_FIELDS, search_params={"metric_type": "COSINE"})
            return [stored_hit(name, row, row["distance"]) for row in results[0]]
        requests = [
            AnnSearchRequest(data=[vector], anns_field="vector", param={"metric_type": "COSINE"}, limit=k * 2),
            AnnSearchRequest(data=[query], anns_field="sparse", param={"metric_type": "BM25"}, limit=k * 2),
        ]
        fusion = RRFRanker(60) if ranker == "rrf" else WeightedRanker(*weights)
        with collection_errors(self.uri, self.is_local, name, "search"):
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
