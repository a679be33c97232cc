"""The DeepSearch agent: search, read and reason in a loop until an answer passes
evaluation (a Python rebuild of the ideas behind Jina's node-DeepResearch).

Before the first step the question itself is searched (no model call), and the pages titled
by the names it mentions (``names_in``: "Which film came out first, Blind Shaft or Dying
God?" names two) are looked up in the title index and put first, so the run starts from
what one plain search finds plus the pages of everything the question names.

Every step:

1. the code decides which actions are allowed now (``agent_actions.allowed_actions``) and
   builds a reply schema that admits only those, each with its own required
   fields (``action_schema``), so constrained decoding cannot pick another one;
2. the model sees the question, its memory (knowledge, diary, bad attempts, step by step)
   and the allowed actions, and picks one;
3. the action runs:

   * **search** - requests written as questions or sentences are rewritten into (at
     most three) keyword queries (``agent.rewrite = "always"``: every request; short
     keyword requests otherwise go as they are, without a call), de-duplicated against
     earlier searches and each other with embeddings, then run; the requests
     themselves are the fallback;
   * **visit** - whole documents behind chosen passages are read;
   * **reflect** - gap questions go into the question queue;
   * **answer** - an answer to a gap question becomes knowledge; an answer to
     the original question is evaluated by separate calls (``answer_checks``) and
     either accepted or turned into a bad attempt with a lesson (no lesson call
     when that rejection ends the loop: beast mode answers next).

Small models seldom choose ``answer`` on their own: they repeat the same search or
sub-question until the budget is gone.  So a step that *stalls* (it repeats a request the
model made before, or finds no new passage and no new sub-question) counts, and after
``agent.max_stalls`` stalled steps in a row the next step may only answer (a draft);
``agent.draft_every = n`` does the same after ``n`` steps without an answer attempt.
A draft is evaluated like any answer: a rejected one becomes a lesson and the loop goes on.

The loop stops at an accepted answer.  When tokens run short, bad attempts hit
their cap or the steps run out, **beast mode** masks everything but ``answer``
and the model must commit to its best answer (not evaluated).  If even that
fails, a plain answer is put together from the best passages: the run always
ends with an answer and numbered sources.

The agent in files: its state (``agent_memory``: knowledge, diary, bad attempts, the question
queue; ``agent_budget``), its choice of action (``agent_choice``; the allowed actions and their
schemas in ``agent_actions``; the prompts in ``agent_prompts``), the actions (``agent_steps``),
and here the loop that ties them together.
"""
from __future__ import annotations

import re
import time
from typing import Any

from pydantic import RootModel

from helpers.config import Config
from helpers.errors import BudgetExceededError, DeepSearchLabError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.query_dedup import QueryDeduper
from helpers.knowledge.retrieval import named_pages, search
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, make_llm
from helpers.prompts import PromptSet, as_prompt_set
from helpers.results import Hit, Result, TraceStep, traced
from helpers.strategies.agent_actions import (action_schema, allowed_actions, cite_sources, drop_repeated_sentences,
                                              has_substance)
from helpers.strategies.agent_budget import AgentBudget
from helpers.strategies.agent_choice import ActionChoice
from helpers.strategies.agent_memory import AgentMemory, QuestionQueue, quoted
from helpers.strategies.agent_prompts import AgentPrompter, describe_collections
from helpers.strategies.agent_steps import AgentActions
from helpers.strategies.answer import read_short_answer, tidy_answer
from helpers.strategies.evidence import EvidenceLog


class DeepSearchAgent(ActionChoice, AgentActions):
    """One run of the loop.  Use ``run_agent``; the class is here to be read and tested."""

    def __init__(self, question: str, config: Config, llm: LLM, store: VectorStore, embedder: Embedder, *,
                 collections: list[str] | None = None, prompts: PromptSet | dict | None = None,
                 answer_tokens: int | None = None,
                 memory_share: float = 0.2, max_visits: int = 2, passages_per_search: int | None = None,
                 snippet_chars: int = 300, document_chars: int = 3000):
        self.question = question.strip()
        self.config = config
        self.limits = config.agent
        self.store = store
        self.embedder = embedder
        self.collections = collections or store.list_collections()
        self.answer_tokens = answer_tokens or config.llm.max_tokens
        self.memory_share = memory_share
        self.max_visits = max_visits
        self.passages_per_search = passages_per_search or config.search.top_k
        self.snippet_chars = snippet_chars
        self.document_chars = document_chars

        self.prompts = as_prompt_set(prompts)
        self.memory = AgentMemory()
        self.budget = AgentBudget(llm, config.agent.token_budget, memory_share=memory_share,
                                  answer_tokens=self.answer_tokens, memory=self.memory)
        self.llm = self.budget.llm  # the run's own LLM: the caller's backend and ledger, this run's budget
        self.llm.repair_template = self.prompts.template("structured_repair")
        self.evidence = EvidenceLog()  # every search and read, for the run's source order
        self.queue = QuestionQueue(self.question, config.agent.queue_policy, config.agent.max_gap_questions)
        self.query_dedup = QueryDeduper(embedder, config.agent.dedup_threshold)
        self.question_dedup = QueryDeduper(embedder, config.agent.dedup_threshold)
        self.question_dedup.remember([self.question])
        self.trace: list[TraceStep] = []
        self.web_url = config.agent.web_search_url
        self.web_enabled = bool(self.web_url)
        self.step = 0
        self.answer_rejected = False  # the previous step's answer failed evaluation
        self.steps_since_answer = 0  # steps since the last answer attempt (``agent.draft_every``)
        self.stalls = 0  # stalled steps in a row (``agent.max_stalls``)
        self.requests: set[tuple] = set()  # every search, visit and sub-question request the model made
        self.search_stalled = False  # the previous step's search found nothing new
        self.checks: list[str] | None = None  # the evaluation plan, made at the first answer
        self.final_answer: str | None = None
        self.final_references: list[int] = []
        self.finish = ""
        self.beast_reason: str | None = None
        self.error: str | None = None
        self.prompter = AgentPrompter(self.question, self.prompts, self.llm, self.memory,
                                      answer_tokens=self.answer_tokens,
                                      collections_text=describe_collections(store, self.collections))

    # the loop -------------------------------------------------------------------
    def run(self) -> Result:
        started = time.perf_counter()
        try:
            self._search_question()
            self._loop()
        except DeepSearchLabError as exc:  # the backend or the database failed: say so, answer from memory
            self.error = f"{type(exc).__name__}: {exc}"
            self._fallback("error")
        return self._result(time.perf_counter() - started)

    def _search_question(self) -> None:
        """Search the question itself before the first step (no model call), so the run's
        evidence always holds what one plain search finds; the pages titled by the names the
        question mentions (``named_pages``, ``agent.pages`` each) come first."""
        names, pages = named_pages(self.store, self.embedder, self.question, self.collections, self.limits.pages)
        hits = search(self.store, self.embedder, self.question, self.collections, self.config.search, pages=pages)
        self.memory.queries.append(self.question)
        self.query_dedup.remember([self.question])
        self.evidence.add(self.question, hits)
        new_numbers = self.memory.learn_from_search([self.question], hits, self.step, self.snippet_chars)
        notes = ["the question itself, searched before the first step"]
        if pages:
            notes.append(f"pages found by title for {quoted(names)}: "
                         + ", ".join(dict.fromkeys(p.title for p in pages)))
        self._record_search([self.question], hits, [], notes, [self.question])
        self._diary(f"searched all collections for the question itself: {len(new_numbers)} passage(s).")

    def _loop(self) -> None:
        for step in range(1, self.limits.max_steps + 1):
            self.step = step
            trigger = self._beast_trigger(step, len(self.memory.bad_attempts))
            if trigger:
                self._beast_mode(trigger)
                return
            try:
                self._take_step(self.queue.next(step))
            except BudgetExceededError:
                self._beast_mode("token budget")
                return
            if self.final_answer is not None:
                return

    def _beast_trigger(self, step: int, bad_attempts: int) -> str | None:
        """Why ``step``, with ``bad_attempts`` rejected answers behind it, goes to beast mode, or ``None``."""
        if bad_attempts >= self.limits.max_bad_attempts:
            return "bad attempts"
        if step >= self.limits.max_steps:
            return "steps"
        return None

    def _take_step(self, question: str) -> None:
        due = self._draft_reason()
        allowed = allowed_actions(beast_mode=False, has_evidence=bool(self.memory.evidence),
                                  has_unvisited=bool(self.memory.unvisited()), queue_full=self.queue.is_full(),
                                  answer_rejected=self.answer_rejected, search_stalled=self.search_stalled,
                                  draft_due=due is not None)
        self.answer_rejected = self.search_stalled = False
        draft = allowed == ["answer"]
        notes = [f"draft due: {due}, so only answer is allowed"] if draft else []
        self.steps_since_answer += 1
        schema = action_schema(allowed, self.collections, self.web_enabled, self.max_visits)
        messages, trimmed = self.prompter.action_messages(
            question, allowed, memory_tokens=self.budget.memory_cap, web=self.web_enabled, max_visits=self.max_visits,
            gap_room=min(3, self.limits.max_gap_questions - len(self.queue.pending)),
            asked=self.question_dedup.texts[1:], draft=draft)
        reply, entry = self._ask("action", messages, schema, self.answer_tokens, notes=notes + trimmed,
                                 question=question, allowed=allowed)
        decision = reply.root if isinstance(reply, RootModel) else reply
        if decision is None or decision.action not in allowed:
            decision = self._default_decision(question, allowed)
            entry.notes.append(f"no usable action: doing '{decision.action}' instead")
        handlers = {"search": self._search, "visit": self._visit, "reflect": self._reflect,
                    "answer": self._answer}
        before = self._progress()
        handlers[decision.action](question, decision)
        stalled = self._stalled(decision, before)
        self.stalls = self.stalls + 1 if stalled else 0
        if stalled:
            entry.notes.append(f"stalled: {stalled} ({self.stalls} in a row)")

    def _beast_mode(self, reason: str) -> None:
        """All actions but answer are masked; the model must commit to an answer (not evaluated)."""
        self.beast_reason = reason
        messages, notes = self.prompter.final_messages(
            self.budget.final_memory_tokens(self.prompter.beast_prompt_tokens), web=self.web_enabled)
        schema = action_schema(["answer"], [])
        try:
            reply, _ = self._ask("beast answer", messages, schema, self.answer_tokens, final=True,
                                 notes=[f"beast mode: {reason}", *notes])
        except BudgetExceededError:
            reply = None
        if reply is not None and has_substance(reply.answer):
            self._accept(drop_repeated_sentences(reply.answer), list(reply.references), f"beast mode ({reason})")
        else:
            self._fallback(reason)

    def _fallback(self, reason: str) -> None:
        """No model answer at all: list the best sub-answers and passages found, with their numbers."""
        lines, ranked = self.memory.findings()
        if lines:
            answer = ("No checked answer could be written. The most relevant findings were:\n" + "\n".join(lines))
        else:
            answer = f"No answer could be found: no passage was found before the run stopped ({reason})."
        with traced(self.trace, self.llm.ledger, "fallback", self.step, reason=reason) as entry:
            entry.notes.append("beast mode gave no answer: the answer was assembled from the memory without the model")
        self._accept(answer, ranked, f"fallback ({reason}): answer assembled without the model")

    def _accept(self, answer: str, references: list[int], finish: str) -> None:
        self.final_answer, self.final_references, self.finish = answer, references, finish

    def _result(self, seconds: float) -> Result:
        answer, hits, notes = cite_sources(self.final_answer or "", self.final_references, self.memory)
        with traced(self.trace, self.llm.ledger, "finish", self.step) as entry:
            entry.parsed = {"finish": self.finish, "beast_mode": self.beast_reason}
            entry.notes.extend(notes)
        settings = {**self.limits.model_dump(), "model": self.config.llm.model,
                    "answer_tokens": self.answer_tokens, "memory_share": self.memory_share,
                    "max_visits": self.max_visits, "passages_per_search": self.passages_per_search,
                    "snippet_chars": self.snippet_chars,
                    "document_chars": self.document_chars, "collections": self.collections,
                    "finish": self.finish, "beast_mode": self.beast_reason, "steps": self.step,
                    "bad_attempts": len(self.memory.bad_attempts)}
        short = self._short_answer(hits) if self.final_answer and self.error is None else ""
        answer, sources = self.evidence.answer_sources(answer, hits)
        return Result(self.question, "deepsearch", answer, short, sources, self.trace, self.llm.ledger, seconds,
                      self.error, settings)

    def _short_answer(self, cited: list[Hit]) -> str:
        """The answer alone, read off the passages the final answer cites (else the best found) by the
        answer step every strategy shares (``read_short_answer``); on a spent budget, the answer's own
        first sentence, tidied."""
        passages = list({h.id: h for h in [*cited, *self.evidence.ranked()]}.values())[: self.config.search.top_k]
        try:
            reply, _, entry = read_short_answer(self.llm, self.question, passages, step="short answer",
                                                prompts=self.prompts)
        except BudgetExceededError as exc:
            self.trace.append(TraceStep("short answer", self.step, notes=[f"{exc}; the short answer is the "
                                                                          "answer's first sentence"]))
            return tidy_answer(re.split(r"(?<=[.!?])\s", self.final_answer or "", maxsplit=1)[0], self.question)
        entry.iteration = self.step
        self.trace.append(entry)
        return reply.answer

    # small helpers ------------------------------------------------------------------------------
    def _diary(self, text: str) -> None:
        self.memory.note(self.step, text)


def run_agent(question: str, config: Config, *, llm: LLM | None = None, store: VectorStore | None = None,
              embedder: Embedder | None = None, collections: list[str] | None = None,
              prompts: PromptSet | dict | None = None, **options: Any) -> Result:
    """Answer ``question`` with the DeepSearch agent loop; always returns a ``Result`` with an answer.

    ``config.agent`` sets the token budget, steps, bad-attempt cap, queue policy,
    gap-queue size, dedup threshold and web search.  ``prompts`` (a ``PromptSet`` or
    ``{name: text}``) replaces any ``agent_*`` prompt with an edited text.  ``options`` are
    ``DeepSearchAgent``'s keyword arguments: ``answer_tokens`` (reply room for
    answers, default ``config.llm.max_tokens``), ``memory_share`` (the share of the
    token budget the memory may take in one prompt, 0.2), ``max_visits`` (2),
    ``passages_per_search`` (the best hits kept from one search step's queries,
    default ``config.search.top_k``), ``snippet_chars`` (300) and ``document_chars`` (3000).
    """
    llm = llm or make_llm(config)
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    return DeepSearchAgent(question, config, llm, store, embedder, collections=collections, prompts=prompts,
                           **options).run()
