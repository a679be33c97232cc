"""DeepSearch Lab helpers: the code the notebooks, the CLI and the tests import.

Layers, lowest first; a module imports only from its own layer or lower ones
(``tests/test_layers.py`` checks it):

1. ``config``, ``errors``, ``files``, ``prompts``, ``answer_text``, ``values``: settings, typed errors, atomic
   file writes, prompt files, how short answers are normalised, dates as values
2. ``models/``: one file per chat backend, the client over them (``llm``), structured output, model files,
   usage ledger
3. ``results``: the records every strategy shares (``Hit``, ``Source``, ``TraceStep``, ``Result``)
4. ``knowledge/``: loaders, chunking, embeddings, the vector store, ingest, retrieval
5. ``strategies/``: naive RAG, the pipeline (each step in its own module: decompose, route,
   retrieve, relevance, reflect, synthesize), chain search (plan, hops, answer, family relations),
   the agent (loop, choice of action, actions, memory), the answer step, reports
6. ``evaluation/``: the harness, answer scores (EM/F1), summaries, the oracle reader, the prompt A/B, plots
7. ``lab/``: notebook tooling
8. ``cli``, ``demo``, ``__main__``: entry points
"""
from helpers.config import Config, load_config
from helpers.errors import DeepSearchLabError, StructuredOutputError
from helpers.models.llm import LLM, Budget, make_llm
from helpers.models.usage import UsageLedger

__all__ = ["Budget", "Config", "DeepSearchLabError", "LLM", "StructuredOutputError",
           "UsageLedger", "load_config", "make_llm"]
