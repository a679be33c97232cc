"""Reports whose citations cannot go missing.

Small models often forget to cite, or cite numbers that point nowhere.  With
``style="structured"`` the writer fills a schema in which every point must name
at least one source number, and the numbers can only be those of the sources
shown (the decoding grammar enforces both).  The result is rendered to Markdown
with ``[n]`` markers.  ``style="prose"`` asks for free Markdown instead (better
with large models).
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, create_model

# Plain sentences only: with a grammar backend the model cannot open JSON inside a text
# field (small models sometimes spill the rest of the structure into it).  The pattern is
# a decoding hint, not a validation rule: servers that ignore it are cleaned up at render.
PLAIN_TEXT = {"pattern": r'^[^{}\[\]"\\]+$'}
_DEBRIS = re.compile(r"[{}]|\[\s*\{|'\s*:\s*\[|\"\s*:")


def _plain(description: str) -> dict:
    return {"description": description, "json_schema_extra": PLAIN_TEXT}


def clean_text(text: str) -> str:
    """A text field without JSON debris: cut at the first brace or key-like fragment."""
    match = _DEBRIS.search(text)
    if match:
        text = text[: match.start()]
    return " ".join(text.split()).strip(" ,;:'\"[")


def _source_numbers(count: int):
    return Literal[tuple(range(1, count + 1))]


def report_schema(source_count: int) -> type[BaseModel]:
    """overview + sections of points, each point citing 1+ of the ``source_count`` sources."""
    point = create_model("Point", text=(str, Field(..., **_plain("one or two sentences"))),
                         sources=(list[_source_numbers(source_count)], Field(..., min_length=1)))
    section = create_model("Section", heading=(str, Field(..., **_plain("a short heading"))),
                           points=(list[point], Field(..., min_length=1)))
    return create_model("Report", overview=(str, Field(..., **_plain("one paragraph"))),
                        sections=(list[section], Field(..., min_length=1)))


def answer_schema(source_count: int) -> type[BaseModel]:
    """A short answer and the sources it rests on (none when the sources do not answer)."""
    return create_model("CitedAnswer", answer=(str, Field(..., **_plain("the answer in a few sentences"))),
                        sources=(list[_source_numbers(source_count)], Field(default_factory=list)))


def _cite(numbers: list[int]) -> str:
    return "".join(f"[{n}]" for n in dict.fromkeys(numbers))


def render_report(report: BaseModel) -> str:
    """Markdown: the overview, then each section's points with their [n] citations.
    Points that are empty or only repeat their heading are left out, sections left
    empty are dropped, and sections with the same heading are merged."""
    sections: dict[str, tuple[str, list[str]]] = {}
    for section in report.sections:
        heading = clean_text(section.heading) or "Findings"
        for point in section.points:
            text = clean_text(point.text)
            if text and text.lower().rstrip(".") != heading.lower().rstrip("."):
                sections.setdefault(heading.lower(), (heading, []))[1].append(f"{text} {_cite(point.sources)}")
    lines = [clean_text(report.overview), ""]
    for heading, points in sections.values():
        lines += [f"## {heading}", "", " ".join(points), ""]
    return "\n".join(lines).strip()


def render_answer(answer: BaseModel) -> str:
    return f"{clean_text(answer.answer)} {_cite(answer.sources)}".strip()
