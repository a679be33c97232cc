"""Drop near-duplicate search queries (and gap questions) with the embedding model.

Asking the LLM "is this query the same as one we already ran?" gives answers
whose strictness cannot be tuned.  An embedding model can: two texts whose
cosine similarity reaches a threshold (``config.agent.dedup_threshold``,
0.86 by default) count as the same.  A run makes at most a few hundred
queries, so the earlier ones are kept as a numpy matrix in memory; no vector
database is needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from helpers.knowledge.embeddings import Embedder


@dataclass
class DedupResult:
    """What ``QueryDeduper.filter`` kept, and what it dropped (with the text it resembled)."""

    kept: list[str] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)  # {"query", "similar_to", "similarity"}


class QueryDeduper:
    """Remembers texts already used and filters new ones that are too close to any of them."""

    def __init__(self, embedder: Embedder, threshold: float = 0.86):
        self.embedder = embedder
        self.threshold = threshold
        self.texts: list[str] = []
        self.vectors: np.ndarray | None = None  # one unit vector per remembered text

    def remember(self, texts: list[str], vectors: np.ndarray | None = None) -> None:
        """Add texts to the history (embedding them unless ``vectors`` are given)."""
        if not texts:
            return
        vectors = self.embedder.embed(texts) if vectors is None else vectors
        self.texts.extend(texts)
        self.vectors = vectors if self.vectors is None else np.vstack([self.vectors, vectors])

    def filter(self, candidates: list[str], remember: bool = True) -> DedupResult:
        """Keep the candidates that are not near-duplicates of the history or of each other.

        With ``remember=True`` the kept candidates join the history.
        """
        result = DedupResult()
        texts = [" ".join(c.split()) for c in candidates if c and c.strip()]
        if not texts:
            return result
        new_vectors = self.embedder.embed(texts)
        pool_texts = list(self.texts)
        pool = self.vectors if self.vectors is not None else np.zeros((0, new_vectors.shape[1]), np.float32)
        kept_vectors = []
        for text, vector in zip(texts, new_vectors):
            if len(pool_texts):
                similarities = pool @ vector
                nearest = int(np.argmax(similarities))
                if similarities[nearest] >= self.threshold:
                    result.dropped.append({"query": text, "similar_to": pool_texts[nearest],
                                           "similarity": round(float(similarities[nearest]), 3)})
                    continue
            result.kept.append(text)
            kept_vectors.append(vector)
            pool_texts.append(text)
            pool = np.vstack([pool, vector[None, :]])
        if remember and result.kept:
            self.remember(result.kept, np.asarray(kept_vectors))
        return result
