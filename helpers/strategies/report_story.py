"""A report that tells how something changed (notebook 06), for a question that asks it
(``timeline.asks_about_change``); any other question gets the report by topic (``report_writer``).

    outline:    one theme per collection (the one that dates the most changes split in two by era
                while the report has room); each theme's passages are those that date the most
                changes (``change_score``), one per page first, told in time order
    plan:       one call names each theme with a heading and the report with a title [report_plan];
                a heading that is a sentence, empty or another theme's gives way to its pages' title
    sections:   one call per theme, one sentence per passage saying what changed and when
                [report_section_story], each passage shown as the sentences that write a year
                (``dated_excerpt``); the section writer's checks (support, cut sentences), then
                the sentences in time order and each made readable alone (``report_checks.standalone``)
    conclusion: one call, from the sections' sentences only: the overall change [report_conclusion]
    title:      the plan's title and the span of years the report states ("... (1987-2025)")

Every decision is a note in the trace, and each prompt can be edited like any other.
"""
from __future__ import annotations

from dataclasses import replace

from pydantic import Field, create_model

from helpers.errors import BudgetExceededError, StructuredOutputError
from helpers.knowledge.chunking import body_of
from helpers.knowledge.retrieval import document_of
from helpers.models.llm import LLM
from helpers.prompts import fence, prompt_version, render
from helpers.results import Hit, TraceStep, traced
from helpers.strategies.report_checks import cited_in_order, standalone
from helpers.strategies.report_writer import (HEADING_WORDS, Section, by_collection, keep_new_points,
                                              numbered_sections, write_overview, write_section)
from helpers.strategies.reports import SENTENCE_END, cite_marks, clean_text, content_words, plain
from helpers.strategies.timeline import change_score, dated_excerpt, first_year, span
from helpers.values import years_in

PROMPTS = ("report_plan", "report_section_story", "report_conclusion")


def story_outline(searches: list[tuple[str, list[Hit]]], skip: set[str], max_sections: int = 6,
                  per_section: int = 5) -> list[Section]:
    """The themes of a story of change, each with up to ``per_section`` passages no other theme took
    and none in ``skip``.

    One theme per collection (``by_collection``, in turn order); while there is room, the theme with
    the most dated passages (``change_score`` above 0) beyond what one section shows is split in two by
    its pages, the earlier pages first (``split_by_era``).  A theme takes, page by page in turn,
    each page's passage that dates the most changes (ties: the better ranked); an undated passage only
    when fewer than three are dated.  The chosen passages are told in time order (the first year each
    writes)."""
    groups = by_collection(searches, skip)
    dated_ids = {h.id for _, hits in groups for h in hits if change_score(h.text)}
    while len(groups) < max_sections:
        dated = [sum(1 for h in hits if h.id in dated_ids) for _, hits in groups]
        widest = max(range(len(groups)), key=dated.__getitem__)
        if dated[widest] <= per_section or len({document_of(h) for h in groups[widest][1]}) < 2:
            break
        groups[widest: widest + 1] = split_by_era(*groups[widest])
    return numbered_sections(groups, skip, max_sections, lambda free: pick_dated(free, per_section))


def split_by_era(topic: str, hits: list[Hit]) -> list[tuple[str, list[Hit]]]:
    """A theme's passages in two, by page: the pages whose first dated passage is earlier, then the rest."""
    start: dict[str, int] = {}
    for hit in hits:
        year = first_year(hit.text) or 10**4
        start[document_of(hit)] = min(start.get(document_of(hit), year), year)
    pages = sorted(start, key=start.__getitem__)
    early = set(pages[: (len(pages) + 1) // 2])
    return [(topic, [h for h in hits if document_of(h) in early]),
            (topic, [h for h in hits if document_of(h) not in early])]


def pick_dated(hits: list[Hit], count: int, least_dated: int = 3) -> list[Hit]:
    """Up to ``count`` of ``hits``: page by page in turn, each page's passage that dates the most
    changes (ties keep the search order), then a second of each page...; undated passages only to
    reach ``least_dated``.  Returned in time order (the first year each writes; undated last)."""
    score = {h.id: change_score(h.text) for h in hits}
    ranked = sorted(hits, key=lambda h: -score[h.id])
    dated = [h for h in ranked if score[h.id]]
    pages: dict[str, list[Hit]] = {}
    for hit in dated:
        pages.setdefault(document_of(hit), []).append(hit)
    chosen: list[Hit] = []
    while len(chosen) < count and any(pages.values()):
        for page_hits in pages.values():
            if page_hits and len(chosen) < count:
                chosen.append(page_hits.pop(0))
    chosen += [h for h in ranked if h not in dated][: max(0, least_dated - len(chosen))]
    return sorted(chosen, key=lambda h: first_year(h.text) or 10**4)


def _years(hits: list[Hit]) -> str:
    found = span([h.text for h in hits])
    return f"{found[0]}-{found[1]}" if found else "no year stated"


def _fallback_heading(section: Section) -> str:
    """The title of the page most of the section's passages come from."""
    titles = [h.title for h in section.hits]
    return max(dict.fromkeys(titles), key=titles.count)


def plan_story(llm: LLM, question: str, sections: list[Section], template: str | None = None) -> tuple[str, TraceStep]:
    """One call: a heading for each theme (set on its section) and a title for the report (returned).
    A heading longer than a few words, ending as a sentence, empty, or naming the same thing as an
    earlier one gives way to the titles of its first pages; an unusable title gives ''."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "story plan", question=question) as entry:
        entry.prompts = [prompt_version("report_plan", template)]
        listing = "\n".join(f"theme_{i}: pages {'; '.join(dict.fromkeys(h.title for h in s.hits))} "
                            f"(years {_years(s.hits)})" for i, s in enumerate(sections, start=1))
        keys = ", ".join(f'"theme_{i}": "..."' for i in range(1, len(sections) + 1))
        entry.messages = [{"role": "user", "content": render("report_plan", template, question=question,
                                                             themes=fence(listing), keys=keys)}]
        schema = create_model("StoryPlan", **{f"theme_{i}": (str, Field(..., **plain("a heading of a few words", 80)))
                                              for i in range(1, len(sections) + 1)},
                              title=(str, Field(..., **plain("a title of a few words", 80))))
        title, headings = "", [""] * len(sections)
        try:
            reply = llm.structured(entry.messages, schema, step="story plan", max_tokens=30 + 25 * len(sections))
            entry.raw = reply.raw
            title = clean_text(reply.value.title)
            headings = [clean_text(getattr(reply.value, f"theme_{i}")) for i in range(1, len(sections) + 1)]
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            entry.notes.append(f"no valid plan ({exc.last_error}): each theme is named after its pages")
        named: list[set[str]] = []
        for section, heading in zip(sections, headings):
            words = content_words(heading)
            why = "none was written" if not words else \
                f"it is a sentence of {len(heading.split())} words" if len(heading.split()) > HEADING_WORDS else \
                "it ends as a sentence" if heading.endswith(".") else \
                "it lists pages" if ";" in heading else \
                "an earlier theme has the same heading" if any(len(words & w) / len(words | w) >= 0.5 for w in named) \
                else ""
            if why:
                section.heading = _fallback_heading(section)
                entry.notes.append(f"heading {heading!r} replaced by {section.heading!r} ({why})")
            else:
                section.heading = heading
            section.topic = section.heading
            named.append(content_words(section.heading))
        if len(title.split()) > HEADING_WORDS or title.endswith("."):
            entry.notes.append(f"title {title!r} left out (not a title)")
            title = ""
        entry.parsed = {"title": title, "headings": [s.heading for s in sections]}
    return title, trace[0]


def in_time_order(section: Section) -> None:
    """The section's sentences (a point of two sentences gives two, each citing what the point cites)
    sorted by the first year each writes; a sentence that writes none stays after the one before it
    (the first: the first year of the passage it cites)."""
    passages = dict(zip(section.numbers, section.hits))
    keyed, year = [], 0
    for text, cited in section.points:
        for sentence in SENTENCE_END.split(text):
            year = (years_in(sentence) or [year or first_year(passages[cited[0]].text) or 10**4])[0]
            keyed.append((year, sentence, cited))
    keyed.sort(key=lambda item: item[0])
    section.points = [(sentence, cited) for _, sentence, cited in keyed]


def as_written(section: Section) -> Section:
    """The section as its prompt shows it: each passage by its dated sentences (``dated_excerpt``) and
    without its page's header, which a small model copies as its sentence."""
    return Section(section.heading, [replace(h, text=dated_excerpt(body_of(h.text, h.title, h.section)), title="",
                                             section="") for h in section.hits], section.numbers, heading=section.heading)


def write_story(llm: LLM, question: str, sections: list[Section], templates: dict[str, str | None] | None = None,
                point_chars: int = 0) -> tuple[str, str, list[Hit], list[TraceStep]]:
    """The whole story: plan, sections, conclusion.  Returns the title (with its span of years, or ''),
    the Markdown (sources numbered 1..n as first cited), the cited passages in that order, and the
    trace steps.  A call the budget cannot afford ends the writing; what was written stays."""
    templates = templates or {}
    steps: list[TraceStep] = []
    title = ""
    try:
        title, step = plan_story(llm, question, sections, templates.get("report_plan"))
        steps.append(step)
        for section in sections:
            shown = as_written(section)
            steps.append(write_section(llm, question, shown, templates.get("report_section_story"),
                                       per_passage=True, point_chars=point_chars, prompt="report_section_story"))
            section.points = shown.points
    except BudgetExceededError as exc:
        steps.append(TraceStep("budget", notes=[f"{exc}; the report keeps the sections written so far"]))
    section_steps = [s for s in steps if s.step == "section"]
    for section in sections:
        in_time_order(section)
    written = keep_new_points(sections, section_steps, readable=standalone)
    for section, step in zip(sections, section_steps):
        if section.points and not any(years_in(text) for text, _ in section.points):
            step.notes.append("no sentence of this section writes a year: it cannot show when things changed")
    done = [s for s in sections if s.points]
    conclusion = ""
    if done:
        try:
            conclusion, step = write_overview(llm, question, done, templates.get("report_conclusion"),
                                              reply_tokens=220, prompt="report_conclusion", key="conclusion")
            steps.append(step)
            readable = []
            for sentence in SENTENCE_END.split(conclusion) if conclusion else []:
                sentence, note = standalone(sentence, " ".join(written + readable))
                step.notes += [note] if note else []
                readable += [sentence] if sentence else []
            conclusion = " ".join(readable)
        except BudgetExceededError as exc:
            steps.append(TraceStep("budget", notes=[f"{exc}; no conclusion"]))
    lines: list[str] = []
    for section in done:
        lines += [f"## {section.heading}", "", " ".join(f"{text} {cite_marks(cited)}" for text, cited in section.points), ""]
    if conclusion:
        lines += ["## Conclusion", "", conclusion]
    years = span([text for s in done for text, _ in s.points])
    if years:
        title = f"{title or question.rstrip('?')} ({years[0]}–{years[1]})"
    answer, used = cited_in_order("\n".join(lines).strip(), [hit for section in sections for hit in section.hits])
    return title, answer, used, steps
