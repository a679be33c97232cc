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
from typing import Iterable, Literal

from pydantic import BaseModel, Field, create_model

# Plain sentences only: with a grammar backend the model cannot open JSON inside a text
# field (small models sometimes spill the rest of the structure into it), but it may write
# an escaped quote (\"), so a quoted title does not end the string mid-sentence.  The
# pattern is a decoding hint, not a validation rule: servers that ignore it are cleaned up
# at render.
_PLAIN_CHAR = r'([^{}\[\]"\\]|\\")'  # any character but braces, brackets, quotes, backslashes; \" allowed
_DEBRIS = re.compile(r"[{}]|\[\s*\{|'\s*:\s*\[|\"\s*:")


def plain(description: str, max_chars: int = 0) -> dict:
    """A string field of plain text (no JSON debris); with ``max_chars`` the decoding grammar ends
    the string by that many characters."""
    repeat = f"{{1,{max_chars}}}" if max_chars else "+"
    return {"description": description, "json_schema_extra": {"pattern": f"^{_PLAIN_CHAR}{repeat}$"}}


SENTENCE_END = re.compile(r"(?<=[.!?])\s+")  # where a text is split into sentences
_CLOSED = re.compile(r"(?<!\.)[.!?][\"')\]]*$")  # a sentence that ends as sentences do (not in "...")


def cut_off(raw: str) -> bool:
    """A JSON reply that stops before its closing brace: the reply limit cut it (and the parser
    closed what was open), so its last text field may end mid-sentence."""
    return not raw.rstrip().endswith("}")


def split_cut_sentence(text: str) -> tuple[str, str]:
    """``text`` less a last sentence without closing punctuation, and that fragment ('' if none)."""
    sentences = SENTENCE_END.split(text.strip())
    if sentences[-1] and not _CLOSED.search(sentences[-1]):
        return " ".join(sentences[:-1]), sentences[-1]
    return text.strip(), ""


_CLAUSE_BREAK = re.compile(r"[,;:—–](?=\s)")  # a comma, semicolon, colon or dash before a space
_CLAUSE_OPENER = re.compile(r"\s*(and|but|or|nor|so|yet|which|who|whom|whose|where|when|while|although|though|"
                            r"because|since|whereas|including)\b", re.IGNORECASE)


def cut_to_clause(fragment: str, min_words: int = 8) -> str:
    """``fragment`` (a sentence something cut off) closed with a full stop at a clause break, if that
    leaves ``min_words`` words; else ''.  The break is the first one that opens a new clause ("…in 1999,
    and a year earlier, in" is cut after 1999, not after "earlier"), else the last one."""
    breaks = [m.start() for m in _CLAUSE_BREAK.finditer(fragment)
              if len(fragment[: m.start()].split()) >= min_words]
    openers = [b for b in breaks if _CLAUSE_OPENER.match(fragment, b + 1)]
    if openers:
        return fragment[: openers[0]].rstrip() + "."
    return fragment[: breaks[-1]].rstrip() + "." if breaks else ""


def clean_text(text: str) -> str:
    """A text field without JSON debris: cut at the first brace or key-like fragment."""
    match = _DEBRIS.search(text)
    if match:
        text = text[: match.start()]
    text = " ".join(text.split()).strip(" ,;:'[")
    if text.count('"') % 2 and text.endswith('"'):  # an unpaired quote at an end is debris;
        text = text[:-1].rstrip()                     # a quoted title keeps both of its quotes
    if text.count('"') % 2 and text.startswith('"'):
        text = text[1:].lstrip()
    return text


def _source_numbers(count: int):
    return Literal[tuple(range(1, count + 1))]


def report_schema(source_count: int) -> type[BaseModel]:
    """overview + sections of points, each point citing 1+ of the ``source_count`` sources."""
    point = create_model("Point", text=(str, Field(..., **plain("one or two sentences"))),
                         sources=(list[_source_numbers(source_count)], Field(..., min_length=1)))
    section = create_model("Section", heading=(str, Field(..., **plain("a short heading"))),
                           points=(list[point], Field(..., min_length=1)))
    return create_model("Report", overview=(str, Field(..., **plain("one paragraph"))),
                        sections=(list[section], Field(..., min_length=1)))


def answer_field(choices: list[str] | tuple[str, ...] = (), answer_chars: int = 120) -> tuple:
    """The ``answer`` field of a short-answer schema: one of ``choices`` when the question gives
    them (yes/no, or the two options of an "A or B" question: decoding cannot leave them), else
    the answer alone in at most ``answer_chars`` characters."""
    if choices:
        return Literal[tuple(choices)], Field(..., description="the answer: one of the choices the question gives")
    return str, Field(..., **plain("the answer alone: a name, date, place, number, yes or no", answer_chars))


ASKS_FOR = (str, Field(..., **plain("what the answer must be: a date, a place, a person, yes or no...", 80)))


def answer_schema(source_count: int, choices: list[str] | tuple[str, ...] = (),
                  answer_chars: int = 120) -> type[BaseModel]:
    """What the question asks for, the facts that decide it (with [n] marks), the answer alone
    (see ``answer_field``) and the sources both rest on (none when the sources do not answer)."""
    return create_model(
        "ShortAnswerReply", asks_for=ASKS_FOR,
        facts=(str, Field(..., **plain("the facts from the sources that decide the answer, with [n] marks"))),
        answer=answer_field(choices, answer_chars),
        sources=(list[_source_numbers(source_count)], Field(default_factory=list)))


def cite_marks(numbers: list[int]) -> str:
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
                sections.setdefault(heading.lower(), (heading, []))[1].append(f"{text} {cite_marks(point.sources)}")
    lines = [clean_text(report.overview), ""]
    for heading, points in sections.values():
        lines += [f"## {heading}", "", " ".join(points), ""]
    return "\n".join(lines).strip()


# -- citation check --------------------------------------------------------------------
_STOPWORDS = set("""the and for with that this from were was have has had its into over their they them than then
also which when what who how been being more most some such only other about after before during while where
there these those would could should will shall""".split())


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9']{3,}", text.lower()) if w not in _STOPWORDS}


def support(text: str, passage: str) -> float:
    """Share of the content words of ``text`` that also appear in ``passage`` (0 to 1)."""
    words = content_words(text)
    return len(words & content_words(passage)) / len(words) if words else 0.0


_NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def numbers_in(text: str) -> set[str]:
    """The numbers a text states (``1,000`` and ``1000`` count as the same)."""
    return {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}


def numbers_in_any(texts: Iterable[str]) -> set[str]:
    """The numbers any of ``texts`` states."""
    return set().union(*map(numbers_in, texts))


def split_by_numbers(sentences: list[str], sources: list[str]) -> tuple[list[str], list[str]]:
    """The sentences whose every number occurs in one of ``sources``, and those stating a number none holds."""
    stated = numbers_in_any(sources)
    held = [s for s in sentences if numbers_in(s) <= stated]
    return held, [s for s in sentences if s not in held]


def check_point(text: str, cited: list[int], passages: dict[int, str],
                floor: float = 0.35) -> tuple[list[int], str]:
    """The citations a point keeps after the support check, and a note ('' when nothing changed).

    Every number in the point must occur in a cited passage, and the cited passages must hold
    at least ``floor`` of its content words; otherwise the point is re-cited to the one shown
    passage that holds its numbers and most of its words, or dropped (``[]``) when none does."""
    def holds(number: int) -> bool:
        return numbers_in(text) <= numbers_in(passages[number]) and support(text, passages[number]) >= floor

    kept = [n for n in cited if n in passages and holds(n)]
    if kept:
        return kept, ""
    best = max(passages, key=lambda n: support(text, passages[n]))
    short = " ".join(text.split()[:8]) + "…"
    if holds(best):
        return [best], f"re-cited [{best}] instead of {cite_marks(cited)}: {short}"
    missing = numbers_in(text) - numbers_in_any(passages.values())
    why = f"numbers {sorted(missing)} are in no passage" if missing else "no passage holds its words"
    return [], f"dropped (unsupported: {why}): {short}"


def check_point_sources(report: BaseModel, passages: list[str]) -> list[str]:
    """Check every point of a one-call report as the section writer does (``check_point``), in place:
    a point is re-cited to the passage that holds it, or dropped when no passage does (a section left
    without points goes when rendered); an overview sentence stating a number no passage holds is
    dropped.  Return what was changed.  Small models often cite [1] for everything, and copy claims
    from a retrieved text that no cited passage supports."""
    shown = dict(enumerate(passages, start=1))
    changes = []
    for section in report.sections:
        kept = []
        for point in section.points:
            point.sources, note = check_point(point.text, list(dict.fromkeys(point.sources)), shown)
            changes += [note] if note else []
            kept += [point] if point.sources else []
        section.points = kept
    held, unheld = split_by_numbers(SENTENCE_END.split(clean_text(report.overview)), passages)
    if unheld:
        report.overview = " ".join(held)
        changes += [f"dropped an overview sentence with numbers no passage holds: {s}" for s in unheld]
    return changes
