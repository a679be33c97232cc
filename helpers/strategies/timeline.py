"""Dated evidence (notebook 06): what a question about change needs, read in code.

A question that asks how something changed (over time, since, between, the history of) is answered
by a story: what it was, what it became, and when.  The loop's searches find what the question and
its sub-queries match best, which is often a page's summary, not the passages that date each change.
So, for such a question:

    timeline search: each collection searched once more with the question, for passages of every
                     page it holds (several per page), no model call;
    dated passages:  the years each passage writes, read in code (``values.years_in``), and how
                     many of its sentences state a change together with a year (``change_score``);
                     the trace shows the timeline found, earliest first.

The report writer (``report_story``) then picks, for each theme, the passages that date the most
changes across its pages, and tells them in time order.
"""
from __future__ import annotations

import re

from helpers.knowledge.chunking import body_of
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.store import VectorStore
from helpers.config import SearchConfig
from helpers.knowledge.retrieval import search
from helpers.results import Hit, TraceStep, hit_summary, traced
from helpers.values import years_in

_ASKS_CHANGE = re.compile(r"\b(?:chang\w*|evolv\w*|evolution|transform\w*|over time|over the years|"
                          r"through the years|history of|since|grown|grew|shift\w*|trajector\w*|progress\w*)\b|"
                          r"\bbetween\s+\d{3,4}\s+and\s+\d{3,4}\b|\bfrom\s+\d{3,4}\s+to\s+\d{3,4}\b", re.IGNORECASE)
# verbs and phrases that say something became something else (general English, about change itself)
_CHANGE = re.compile(r"\b(?:became|become|becomes|began|begun|started|ended|moved|switched|replaced|took over|"
                     r"changed|shifted|turned|grew|fell|rose|declined|dropped|returned|retired|renamed|stopped|"
                     r"no longer|introduced|launched|adopted|acquired|bought|passed|left|joined|recast|"
                     r"premiered|debuted|renewed|cancel\w*|raised|increasingly|onward|onwards)\b", re.IGNORECASE)
# a sentence ends at . ! or ? before a capital, but not after a title or an initial ("Mrs. Smith", "James L. Brooks")
_SENTENCE = re.compile(r"(?<!Mr\.)(?<!Mrs\.)(?<!Ms\.)(?<!Dr\.)(?<!St\.)(?<!Jr\.)(?<!Sr\.)(?<!vs\.)(?<!\s[A-Z]\.)"
                       r"(?<=[.!?])\s+(?=[A-Z\"'])")


def asks_about_change(question: str) -> bool:
    """True when ``question`` asks how something changed (over time, since, between two years, its
    history), so the report is told in time order."""
    return bool(_ASKS_CHANGE.search(question))


def dated_sentences(text: str) -> list[tuple[int, str]]:
    """(first year, sentence) for each sentence of ``text`` that writes a year."""
    return [(years[0], sentence) for sentence in _SENTENCE.split(text) if (years := years_in(sentence))]


def dated_excerpt(text: str, max_chars: int = 320) -> str:
    """What a story's section is written from: the sentences of ``text`` that date a change (a year
    and a change word), then those that only write a year, each kept in text order, up to
    ``max_chars`` (the first always); ``text``'s first sentence when none writes a year.  A sentence
    the chunk boundary cut (it starts in lower case or leaves a quote open) is left out.  A small
    model asked for one sentence from a passage copies its first one, often a summary."""
    sentences = [s for s in _SENTENCE.split(" ".join(text.split())) if s]
    if sentences and (sentences[0][:1].islower() or sentences[0].count('"') % 2):
        sentences = sentences[1:]
    changes = [s for s in sentences if years_in(s) and _CHANGE.search(s)]
    dated = changes + [s for s in sentences if years_in(s) and s not in changes]
    kept: list[str] = []
    for sentence in dated or sentences[:1]:
        if kept and len(" ".join(kept + [sentence])) > max_chars:
            break
        kept.append(sentence)
    return " ".join(sorted(kept, key=sentences.index))


def change_score(text: str) -> int:
    """What a passage adds to a story of change: its sentences that write a year, and once more those
    that also state a change (0: it dates nothing)."""
    dated = [sentence for _, sentence in dated_sentences(text)]
    return len(dated) + sum(1 for sentence in dated if _CHANGE.search(sentence))


def first_year(text: str) -> int | None:
    """The earliest year ``text`` writes, or None."""
    years = years_in(text)
    return min(years) if years else None


def span(texts: list[str]) -> tuple[int, int] | None:
    """The first and last year the texts write, or None when they write none."""
    years = [y for text in texts for y in years_in(text)]
    return (min(years), max(years)) if years else None


def timeline_search(store: VectorStore, embedder: Embedder, question: str, collections: list[str], k: int,
                    per_page: int, mode: str = "dense") -> tuple[list[tuple[str, list[Hit]]], TraceStep]:
    """Each of ``collections`` searched with ``question`` for its best ``k`` passages, at most
    ``per_page`` of one page, so every page of a theme can date its part of the change; one step whose
    ``parsed`` is the timeline found (each dated sentence's year, page and first words, earliest first)."""
    trace: list[TraceStep] = []
    with traced(trace, None, "timeline", question=question, collections=collections, k=k, per_page=per_page) as entry:
        searches = [(f"timeline: {name}", search(store, embedder, question, [name], SearchConfig(top_k=k, mode=mode),
                                                 max_per_document=per_page)) for name in collections]
        hits = [h for _, found in searches for h in found]
        entries = sorted({(year, h.title, " ".join(sentence.split()[:10]))
                          for h in hits for year, sentence in dated_sentences(body_of(h.text, h.title, h.section))})
        entry.kept = [{**hit_summary(h), "years": sorted(set(years_in(h.text))), "change_score": change_score(h.text)}
                      for h in hits]
        entry.parsed = [f"{year} · {title} · {words}…" for year, title, words in entries]
        entry.notes.append(f"{len(hits)} passage(s) from {len({h.source for h in hits})} page(s) of "
                           f"{len(collections)} collection(s); {sum(1 for h in hits if years_in(h.text))} state a year: "
                           f"{len(entries)} dated sentence(s)" + (f", {entries[0][0]} to {entries[-1][0]}" if entries else ""))
    return searches, trace[0]
