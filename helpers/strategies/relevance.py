"""Relevance (notebook 04): which retrieved passages bear on the question, judged by score
threshold, one batched call, or one call per passage; a passage judged off-topic is demoted, never lost."""
from __future__ import annotations

from pydantic import BaseModel

from helpers.errors import StructuredOutputError
from helpers.knowledge.retrieval import numbered_chunks
from helpers.models.llm import LLM
from helpers.prompts import fence, prompt_version, render
from helpers.results import Hit, TraceStep, hit_summary, traced


class RelevantNumbers(BaseModel):
    relevant: list[int]


class RelevantFlag(BaseModel):
    relevant: bool


def filter_relevant(llm: LLM, question: str, hits: list[Hit], method: str = "batch", threshold: float = 0.35,
                    iteration: int = 0, template: str | None = None, preview_chars: int = 400,
                    accept: float | None = None) -> tuple[list[Hit], TraceStep]:
    """Keep the chunks that help answer ``question``.

    ``threshold`` and ``accept`` are on the cosine ``similarity`` scale (dense and hybrid hits both carry it).

    * ``batch``: drop chunks scoring under ``threshold``, keep those scoring at least ``accept``
      (when given) without asking, then ONE call judges the rest (the model returns the numbers
      of the helpful ones).
    * ``per_chunk``: one call per chunk (what DeepSearcher does; slow, for comparison).
    * ``threshold``: no model call, keep chunks scoring at least ``threshold``.
    * ``none``: keep everything.
    """
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "relevance", iteration, method=method, question=question,
                candidates=len(hits)) as entry:
        candidates = hits if method in ("none", "per_chunk") else [h for h in hits if h.similarity >= threshold]
        below = [h for h in hits if h not in candidates]
        if below:
            entry.notes.append(f"{len(below)} chunk(s) under the score threshold {threshold}")
        kept = candidates
        sure = ({h.id for h in candidates if accept is not None and h.similarity >= accept}
                if method == "batch" else set())
        if sure:
            entry.notes.append(f"{len(sure)} chunk(s) scoring at least {accept} kept without asking")
        asked = [h for h in candidates if h.id not in sure]
        if method == "batch" and asked:
            entry.prompts = [prompt_version("relevance_batch", template)]
            entry.messages = [{"role": "user", "content": render(
                "relevance_batch", template, question=question,
                chunks=numbered_chunks(asked, max_chars=preview_chars))}]
            try:
                reply = llm.structured(entry.messages, RelevantNumbers, step="relevance")
                entry.raw = reply.raw
                chosen = {n for n in reply.value.relevant if 1 <= n <= len(asked)}
                judged = {h.id for n, h in enumerate(asked, start=1) if n in chosen}
                kept = [h for h in candidates if h.id in sure or h.id in judged]
            except StructuredOutputError as exc:
                entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
                entry.notes.append(f"relevance check failed ({exc.last_error}); kept every candidate")
        elif method == "per_chunk":
            entry.prompts = [prompt_version("relevance_single", template)]
            kept = []
            for hit in candidates:
                messages = [{"role": "user", "content": render(
                    "relevance_single", template, question=question, chunk=fence(hit.text[:preview_chars]))}]
                entry.messages = messages
                try:
                    if llm.structured(messages, RelevantFlag, step="relevance").value.relevant:
                        kept.append(hit)
                except StructuredOutputError:
                    kept.append(hit)
                    entry.notes.append(f"no valid verdict for chunk {hit.id}; kept it")
        entry.parsed = [h.id for h in kept]
        entry.kept = [hit_summary(h) for h in kept]
        entry.dropped = [hit_summary(h) for h in hits if h not in kept]
    return kept, trace[0]
