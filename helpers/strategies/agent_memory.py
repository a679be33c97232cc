"""The DeepSearch agent's memory: everything it knows, did and got wrong, plus
the queue of questions it works on.

* ``evidence`` - every passage (chunk) seen, numbered 1..n in the order first
  seen.  The numbers never change, so the model can cite ``[n]`` in any step.
* ``knowledge`` - knowledge items (question, answer, references, type): what a
  search returned, what a document says, answers to sub-questions.
* ``diary`` - one line per step: what was done and what came of it.
* ``bad_attempts`` - rejected answers with what went wrong and what to do next.

``AgentMemory.render`` lays all of it out as one research log, step by step (each
step's diary line, then what it found or got wrong), so that a new step only adds
text at the end: llama.cpp then reuses everything before it (see
``helpers.models.prompt_cache``).  When the log does not fit a token allowance,
the oldest parts are shortened or left out first.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Literal

from helpers.prompts import fence, render
from helpers.results import CITATION, Hit

KnowledgeType = Literal["search", "document", "qa", "web"]


def one_line(text: str, max_chars: int | None = None) -> str:
    """Whitespace collapsed, cut to ``max_chars`` with an ellipsis."""
    text = " ".join(text.split())
    if max_chars is not None and len(text) > max_chars:
        return text[: max_chars - 1].rstrip() + "…"
    return text


def quoted(texts: list[str]) -> str:
    """``"a", "b"``: texts quoted for a diary line or a knowledge item's question."""
    return ", ".join(f'"{t}"' for t in texts)


def numbered(numbers: list[int]) -> str:
    """``[1], [4]``: passage numbers as the model cites them."""
    return ", ".join(f"[{n}]" for n in numbers)


def labelled(hit: Hit, max_chars: int | None = None) -> str:
    """The passage on one line, after its title and section unless the text already starts with them."""
    text = one_line(hit.text, max_chars)
    if text.startswith(hit.title):
        return text
    where = f"{hit.title} / {hit.section}" if hit.section else hit.title
    return f"{where}: {text}"


@dataclass
class KnowledgeItem:
    """One thing learnt.  ``answer`` holds one line per passage, each starting ``[n]``."""

    question: str
    answer: str
    references: list[int]
    type: KnowledgeType
    step: int

    def render(self, label: str, brief: bool) -> str:
        """The item as prompt text; ``brief`` cuts every line short (used when trimming)."""
        limit = 140 if brief else None
        lines = [one_line(line, limit) for line in self.answer.splitlines() if line.strip()]
        return f"[{label}] ({self.type}, step {self.step}) {self.question}\n" + fence("\n".join(lines))


@dataclass
class DiaryLine:
    """What one step did and what came of it."""

    step: int
    text: str

    def render(self) -> str:
        return f"Step {self.step}: {self.text}"


@dataclass
class BadAttempt:
    """A rejected answer and the lesson drawn from it."""

    question: str
    answer: str
    check: str
    verdict: str
    problem: str
    next_step: str
    step: int
    template: str | None = None  # an edited ``agent_bad_attempt`` text (None: the shipped one)

    def render(self, number: int) -> str:
        return render("agent_bad_attempt", self.template, number=number, step=self.step, check=self.check,
                      answer=fence(one_line(self.answer, 300)), verdict=one_line(self.verdict, 250),
                      problem=one_line(self.problem, 250), next_step=one_line(self.next_step, 250)).strip()


class QuestionQueue:
    """Gap questions waiting to be worked on; the original question always comes back.

    * ``"front"``: new gap questions go to the front, the original question is
      (re-)queued at the end, and each step takes the first question.  When the
      queue is empty the original question is the current one.
    * ``"rotate"``: the list starts as ``[original]``, gaps are appended, and
      step ``s`` works on ``gaps[s % len(gaps)]`` (node-DeepResearch's code);
      answered gap questions leave the list, the original never does.
    """

    def __init__(self, original: str, policy: str = "front", capacity: int = 4):
        if policy not in ("front", "rotate"):
            raise ValueError(f"unknown queue policy {policy!r}: use 'front' or 'rotate'")
        self.original = original
        self.policy = policy
        self.capacity = capacity
        self.items: list[str] = [] if policy == "front" else [original]

    @property
    def pending(self) -> list[str]:
        """Gap questions still waiting (never the original)."""
        return [q for q in self.items if q != self.original]

    def is_full(self) -> bool:
        return len(self.pending) >= self.capacity

    def add(self, questions: list[str]) -> list[str]:
        """Queue new gap questions (up to the capacity); returns the ones added."""
        known = {q.lower() for q in [self.original, *self.items]}
        new: list[str] = []
        for question in (q.strip() for q in questions):
            if len(self.pending) + len(new) >= self.capacity:
                break
            if question and question.lower() not in known:
                new.append(question)
                known.add(question.lower())
        if self.policy == "front":
            self.items = [*new, *self.pending, self.original]
        else:
            self.items.extend(new)
        return new

    def next(self, step: int) -> str:
        """The question to work on at ``step`` (1-based)."""
        if self.policy == "front":
            return self.items.pop(0) if self.items else self.original
        return self.items[step % len(self.items)]

    def resolve(self, question: str) -> None:
        """A gap question was answered: it leaves the rotation (a no-op for ``front``)."""
        if question != self.original and question in self.items:
            self.items.remove(question)


@dataclass
class AgentMemory:
    """Everything one run has found, done and got wrong (see the module docstring)."""

    evidence: list[Hit] = field(default_factory=list)
    knowledge: list[KnowledgeItem] = field(default_factory=list)
    diary: list[DiaryLine] = field(default_factory=list)
    bad_attempts: list[BadAttempt] = field(default_factory=list)
    visited: set[tuple[str, str]] = field(default_factory=set)  # (collection, source)
    queries: list[str] = field(default_factory=list)  # every search that was run
    _numbers: dict[str, int] = field(default_factory=dict)  # chunk id -> evidence number

    # evidence ------------------------------------------------------------
    def add_evidence(self, hits: list[Hit]) -> tuple[list[int], list[int]]:
        """Number the hits; returns (numbers of all of them, numbers of the ones that are new)."""
        numbers, new = [], []
        for hit in hits:
            if hit.id not in self._numbers:
                self.evidence.append(hit)
                self._numbers[hit.id] = len(self.evidence)
                new.append(len(self.evidence))
            numbers.append(self._numbers[hit.id])
        return numbers, new

    def passage(self, number: int) -> Hit | None:
        return self.evidence[number - 1] if 1 <= number <= len(self.evidence) else None

    def cited_text(self, answer: str, references: list[int], max_chars: int = 2000) -> str:
        """The passages an answer cites or lists, one shortened line each (what the strict check reads)."""
        numbers = [int(n) for n in CITATION.findall(answer)] + references
        hits = [(n, self.passage(n)) for n in dict.fromkeys(numbers)]
        return "\n".join(f"[{n}] {one_line(hit.text, 350)}" for n, hit in hits if hit is not None)[:max_chars]

    # learning --------------------------------------------------------------
    def learn_from_search(self, queries: list[str], hits: list[Hit], step: int, snippet_chars: int) -> list[int]:
        """Number the hits and store one knowledge item for the search (each new passage cut to
        ``snippet_chars``); returns the numbers of the new passages."""
        numbers, new = self.add_evidence(hits)
        lines = [f"[{n}] {labelled(hit, snippet_chars)}" for n, hit in zip(numbers, hits) if n in new]
        repeated = [n for n in numbers if n not in new]
        if repeated:
            lines.append(f"Also matched passages listed earlier: {numbered(repeated)}")
        if lines:
            self.knowledge.append(KnowledgeItem(f"What did the search for {quoted(queries)} find?",
                                                "\n".join(lines), numbers, "search", step))
        return new

    def learn_from_document(self, parent: Hit, chunks: list[Hit], step: int, max_chars: int,
                            notes: list[str]) -> tuple[list[Hit], list[int]]:
        """Store a document's chunks (the first ``max_chars`` characters) as one knowledge item; each
        chunk inherits the score of the hit that led to the document.  Returns the chunks kept and
        their evidence numbers."""
        kept, used = [], 0
        for chunk in chunks:
            if kept and used + len(chunk.text) > max_chars:
                notes.append(f"{parent.source}: read the first {len(kept)} of {len(chunks)} chunks "
                             f"({max_chars} characters)")
                break
            kept.append(replace(chunk, score=parent.score, similarity=parent.similarity))
            used += len(chunk.text)
        numbers, _ = self.add_evidence(kept)
        if kept:
            self.knowledge.append(KnowledgeItem(
                f'What does the document "{parent.title}" ({parent.source}) say?',
                "\n".join(f"[{n}] {labelled(chunk)}" for n, chunk in zip(numbers, kept)), numbers, "document", step))
        return kept, numbers

    def findings(self) -> tuple[list[str], list[int]]:
        """The last three sub-answers and the three passages most similar to the question, as lines of an
        answer put together without the model, and those passages' numbers."""
        lines = [f"- {item.question} {one_line(item.answer, 300)}" for item in self.knowledge if item.type == "qa"][-3:]
        ranked = sorted(range(1, len(self.evidence) + 1), key=lambda n: self.evidence[n - 1].similarity,
                        reverse=True)[:3]
        lines += [f"- {one_line(self.evidence[n - 1].text, 240)} [{n}]" for n in ranked]
        return lines, ranked

    def unvisited(self) -> list[tuple[int, Hit]]:
        """One (number, hit) per document not read yet, best-scoring hit first."""
        seen: set[tuple[str, str]] = set()
        found = []
        for number, hit in enumerate(self.evidence, start=1):
            key = (hit.collection, hit.source)
            if hit.collection != "web" and key not in self.visited and key not in seen:
                seen.add(key)
                found.append((number, hit))
        return sorted(found, key=lambda pair: pair[1].score, reverse=True)

    def note(self, step: int, text: str) -> None:
        """Add the diary line of ``step``."""
        self.diary.append(DiaryLine(step, text))

    # rendering -----------------------------------------------------------
    def render(self, count_tokens: Callable[[str], int], max_tokens: int) -> tuple[str, list[str]]:
        """The memory as a ``<research-log>`` section in step order, trimmed to ``max_tokens``.

        Trimming works oldest first: knowledge items are shortened, then older
        diary lines and whole knowledge items are left out.  Returns the text
        and notes saying what was trimmed (empty when everything fit).
        """
        view = _MemoryView(self)
        moves = view.trimming_moves()
        text = view.render()
        while count_tokens(text) > max_tokens and next(moves, False):
            text = view.render()
        return text, view.notes()


class _MemoryView:
    """What of the memory goes into one prompt; trimming changes the view, never the memory."""

    KEEP_DIARY = 3  # diary lines kept before knowledge items are dropped

    def __init__(self, memory: AgentMemory):
        self.memory = memory
        self.brief: set[int] = set()  # indexes of knowledge items shown shortened
        self.first_item = 0  # knowledge items before this index are left out
        self.first_diary = 0
        self.first_bad = 0

    def render(self) -> str:
        """Step by step: the diary line, then the knowledge items and rejected answers of that step."""
        m = self.memory
        entries = [(line.step, line.render()) for line in m.diary[self.first_diary:]]
        entries += [(item.step, item.render(f"K{i + 1}", i in self.brief)) for i, item in enumerate(m.knowledge)
                    if i >= self.first_item]
        entries += [(attempt.step, attempt.render(i + 1)) for i, attempt in enumerate(m.bad_attempts)
                    if i >= self.first_bad]
        entries.sort(key=lambda entry: entry[0])  # stable: within a step, diary line, knowledge, rejections
        texts = [text for _, text in entries]
        left_out = self.left_out()
        if left_out:
            texts.insert(0, f"(left out to save space: {left_out})")
        body = "\n\n".join(texts) or "Nothing found yet."
        return f"<research-log>\n{body}\n</research-log>"

    def trimming_moves(self) -> Iterator[bool]:
        """Each ``next()`` trims one more piece, oldest and least useful first (and yields True)."""
        m = self.memory
        for index in range(len(m.knowledge)):
            self.brief.add(index)
            yield True
        while len(m.diary) - self.first_diary > self.KEEP_DIARY:
            self.first_diary += 1
            yield True
        while len(m.bad_attempts) - self.first_bad > 1:
            self.first_bad += 1
            yield True
        while self.first_item < len(m.knowledge):
            self.first_item += 1
            yield True
        while self.first_diary < len(m.diary):
            self.first_diary += 1
            yield True

    def left_out(self) -> str:
        """What the view leaves out, in words ("" when nothing)."""
        return ", ".join(f"{count} {what}" for count, what in
                         ((self.first_item, "older knowledge item(s)"), (self.first_diary, "older diary line(s)"),
                          (self.first_bad, "older rejected answer(s)")) if count)

    def notes(self) -> list[str]:
        """One trace note saying what was shortened and left out (none when everything fit)."""
        left_out = self.left_out()
        parts = [f"{len(self.brief)} knowledge item(s) shortened"] if self.brief else []
        parts += [f"left out {left_out}"] if left_out else []
        return [f"memory trimmed to fit the prompt: {', '.join(parts)}"] if parts else []
