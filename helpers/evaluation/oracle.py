"""The oracle reader: the answer step every strategy shares, given the gold passages.

It answers the question "how well does our reader do when retrieval is perfect?", so the
error of each strategy splits in two: the points a strategy loses below the oracle's EM
were lost by its search; the points the oracle itself loses were lost by the reader (the
model, the prompt, the answer's form).  It bounds the strategies that answer in one call
(naive, pipeline, agent); the chain reads one simple question per hop and can pass it.  It
needs the gold titles, so it is for evaluation only, never a strategy a user can pick.
"""
from __future__ import annotations

import time

from helpers.config import Config
from helpers.errors import DeepSearchLabError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, make_llm
from helpers.prompts import PromptSet, as_prompt_set
from helpers.results import Result, hit_summary, number_sources, traced
from helpers.strategies.answer import read_short_answer

ORACLE = "oracle"


def run_oracle(question: str, gold_titles: list[str], config: Config, *, llm: LLM | None = None,
               store: VectorStore | None = None, embedder: Embedder | None = None,
               prompts: PromptSet | dict | None = None) -> Result:
    """Every chunk of each gold page (in page order, gold pages in the order given), then one
    answer call (``read_short_answer``), as naive RAG makes it."""
    started = time.perf_counter()
    llm = llm or make_llm(config)
    llm.repair_template = as_prompt_set(prompts).template("structured_repair")
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    result = Result(question, ORACLE, usage=llm.ledger, settings={"model": config.llm.model, "gold": gold_titles})
    used = []
    try:
        with traced(result.trace, None, "retrieve", question=question, gold=gold_titles) as entry:
            vector = embedder.embed([question])[0].tolist()
            pages = []
            for name in (n for n in store.list_collections() if store.info(n).count > 0):
                for title in gold_titles:
                    chunks = store.titled_chunks(name, [title], vector)
                    pages += sorted(chunks, key=lambda h: h.chunk_index)
            entry.kept = [hit_summary(h) for h in pages]
            if len({h.title for h in pages}) < len(set(gold_titles)):
                entry.notes.append("some gold titles are not in the store")
        short, used, step = read_short_answer(llm, question, pages, len(pages), prompts=prompts)
        result.trace.append(step)
        result.short_answer, result.answer = short.answer, short.explanation or short.answer
    except DeepSearchLabError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.sources = number_sources(used, result.answer)
    result.seconds = time.perf_counter() - started
    return result
