"""Naive RAG, the baseline every strategy is measured against: one search of the question,
one call that reads the answer off the passages (``helpers.strategies.answer``).

``run_naive_titles`` is the baseline a reader would try next, still without a model call
before the answer: the pages *titled* by the names the question mentions (``named_pages``)
are put in front of the same search.  A comparison names both of its films; one search by
meaning may rank one of them below unrelated pages, a title lookup cannot.
"""
from __future__ import annotations

import time

from helpers.config import Config
from helpers.errors import DeepSearchLabError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.retrieval import named_pages, search
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, make_llm
from helpers.prompts import PromptSet, as_prompt_set
from helpers.results import Hit, Result, hit_summary, number_sources, traced
from helpers.strategies.answer import read_short_answer


def run_naive(question: str, config: Config, *, llm: LLM | None = None, store: VectorStore | None = None,
              embedder: Embedder | None = None, collections: list[str] | None = None,
              prompts: PromptSet | dict | None = None, title_pages: int = 0) -> Result:
    """One retrieval over every collection, one answer: the baseline to beat.  With ``title_pages``
    > 0, that many pages of each name the question mentions come first (``run_naive_titles``)."""
    started = time.perf_counter()
    llm = llm or make_llm(config)
    llm.repair_template = as_prompt_set(prompts).template("structured_repair")
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    strategy = "naive_titles" if title_pages else "naive"
    result = Result(question, strategy, usage=llm.ledger,
                    settings={"top_k": config.search.top_k, "model": config.llm.model, "mode": config.search.mode,
                              "title_pages": title_pages})
    used: list[Hit] = []
    try:
        names = [n for n in (collections or store.list_collections()) if store.info(n).count > 0]
        with traced(result.trace, llm.ledger, "retrieve", question=question, collections=names) as entry:
            mentioned, pages = named_pages(store, embedder, question, names, title_pages)
            if pages:
                entry.notes.append(f"pages titled by the names {mentioned} put first")
            hits = search(store, embedder, question, names, config.search, pages=pages)
            entry.kept = [hit_summary(h) for h in hits]
        short, used, step = read_short_answer(llm, question, hits, len(hits), prompts=prompts)
        result.trace.append(step)
        result.short_answer, result.answer = short.answer, short.explanation or short.answer
    except DeepSearchLabError as exc:  # a backend or database failure: report it in the result
        result.error = f"{type(exc).__name__}: {exc}"
    result.sources = number_sources(used, result.answer)
    result.seconds = time.perf_counter() - started
    return result


def run_naive_titles(question: str, config: Config, **kwargs) -> Result:
    """Naive RAG with the pages titled by the question's names first (``agent.pages`` each)."""
    return run_naive(question, config, title_pages=max(config.agent.pages, 1), **kwargs)
