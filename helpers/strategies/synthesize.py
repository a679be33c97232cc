"""Synthesize (notebook 06): one call writes the report from the kept passages, citing them as
[n] (the section-by-section writer the pipeline uses by default is ``report_writer``)."""
from __future__ import annotations

from typing import Mapping

from helpers.errors import BudgetExceededError, StructuredOutputError
from helpers.knowledge.retrieval import fit_chunks, numbered_chunks
from helpers.models.llm import LLM
from helpers.prompts import PromptSet, as_prompt_set, prompt_version, render
from helpers.results import Hit, TraceStep, hit_summary, traced
from helpers.strategies.reports import check_point_sources, render_report, report_schema

NOTHING_FOUND = ("The knowledge base holds nothing relevant to this question, so no report was written "
                 "(nothing was invented).")


def passage_listing(hits: list[Hit], why: str) -> str:
    """A report written without the model: ``why``, then the first eight passages with their numbers."""
    lines = [f"{why} The most relevant passages found:"]
    lines += [f"- {h.title} / {h.section or '-'} [{n}]" for n, h in enumerate(hits[:8], start=1)]
    return "\n".join(lines)


SYNTHESIS_PROMPTS = {"structured": "synthesize_structured", "prose": "synthesize"}  # style -> prompt name


def synthesize(llm: LLM, question: str, hits: list[Hit], max_chunks: int = 12, template: str | None = None,
               style: str = "structured", step: str = "synthesize",
               reply_tokens: int | None = None,
               prompts: PromptSet | Mapping[str, str] | None = None) -> tuple[str, list[Hit], TraceStep]:
    """One call writes the report from the kept chunks, citing them as [n] (a short answer to a
    question of fact is ``helpers.strategies.answer.read_short_answer``).

    ``style="structured"`` fills a schema where every point must cite a shown source
    (see ``helpers.strategies.reports``); a point whose cited passages do not hold its words and
    numbers is re-cited to the passage that does, or dropped when none does, and the trace notes it
    (with no point left, the report lists the passages instead).  If the structured call
    fails, a free-text call is made instead.  ``prompts`` (edited texts) supply the prompt when no
    ``template`` is given, and the free-text one.
    Chunks are taken in the order given, as many as fit the context and budget; with none, the
    answer says that nothing relevant was found and no call is made.
    """
    trace: list[TraceStep] = []
    reply_tokens = reply_tokens or llm.max_tokens
    prompt_name = SYNTHESIS_PROMPTS[style]
    prompts = as_prompt_set(prompts)
    template = template if template is not None else prompts.template(prompt_name)
    with traced(trace, llm.ledger, step, question=question, candidates=len(hits), style=style) as entry:
        if not hits:
            entry.notes.append("nothing relevant was found; no model call")
            answer, used = NOTHING_FOUND, []
        else:
            skeleton = render(prompt_name, template, question=question, sources="")
            used, notes = fit_chunks(llm, hits, skeleton, reserve=reply_tokens + 64, max_chunks=max_chunks)
            entry.notes.extend(notes)
            if not used:
                raise BudgetExceededError(f"step '{step}': no passage fits the context or the budget left")
            entry.prompts = [prompt_version(prompt_name, template)]
            entry.messages = [{"role": "user", "content": render(prompt_name, template, question=question,
                                                                 sources=numbered_chunks(used))}]
            answer = ""
            if style == "structured":
                try:
                    reply = llm.structured(entry.messages, report_schema(len(used)), step=step,
                                           max_tokens=reply_tokens)
                    entry.raw = reply.raw
                    entry.notes.extend(check_point_sources(reply.value, [h.text for h in used]))
                    answer = render_report(reply.value) if any(s.points for s in reply.value.sections) else \
                        passage_listing(used, "No point the model wrote is held by the passages it was shown.")
                except StructuredOutputError as exc:
                    entry.notes.append(f"structured report failed ({exc.last_error}); writing free text")
                    prose = SYNTHESIS_PROMPTS["prose"]
                    entry.prompts.append(prompts.version(prose))
                    entry.messages = [{"role": "user", "content": render(prose, prompts.template(prose),
                                                                         question=question,
                                                                         sources=numbered_chunks(used))}]
            if not answer:
                entry.raw = llm.chat(entry.messages, step=step, max_tokens=reply_tokens)
                answer = entry.raw.strip()
            entry.kept = [hit_summary(h) for h in used]
        entry.parsed = answer
    return answer, used, trace[0]
