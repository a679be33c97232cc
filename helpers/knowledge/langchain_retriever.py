"""Our described Milvus collections as a LangChain retriever, so an LCEL chain
(``retriever | format | prompt | chat model``) can use the same search as the strategies.

The search itself stays ours (``search_collections``: one query embedding, every
collection searched, hits merged by cosine similarity), because the notebooks teach
what it does; LangChain gets ``Document`` objects whose metadata keeps everything a
``Hit`` carries, so the sources a chain shows can be compared with ours.
"""
from __future__ import annotations

from typing import Any

from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from helpers.knowledge.retrieval import search_collections
from helpers.results import Hit


def hit_to_document(hit: Hit) -> LCDocument:
    """A hit as a LangChain document: its text, and its id, source, title, section and scores as metadata."""
    return LCDocument(page_content=hit.text, id=hit.id,
                      metadata={"id": hit.id, "collection": hit.collection, "source": hit.source, "title": hit.title,
                                "section": hit.section, "chunk_index": hit.chunk_index, "score": hit.score,
                                "similarity": hit.similarity})


def document_to_hit(document: LCDocument) -> Hit:
    """A document from ``LabRetriever`` as the hit it was made from (``hit_to_document`` undone)."""
    meta = document.metadata
    return Hit(meta["id"], document.page_content, meta["score"], meta["collection"], meta["source"], meta["title"],
               meta["section"], meta["chunk_index"], meta["similarity"])


class LabRetriever(BaseRetriever):
    """Top-``k`` chunks over ``collections`` (all of the store's by default), best first."""

    store: Any
    embedder: Any
    collections: list[str] | None = None
    k: int = 5
    mode: str = "dense"
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[LCDocument]:
        names = self.collections or self.store.list_collections()
        hits = search_collections(self.store, self.embedder, query, names, k=self.k, mode=self.mode)
        return [hit_to_document(hit) for hit in hits[: self.k]]
