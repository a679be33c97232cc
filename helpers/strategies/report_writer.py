"""A report written section by section, in pieces a small model can hold:

    outline: one section per collection the evidence comes from (or per sub-query search,
             in a knowledge base of one collection), each with its own 2-4 passages, those of
             the section's own search first; while the report has room, a collection whose
             passages span more pages than a section shows gets two sections, one per half of
             its pages
    -> one short call per section: a heading and 2-3 points, each citing its passages (or, with
       ``pipeline.section_points: per_passage``, one sentence from each passage in turn, which the
       grammar ends by ``pipeline.section_point_chars`` characters; a single sentence the cap ended
       is kept up to its last clause break)
    -> checks: words that do not end as a sentence are dropped; a point that repeats an earlier
       one is dropped; a point whose numbers or words its cited passages do not hold is re-cited
       to the passage that does, or dropped; a heading that names nothing its points say gives
       way to the title of the first point's page
    -> one short call for the overview, written from the section texts (a sentence with a
       number the sections do not state is dropped)

The single-prompt report (``synthesize.synthesize``) asks the model to hold twelve
passages and the whole structure at once; a 1.5B model then repeats itself, drifts
from its sources and runs out of reply room mid-sentence.  Here each call sees a few
passages and writes a few sentences, and the code owns the structure and the checks.
Every decision is a note in the trace.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from helpers.errors import BudgetExceededError, StructuredOutputError
from helpers.knowledge.retrieval import at_most_per_document, document_of, interleave, numbered_chunks
from helpers.models.llm import LLM
from helpers.prompts import fence, prompt_version, render
from helpers.results import Hit, TraceStep, hit_summary, traced
from helpers.strategies.report_checks import cited_in_order
from helpers.strategies.reports import (SENTENCE_END, check_point, cite_marks, clean_text, content_words, cut_off,
                                        cut_to_clause, plain, split_by_numbers, split_cut_sentence)

HEADING_WORDS = 12  # a longer "heading" is a sentence


@dataclass
class Section:
    """One planned section: the search it comes from, its passages (with their report-wide
    numbers) and, once written, its heading and points (text, cited numbers)."""

    topic: str
    hits: list[Hit]
    numbers: list[int]
    heading: str = ""
    points: list[tuple[str, list[int]]] = field(default_factory=list)


def outline(searches: list[tuple[str, list[Hit]]], skip: set[str], max_sections: int = 4,
            per_section: int = 3) -> list[Section]:
    """The report's sections, each with up to ``per_section`` passages no earlier section took
    (one per document first, then one per page section) and none in ``skip`` (passages a judge
    found unhelpful); a group left with fewer than two passages gives no section.

    When the evidence spans several collections (each holds one side of the topic, as its
    description says), there is one section per collection, in the order their passages rank
    (turn order), about the first sub-query that searched it, whose passages come first; a
    collection can hold more sides than one section shows (see ``split_wide``).  Otherwise there
    is one section per sub-query search (after the question's own, which comes first), in the
    order they ran."""
    groups = by_collection(searches, skip)
    if len(groups) < 2:
        groups = searches[1:]
    else:
        groups = split_wide(groups, max_sections, per_section)

    def choose(free: list[Hit]) -> list[Hit]:
        chosen = at_most_per_document(free, 1)[:per_section]
        pages = {(h.source, h.section) for h in chosen}
        rest = sorted((h for h in free if h not in chosen), key=lambda h: (h.source, h.section) in pages)
        return chosen + rest[: per_section - len(chosen)]

    return numbered_sections(groups, skip, max_sections, choose)


def numbered_sections(groups: list[tuple[str, list[Hit]]], skip: set[str], max_sections: int,
                      choose: Callable[[list[Hit]], list[Hit]]) -> list[Section]:
    """One section per group, in order, with the passages ``choose`` picks from those no earlier section
    took and none in ``skip``; a group left with fewer than two gives no section.  Passages are numbered
    report-wide, at most ``max_sections`` sections."""
    taken: set[str] = set(skip)
    sections: list[Section] = []
    number = 1
    for topic, hits in groups:
        chosen = choose([h for h in hits if h.id not in taken])
        if len(chosen) < 2:
            continue
        taken |= {h.id for h in chosen}
        sections.append(Section(topic, chosen, list(range(number, number + len(chosen)))))
        number += len(chosen)
        if len(sections) == max_sections:
            break
    return sections


def split_wide(groups: list[tuple[str, list[Hit]]], max_sections: int,
               per_section: int) -> list[tuple[str, list[Hit]]]:
    """Each group whose passages come from more documents than a section shows (``per_section``)
    split in two, in turn order while the report has room for another section: the first half of
    its documents (in the order the group ranks them) and the rest, each with its passages in
    group order.  A collection can hold several sides of a topic (the reception of a show: its
    ratings and its cultural impact); one section of three passages would show only some."""
    room = max_sections - len(groups)
    split: list[tuple[str, list[Hit]]] = []
    for topic, hits in groups:
        documents = list(dict.fromkeys(document_of(h) for h in hits))
        if room > 0 and len(documents) > per_section:
            first = set(documents[: (len(documents) + 1) // 2])
            split += [(topic, [h for h in hits if document_of(h) in first]),
                      (topic, [h for h in hits if document_of(h) not in first])]
            room -= 1
        else:
            split.append((topic, hits))
    return split


def by_collection(searches: list[tuple[str, list[Hit]]], skip: set[str]) -> list[tuple[str, list[Hit]]]:
    """The passages of every search (none in ``skip``) grouped by collection, the groups in turn
    order.  Each group is named after the first sub-query that searched it (the question when none
    did) and starts with that search's passages, best first; the others follow in turn order."""
    groups: dict[str, list[Hit]] = {}
    for hit in interleave([hits for _, hits in searches], limit=10**6):
        if hit.id not in skip:
            groups.setdefault(hit.collection, []).append(hit)
    topics: dict[str, tuple[str, list[Hit]]] = {}
    for topic, hits in searches[1:] + searches[:1]:
        for hit in hits:
            topics.setdefault(hit.collection, (topic, hits))
    ordered = []
    for name, hits in groups.items():
        topic, own = topics[name]
        rank = {h.id: position for position, h in enumerate(own)}  # the group's hits are all of this collection
        ordered.append((topic, sorted(hits, key=lambda h: rank.get(h.id, len(own)))))
    return ordered


def section_schema(numbers: list[int], per_passage: bool = False, point_chars: int = 0,
                   heading: bool = True) -> type[BaseModel]:
    """A heading and 2-3 points, each citing one or more of ``numbers`` (the grammar enforces both:
    asked for "2 or 3", a 1.5B model often stops after one).  ``per_passage``: one sentence under
    each passage's own key (``passage_5``), so the key tells the model which passage to read and
    every passage gives a point, then the heading, written after the sentences it names.  The
    decoding grammar requires every key, but a reply the token limit cut keeps the keys it finished
    (the others are read as empty), so one long sentence costs that sentence, not the section.
    ``point_chars`` (per passage): the grammar ends each sentence by that many characters, so a
    passage copied whole cannot use up the reply.  ``heading=False`` (per passage): no heading (the
    section has one already)."""
    if per_passage:  # the heading comes last, so it names what the sentences say
        keys = [f"passage_{n}" for n in numbers]
        title = {"heading": (str, Field("", **plain("a few words")))} if heading else {}
        return create_model("SectionNotes", __config__=ConfigDict(json_schema_extra={"required": [*keys, *title]}),
                            **{key: (str, Field("", **plain("one complete sentence", point_chars))) for key in keys},
                            **title)
    cited = list[Literal[tuple(numbers)]]
    point = create_model("Point", text=(str, Field(..., **plain("one complete sentence"))),
                         sources=(cited, Field(..., min_length=1)))
    return create_model("SectionText", heading=(str, Field(..., **plain("a few words"))),
                        points=(list[point], Field(..., min_length=2, max_length=3)))


def closing_schema(key: str) -> type[BaseModel]:
    """A reply of one field ``key`` (``overview``, ``conclusion``): two or three sentences."""
    return create_model(key.title(), **{key: (str, Field(..., **plain("two or three sentences")))})


def repeats(text: str, earlier: list[str], threshold: float = 0.6) -> str | None:
    """The earlier point ``text`` repeats (content-word overlap at least ``threshold``), or None."""
    words = content_words(text)
    for other in earlier:
        theirs = content_words(other)
        if words and theirs and len(words & theirs) / len(words | theirs) >= threshold:
            return other
    return None


def finished(text: str, raw: str, what: str, reply_tokens: int, notes: list[str]) -> str:
    """``text`` (the last text field of reply ``raw``) less a sentence the reply limit cut off, noted."""
    if not cut_off(raw):
        return text
    text, cut = split_cut_sentence(text)
    if cut:
        notes.append(f"the reply limit ({reply_tokens} tokens) cut {what}; dropped its unfinished sentence: {cut}")
    return text


def written_points(value: BaseModel, numbers: list[int], per_passage: bool) -> list[tuple[str, list[int]]]:
    """The (text, cited numbers) pairs of a section reply, in order."""
    if per_passage:
        return [(getattr(value, f"passage_{n}"), [n]) for n in numbers if getattr(value, f"passage_{n}").strip()]
    return [(point.text, list(dict.fromkeys(point.sources))) for point in value.points]


def _stems(text: str) -> set[str]:
    """Content words cut to five letters, so "changes" and "changed" count as one."""
    return {word.strip("'")[:5] for word in content_words(text)}


def checked_heading(heading: str, question: str, section: Section, cut: bool, notes: list[str]) -> str:
    """``heading`` if it is a few words (at most ``HEADING_WORDS``) that name something its points say
    (a word that is not the question's); else, or when it is empty or the reply limit cut it (``cut``:
    it is the reply's last field), the title of the page the first point cites, noted.  A small
    model's heading can name a passage that no point used, say nothing ("Shape Changes Over Time"),
    or be a whole sentence copied from a passage (the 0.5B model's)."""
    said = _stems(" ".join(text for text, _ in section.points))
    long = len(heading.split()) > HEADING_WORDS
    if heading and not cut and not long and (_stems(heading) - _stems(question)) & said:
        return heading
    if not section.points:
        return heading or section.topic
    page = section.hits[section.numbers.index(section.points[0][1][0])].title
    why = "none was written" if not heading else "the reply limit cut it" if cut else \
        f"it is a sentence of {len(heading.split())} words, not a heading" if long else "it names nothing its points say"
    notes.append(f"heading {heading!r} replaced by the title of the first point's page ({why})")
    return page


def section_prompt(per_passage: bool) -> str:
    """The name of the prompt a section is written with."""
    return "report_section_per_passage" if per_passage else "report_section"


def write_section(llm: LLM, question: str, section: Section, template: str | None = None,
                  per_passage: bool = False, point_chars: int = 0, prompt: str | None = None) -> TraceStep:
    """One call: the section's heading and points, then the support check on each point.  ``prompt``:
    another per-passage prompt, for a section whose heading is set already (no heading is asked)."""
    trace: list[TraceStep] = []
    name = prompt or section_prompt(per_passage)
    per_point = max(60, point_chars // 4 + 10)  # ~60 tokens a point, or what its cap lets it write
    reply_tokens = 40 + per_point * (len(section.numbers) if per_passage else 3)  # a heading, then the points
    with traced(trace, llm.ledger, "section", topic=section.topic) as entry:
        entry.prompts = [prompt_version(name, template)]
        keys = ", ".join(f'"passage_{n}": "..."' for n in section.numbers)
        entry.messages = [{"role": "user", "content": render(
            name, template, question=question, topic=section.topic, keys=keys,
            passages=numbered_chunks(section.hits, start=section.numbers[0], bodies=True), first=section.numbers[0])}]
        entry.kept = [hit_summary(h) for h in section.hits]
        try:
            reply = llm.structured(entry.messages, section_schema(section.numbers, per_passage, point_chars,
                                                                  heading=prompt is None),
                                   step="section", max_tokens=reply_tokens)
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            entry.notes.append(f"no valid section ({exc.last_error}); left out")
            return entry
        entry.raw = reply.raw
        passages = dict(zip(section.numbers, (h.text for h in section.hits)))
        points = written_points(reply.value, section.numbers, per_passage)
        if len(points) < len(section.numbers) and per_passage:
            entry.notes.append(f"the reply limit ({reply_tokens} tokens) ended the reply before "
                               f"{len(section.numbers) - len(points)} of its {len(section.numbers)} passages had a sentence")
        for index, (text, cited) in enumerate(points, start=1):
            capped = per_passage and 0 < point_chars <= len(text)
            text = clean_text(text)
            if index == len(points):
                text = finished(text, reply.raw, "the last point", reply_tokens, entry.notes)
            text, fragment = split_cut_sentence(text)
            clause = cut_to_clause(fragment) if fragment and capped and not text else ""
            if clause:  # one copied sentence, too long: kept to its last clause break
                text = clause
                entry.notes.append(f"the {point_chars}-character cap ended the only sentence of a point: kept it "
                                   f"up to its last clause break: {' '.join(text.split()[:8])}…")
            elif fragment:  # e.g. a passage's title written as a point, or a copied passage the cap ended
                why = f"the {point_chars}-character cap ended a sentence" if capped else \
                    "words that do not end as a sentence"
                entry.notes.append(f"dropped {why}: {' '.join(fragment.split()[:8])}…")
            if not text:
                continue
            cited, note = check_point(text, cited, passages)
            if note:
                entry.notes.append(note)
            if cited:
                section.points.append((text, cited))
        if prompt is None:
            section.heading = checked_heading(clean_text(reply.value.heading), question, section,
                                              cut=per_passage and cut_off(reply.raw), notes=entry.notes)
        entry.parsed = {"heading": section.heading, "points": section.points}
    return trace[0]


def write_overview(llm: LLM, question: str, sections: list[Section], template: str | None = None,
                   reply_tokens: int = 160, prompt: str = "report_overview",
                   key: str = "overview") -> tuple[str, TraceStep]:
    """The overview (or, with ``prompt`` and ``key``, the conclusion), written from the section texts;
    sentences stating numbers the sections do not, restating a sentence of their points, or repeating
    an earlier sentence are dropped (an overview that only restated points is left out: the report
    starts with its sections)."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, key, question=question) as entry:
        entry.prompts = [prompt_version(prompt, template)]
        points = [text for s in sections for text, _ in s.points]
        listing = "\n".join(f"- {s.heading}: {' '.join(text for text, _ in s.points)}" for s in sections)
        entry.messages = [{"role": "user", "content": render(prompt, template, question=question,
                                                             sections=fence(listing))}]
        try:
            reply = llm.structured(entry.messages, closing_schema(key), step=key, max_tokens=reply_tokens)
            entry.raw = reply.raw
            text = finished(clean_text(getattr(reply.value, key)), reply.raw, f"the {key}", reply_tokens, entry.notes)
            sentences = SENTENCE_END.split(text) if text else []
        except StructuredOutputError as exc:
            entry.raw, sentences = exc.raw_replies[-1] if exc.raw_replies else "", []
            entry.notes.append(f"no valid {key} ({exc.last_error}); the report goes without one")
        kept, unheld = split_by_numbers(sentences, [listing])
        entry.notes += [f"dropped a sentence with numbers the sections do not state: {s}" for s in unheld]
        point_sentences = [sentence for text in points for sentence in SENTENCE_END.split(text)]
        restated = [s for s in kept if repeats(s, point_sentences)]
        entry.notes += [f"dropped a sentence that restates a point: {' '.join(s.split()[:8])}…" for s in restated]
        said: list[str] = []
        for sentence in (s for s in kept if s not in restated):
            if repeats(sentence, said):
                entry.notes.append(f"dropped a sentence that repeats an earlier one: {' '.join(sentence.split()[:8])}…")
            else:
                said.append(sentence)
        if kept and not said:
            entry.notes.append(f"no sentence of the {key} is left: the report goes without one")
        entry.parsed = " ".join(said)
    return entry.parsed, trace[0]


def keep_new_points(sections: list[Section], steps: list[TraceStep],
                    readable: Callable[[str, str], tuple[str, str]] | None = None) -> list[str]:
    """Each section's points, in order across the report, less those that repeat an earlier one; with
    ``readable`` (``report_checks.standalone``), each point is first made readable after the heading and
    the points before it, or dropped.  Every change is a note on the section's step; returns the points kept."""
    written: list[str] = []
    for section, step in zip(sections, steps):
        kept = []
        for text, cited in section.points:
            if readable is not None:
                text, note = readable(text, " ".join([section.heading, *written]))
                step.notes += [note] if note else []
                if not text:
                    continue
            if repeats(text, written):
                step.notes.append(f"dropped a point that repeats an earlier one: {' '.join(text.split()[:8])}…")
                continue
            written.append(text)
            kept.append((text, cited))
        section.points = kept
    return written


def write_report(llm: LLM, question: str, sections: list[Section], templates: dict[str, str | None] | None = None,
                 per_passage: bool = False, point_chars: int = 0) -> tuple[str, list[Hit], list[TraceStep]]:
    """The whole report: each section, then the repeat check across sections, then the overview
    (less any sentence that restates a point).
    Returns the Markdown (its sources numbered 1..n in the order first cited), the cited passages in
    that order, and the trace steps.  A call the budget
    cannot afford ends the writing; what was written stays."""
    templates = templates or {}
    steps: list[TraceStep] = []
    template = templates.get(section_prompt(per_passage))
    try:
        for section in sections:
            steps.append(write_section(llm, question, section, template, per_passage, point_chars))
    except BudgetExceededError as exc:
        steps.append(TraceStep("budget", notes=[f"{exc}; the report keeps the sections written so far"]))
    keep_new_points(sections, steps)
    done = [s for s in sections if s.points]
    overview = ""
    if done:
        try:
            overview, step = write_overview(llm, question, done, templates.get("report_overview"))
            steps.append(step)
        except BudgetExceededError as exc:
            steps.append(TraceStep("budget", notes=[f"{exc}; no overview"]))
    lines = [overview, ""] if overview else []
    for section in done:
        points = " ".join(f"{text} {cite_marks(cited)}" for text, cited in section.points)
        lines += [f"## {section.heading}", "", points, ""]
    answer, used = cited_in_order("\n".join(lines).strip(), [hit for section in sections for hit in section.hits])
    return answer, used, steps
