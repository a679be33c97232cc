"""Reports whose citations cannot go missing.

Small models often forget to cite, or cite numbers that point nowhere.  With
``style="structured"`` the writer fills a schema in which every point must name
at least one source number, and the numbers can only be those of the sources
shown (the decoding grammar enforces both).  The result is rendered to Markdown
with ``[n]`` markers.  ``style="prose"`` asks for free Markdown instead (better
with large models).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, create_model


def _source_numbers(count: int):
    return Literal[tuple(range(1, count + 1))]


def report_schema(source_count: int) -> type[BaseModel]:
    """overview + sections of points, each point citing 1+ of the ``source_count`` sources."""
    point = create_model("Point", text=(str, ...),
                         sources=(list[_source_numbers(source_count)], Field(..., min_length=1)))
    section = create_model("Section", heading=(str, ...), points=(list[point], Field(..., min_length=1)))
    return create_model("Report", overview=(str, ...), sections=(list[section], Field(..., min_length=1)))


def answer_schema(source_count: int) -> type[BaseModel]:
    """A short answer and the sources it rests on (none when the sources do not answer)."""
    return create_model("CitedAnswer", answer=(str, ...),
                        sources=(list[_source_numbers(source_count)], Field(default_factory=list)))


def _cite(numbers: list[int]) -> str:
    return "".join(f"[{n}]" for n in dict.fromkeys(numbers))


def render_report(report: BaseModel) -> str:
    lines = [report.overview.strip(), ""]
    for section in report.sections:
        lines.append(f"## {section.heading.strip()}")
        lines.append("")
        lines.append(" ".join(f"{p.text.strip()} {_cite(p.sources)}" for p in section.points))
        lines.append("")
    return "\n".join(lines).strip()


def render_answer(answer: BaseModel) -> str:
    return f"{answer.answer.strip()} {_cite(answer.sources)}".strip()
