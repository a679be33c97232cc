"""What the strategies need from a knowledge store: the ``VectorStore`` protocol.

Searching code (retrieval, the pipeline, the chain, the agent) depends on this
interface only; ``helpers.knowledge.vectorstore.MilvusStore`` implements it (and the
writes that ingest needs), and a test can pass any object with these methods.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from helpers.knowledge.embeddings import Embedder
from helpers.results import Hit


@dataclass
class CollectionInfo:
    name: str
    description: str
    embedding_model: str
    dimension: int
    count: int


@runtime_checkable
class VectorStore(Protocol):
    """Described collections of chunks that can be searched and read."""

    def list_collections(self) -> list[str]:
        """The collection names."""

    def info(self, name: str) -> CollectionInfo:
        """A collection's description (read by the router), embedding model and size."""

    def search(self, name: str, query: str, embedder: Embedder, k: int = 5, mode: str = "dense",
               ranker: str = "rrf", vector: list[float] | None = None) -> list[Hit]:
        """The top-k chunks of ``name`` for ``query``, best first (dense or hybrid)."""

    def source_chunks(self, name: str, source: str) -> list[Hit]:
        """Every chunk of one source document, in order."""

    def titles(self, name: str) -> list[str]:
        """The distinct document titles of a collection."""

    def titled_chunks(self, name: str, titles: list[str], vector: list[float]) -> list[Hit]:
        """Every chunk of the documents titled ``titles``, most similar to ``vector`` first."""
