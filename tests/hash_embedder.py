"""A fast stand-in embedder for tests about storage, not meaning (also used by the kill -9 child)."""
from __future__ import annotations

import hashlib

import numpy as np

from helpers.knowledge.embeddings import Embedder


class HashEmbedder(Embedder):
    """A vector from the text's hash; counts the texts it embedded."""
    name, dimension = "test-hash", 16

    def __init__(self):
        self.embedded = 0

    def embed(self, texts):
        self.embedded += len(texts)
        vectors = np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8)
                            for t in texts], dtype=np.float32) + 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
