"""Run results and traces, shared by every strategy (naive RAG, the DeepSearcher
pipeline, the DeepSearch agent).

A ``Result`` holds the answer (for a question that asks for a fact, also the short
answer alone: a name, a date, yes or no), the numbered sources it cites, the usage ledger
and a ``TraceStep`` for every step: its inputs, the exact messages sent, the raw
reply, the parsed output, the chunks kept and dropped (with scores), notes about
anything degraded or trimmed, and the tokens and seconds it used.  It saves to
JSON and loads back.
"""
from __future__ import annotations

import json
import re
import time
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from helpers.files import write_atomically
from helpers.models.usage import UsageLedger


@dataclass
class Hit:
    id: str
    text: str
    score: float
    collection: str
    source: str
    title: str
    section: str
    chunk_index: int
    similarity: float | None = None  # cosine similarity to the query; thresholds and merging use it

    def __post_init__(self) -> None:
        if self.similarity is None:  # dense search: the score is the cosine similarity
            self.similarity = self.score

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TraceStep:
    step: str
    iteration: int = 0
    inputs: dict = field(default_factory=dict)
    messages: list[dict] | None = None
    raw: str | None = None
    parsed: Any = None
    kept: list[dict] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)  # the prompt versions used, as name@hash
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


@dataclass
class Source:
    number: int
    title: str
    collection: str
    source: str
    section: str
    score: float
    chunk_id: str
    cited: bool = False


@dataclass
class Result:
    question: str
    strategy: str
    answer: str = ""        # what the reader sees: a report, or the facts behind a short answer, with [n] marks
    short_answer: str = ""  # the answer alone (a name, a date, a place, a number, yes/no); "" for a report
    sources: list[Source] = field(default_factory=list)
    trace: list[TraceStep] = field(default_factory=list)
    usage: UsageLedger = field(default_factory=UsageLedger)
    seconds: float = 0.0
    error: str | None = None
    settings: dict = field(default_factory=dict)
    title: str = ""         # a report's own title (a story of change: with its span of years); "" uses the question

    @property
    def failed(self) -> bool:
        return self.error is not None or not self.answer.strip()

    @property
    def cited_sources(self) -> list[Source]:
        return [s for s in self.sources if s.cited]

    def steps(self, name: str) -> list[TraceStep]:
        return [t for t in self.trace if t.step == name]

    @property
    def prompt_versions(self) -> list[str]:
        """Every prompt the run sent, as ``name@hash``, each once, sorted."""
        return sorted({version for step in self.trace for version in step.prompts})

    @property
    def cut_short(self) -> list[str]:
        """Why this run stopped before it had finished (empty when it had not): the notes of its 'budget'
        steps, and the agent's beast-mode reason (its answer then skipped the answer checks)."""
        notes = [note for t in self.steps("budget") for note in t.notes]
        if self.settings.get("beast_mode"):
            notes.append(f"the agent had to answer at once ({self.settings['beast_mode']})")
        return notes

    def to_dict(self) -> dict:
        data = asdict(self)
        data["usage"] = {"records": self.usage.to_list(), "summary": self.usage.summary()}
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str)

    def save(self, path: str | Path) -> None:
        """Write the JSON atomically (``write_atomically``)."""
        write_atomically(path, self.to_json())

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        data = dict(data)
        data["sources"] = [Source(**s) for s in data.get("sources", [])]
        data["trace"] = [TraceStep(**t) for t in data.get("trace", [])]
        data["usage"] = UsageLedger.from_list(data.get("usage", {}).get("records", []))
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> "Result":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def summary_json(self) -> dict:
        """The CLI's ``--json`` shape: answer, what cut the run short, sources, usage."""
        return {"short_answer": self.short_answer, "answer": self.answer, "strategy": self.strategy, "error": self.error, "cut_short": self.cut_short,
                "sources": [{"number": s.number, "title": s.title, "collection": s.collection,
                             "source": s.source, "score": round(s.score, 4), "cited": s.cited}
                            for s in self.sources],
                "usage": {**self.usage.summary(), "wall_seconds": round(self.seconds, 2)}}

    def report_markdown(self, listed: int = 12) -> str:
        """The title, the short answer (when there is one), the answer, its sources (the cited ones, or the
        first ``listed`` when none is cited; the rest are counted)
        and a line on how it was made (model, strategy, calls, tokens, time), after what cut it short, if anything."""
        lines = [f"# {self.title or self.question}", ""]
        if self.short_answer:
            lines += [f"**Answer: {self.short_answer}**", ""]
        lines += [self.answer.strip(), "", "## Sources", ""]
        cited = [s for s in self.sources if s.cited]
        shown = cited or [s for s in self.sources if s.number <= listed]
        pages = Counter((s.source, s.section) for s in shown)
        seen: Counter = Counter()
        for s in shown:
            mark = "" if s.cited else " (not cited)"
            section = f" — {s.section}" if s.section else ""
            seen[s.source, s.section] += 1
            if pages[s.source, s.section] > 1:  # two passages of one page section: say which
                section += f" (excerpt {seen[s.source, s.section]})"
            lines.append(f"{s.number}. {s.title}{section} · `{s.source}` · {s.collection}{mark}")
        if len(self.sources) > len(shown):
            lines.append(f"\n{len(self.sources) - len(shown)} more passage(s) found but not cited (see the trace).")
        if self.cut_short:
            lines += ["", "*Stopped early: " + "; ".join(self.cut_short) + ".*"]
        model = self.settings.get("model", "the configured model")
        lines += ["", f"*Made by the {self.strategy} strategy with {model}: {self.usage.calls} model calls, "
                      f"{self.usage.prompt_tokens:,} prompt + {self.usage.completion_tokens:,} completion tokens, "
                      f"{self.seconds:.0f} s.*"]
        return "\n".join(lines) + "\n"


_STEP_LISTENERS: ContextVar[tuple[Callable[["TraceStep"], None], ...]] = ContextVar("step_listeners", default=())


@contextmanager
def on_each_step(listener: Callable[["TraceStep"], None]) -> Iterator[None]:
    """Within this block, call ``listener(step)`` as each traced step ends (e.g. to print a line per
    step while a long run is still going)."""
    token = _STEP_LISTENERS.set(_STEP_LISTENERS.get() + (listener,))
    try:
        yield
    finally:
        _STEP_LISTENERS.reset(token)


@contextmanager
def traced(trace: list[TraceStep], ledger: UsageLedger | None, step: str, iteration: int = 0,
           **inputs: Any) -> Iterator[TraceStep]:
    """Record one step: the calls, tokens and seconds it used are taken from the ledger
    (``None`` for a step that makes no model call); listeners (``on_each_step``) hear of it."""
    entry = TraceStep(step, iteration, inputs)
    before = (ledger.calls, ledger.prompt_tokens, ledger.completion_tokens) if ledger is not None else (0, 0, 0)
    started = time.perf_counter()
    try:
        yield entry
    finally:
        if ledger is not None:
            entry.calls = ledger.calls - before[0]
            entry.prompt_tokens = ledger.prompt_tokens - before[1]
            entry.completion_tokens = ledger.completion_tokens - before[2]
        entry.seconds = round(time.perf_counter() - started, 3)
        trace.append(entry)
        for listener in _STEP_LISTENERS.get():
            listener(entry)


def hit_summary(hit: Hit) -> dict:
    """A hit as it appears in a trace: ids, where it came from, score, and the first words."""
    return {"id": hit.id, "collection": hit.collection, "source": hit.source, "title": hit.title,
            "section": hit.section,
            "score": round(hit.score, 4), "similarity": round(hit.similarity, 4), "text": hit.text[:200]}


CITATION = re.compile(r"\[(\d{1,3})\]")  # a source cited as [n]: the one pattern every module uses


def cited_numbers(text: str) -> set[int]:
    """Numbers cited as ``[n]`` in a text."""
    return {int(n) for n in CITATION.findall(text)}


def number_sources(hits: list[Hit], answer: str) -> list[Source]:
    """Sources numbered 1..n in the order given, marked cited when ``[n]`` appears in the answer."""
    cited = cited_numbers(answer)
    return [Source(i, h.title, h.collection, h.source, h.section, h.score, h.id, i in cited)
            for i, h in enumerate(hits, start=1)]
