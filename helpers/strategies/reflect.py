"""Reflect (notebook 05): what the kept passages still leave open, as new search queries (none
when nothing is missing: the loop stops); near-duplicates of earlier searches are dropped."""
from __future__ import annotations

from pydantic import BaseModel, Field

from helpers.errors import StructuredOutputError
from helpers.knowledge.query_dedup import QueryDeduper
from helpers.models.llm import LLM
from helpers.prompts import fence, prompt_version, render
from helpers.results import Hit, TraceStep, traced
from helpers.strategies.decompose import clean_queries


class Gaps(BaseModel):
    gaps: list[str] = Field(description="new search queries; empty when nothing is missing")


def reflect(llm: LLM, question: str, subqueries: list[str], kept: list[Hit], iteration: int = 0,
            max_gaps: int = 3, template: str | None = None,
            deduper: QueryDeduper | None = None) -> tuple[list[str], TraceStep]:
    """Return up to ``max_gaps`` new queries for what is still missing, or [] when covered.

    Exact repeats of earlier searches are always dropped; with a ``deduper`` (which
    remembers the searches made) near-duplicates are dropped too, and the trace says which."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "reflect", iteration, subqueries=subqueries, kept=len(kept)) as entry:
        findings = "\n".join(f"- {h.title} / {h.section or '-'}: {' '.join(h.text.split()[:18])}"
                             for h in kept[:20]) or "- nothing yet"
        entry.prompts = [prompt_version("reflect", template)]
        entry.messages = [{"role": "user", "content": render(
            "reflect", template, question=question, subqueries="\n".join(f"- {q}" for q in subqueries),
            findings=fence(findings))}]
        try:
            reply = llm.structured(entry.messages, Gaps, step="reflect")
            entry.raw = reply.raw
            gaps = clean_queries(reply.value.gaps, max_gaps, exclude=[question, *subqueries])
            if deduper is not None and gaps:
                checked = deduper.filter(gaps)
                gaps = checked.kept
                entry.dropped = checked.dropped
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            gaps = []
            entry.notes.append(f"reflection failed ({exc.last_error}); stopping the search loop")
        entry.parsed = gaps
    return gaps, trace[0]
