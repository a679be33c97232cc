"""Typed errors.  Each message says what went wrong *and what to do about it*."""
from __future__ import annotations


class DeepSearchLabError(Exception):
    """Base class for every error this package raises on purpose."""


class ConfigError(DeepSearchLabError):
    """The configuration file or an override is invalid."""


class ModelNotFoundError(DeepSearchLabError):
    """A model (GGUF file, Ollama model, OpenAI model) cannot be found."""


class BackendUnreachableError(DeepSearchLabError):
    """A model server (Ollama, OpenAI-compatible) does not answer."""


class BuildMissingError(DeepSearchLabError):
    """llama-cpp-python is not installed (setup was not run)."""


class ContextOverflowError(DeepSearchLabError):
    """A prompt does not fit in the model's context window."""


class StructuredOutputError(DeepSearchLabError):
    """The model never produced valid structured output for a step.

    Carries the step name, the raw replies of every attempt and the last error,
    so a notebook can show exactly what the model said.
    """

    def __init__(self, step: str, raw_replies: list[str], last_error: str):
        self.step = step
        self.raw_replies = raw_replies
        self.last_error = last_error
        last = raw_replies[-1] if raw_replies else ""
        super().__init__(
            f"step '{step}': no valid reply after {len(raw_replies)} attempt(s); "
            f"last error: {last_error}; last raw reply: {last[:300]!r}"
        )


class BudgetExceededError(DeepSearchLabError):
    """A call would exceed the run's call or token budget."""


class VectorStoreError(DeepSearchLabError):
    """The vector database cannot be opened or used."""


class DatabaseLockedError(VectorStoreError):
    """Another process holds the Milvus Lite directory."""


class EmbeddingMismatchError(VectorStoreError):
    """A collection was built with another embedding model or dimension."""


class IngestError(DeepSearchLabError):
    """A source cannot be ingested at all (single bad files are skipped, not raised)."""


class InputError(DeepSearchLabError):
    """A question, a file or an argument given by the user cannot be used as it is."""
