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
"""
from __future__ import annotations

import hashlib
import re
import time
from typing import Any

from pydantic import BaseModel, RootModel

from helpers.config import Config
from helpers.errors import (BudgetExceededError, ContextOverflowError, DeepSearchLabError, StructuredOutputError,
                            VectorStoreError)
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.query_dedup import QueryDeduper
from helpers.knowledge.retrieval import interleave, named_pages, search
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.knowledge.web import WebSearchUnavailable, web_search
from helpers.models.llm import LLM, make_llm
from helpers.prompts import PromptSet, as_prompt_set
from helpers.results import Hit, Result, TraceStep, hit_summary, traced
from helpers.strategies.agent_actions import (MAX_QUERIES, MAX_QUERY_WORDS, Rewrite, action_schema, allowed_actions,
                                              cite_sources, drop_repeated_sentences, has_substance, is_keyword_query,
                                              looks_like_placeholder, step_models)
from helpers.strategies.agent_budget import AgentBudget
from helpers.strategies.agent_memory import (AgentMemory, BadAttempt, KnowledgeItem, QuestionQueue, numbered, one_line,
                                             quoted)
from helpers.strategies.agent_prompts import AgentPrompter, describe_collections
from helpers.strategies.answer import read_short_answer, tidy_answer
from helpers.strategies.answer_checks import CheckResult, analyze_failure, evaluate_answer, plan_checks
from helpers.strategies.evidence import EvidenceLog
from helpers.strategies.reports import content_words


class DeepSearchAgent:
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

    def _draft_reason(self) -> str | None:
        """Why the next step must answer (``agent.max_stalls``, ``agent.draft_every``), or ``None``."""
        if 0 < self.limits.max_stalls <= self.stalls:
            return f"{self.stalls} stalled step(s) in a row"
        if 0 < self.limits.draft_every <= self.steps_since_answer:
            return f"{self.steps_since_answer} step(s) without an answer attempt"
        return None

    def _progress(self) -> tuple[int, ...]:
        """What a step can add: passages, sub-questions (asked ever), knowledge, answer attempts."""
        return (len(self.memory.evidence), len(self.question_dedup.texts), len(self.memory.knowledge),
                len(self.memory.bad_attempts))

    def _stalled(self, decision: BaseModel, before: tuple[int, ...]) -> str:
        """Why the step just taken stalled ('' when it did not): it repeated a request the model
        made before, or it added nothing.  An answer attempt never stalls."""
        if decision.action == "answer":
            return ""
        field = {"search": "queries", "visit": "visit", "reflect": "gap_questions"}[decision.action]
        payload = getattr(decision, field)
        key = (decision.action, *sorted(str(item).strip().lower() for item in payload))
        repeated = key in self.requests
        self.requests.add(key)
        if repeated:
            return f"the same {decision.action} was asked for before"
        return "" if self._progress() != before else f"the {decision.action} added nothing new"

    def _default_decision(self, question: str, allowed: list[str]) -> BaseModel:
        """What to do when the model gave no usable action: search the current question, else
        read the best unread document (searching regardless when neither is allowed)."""
        if "visit" in allowed and "search" not in allowed:
            number = self.memory.unvisited()[0][0]
            return step_models(["visit"], self.collections)["visit"](action="visit", visit=[number])
        return step_models(["search"], self.collections)["search"](action="search", queries=[question])

    # model calls and the budget ---------------------------------------------------
    def _ask(self, step_name: str, messages: list[dict], schema: type[BaseModel], max_tokens: int, *,
             final: bool = False, notes: tuple[str, ...] | list[str] = (),
             **inputs: Any) -> tuple[BaseModel | None, TraceStep]:
        """One structured call, traced: its reply (``None`` when the model gave no valid one) and
        its trace entry, for the caller's notes on what it did with the reply.

        Unless ``final``, the call must leave the tokens kept for the final answer
        (``AgentBudget.check_room``): ``NoRoomForCall`` when it cannot; retries after invalid
        replies cannot use them either (``BudgetExceededError``).
        """
        with traced(self.trace, self.llm.ledger, step_name, self.step, **inputs) as entry:
            entry.messages = messages
            entry.prompts = self.prompts.take_used()  # the prompts these messages were built from
            entry.notes.extend(notes)
            if not final:
                try:
                    self.budget.check_room(messages, max_tokens, self.prompter.beast_prompt_tokens)
                except BudgetExceededError as exc:
                    entry.notes.append(f"not run: {exc}")
                    raise
            try:
                reply = self.llm.structured(messages, schema, step=step_name, max_tokens=max_tokens, final=final)
            except StructuredOutputError as exc:
                entry.raw = exc.raw_replies[-1] if exc.raw_replies else None
                entry.notes.append(f"no valid reply after {len(exc.raw_replies)} attempt(s): {exc.last_error}")
                return None, entry
            except ContextOverflowError as exc:
                entry.notes.append(f"prompt too long: {exc}")
                return None, entry
            except BudgetExceededError as exc:
                entry.notes.append(f"token budget: {exc}")
                raise
            entry.raw, entry.parsed = reply.raw, reply.value.model_dump()
            if reply.attempts > 1:
                entry.notes.append(f"valid only at attempt {reply.attempts}")
            return reply.value, entry

    def _reply(self, step_name: str, messages: list[dict], schema: type[BaseModel],
               max_tokens: int) -> BaseModel | None:
        """``_ask`` as the answer checks use it: the reply only."""
        return self._ask(step_name, messages, schema, max_tokens)[0]

    # actions ---------------------------------------------------------------------------
    def _search(self, question: str, decision: BaseModel) -> None:
        requested = [q for q in decision.queries if not looks_like_placeholder(q)] or [question]
        chosen = [c for c in getattr(decision, "collections", []) if c in self.collections]
        collections = chosen or self.collections
        notes: list[str] = []
        if self.limits.rewrite == "questions" and all(is_keyword_query(q) for q in requested):
            rewritten = requested[:MAX_QUERIES]
            notes.append("not rewritten: every request is already a short keyword query")
        else:
            rewritten = self._rewrite(question, requested)
        # near-duplicates of earlier searches or of each other are dropped
        final = self.query_dedup.filter(rewritten)
        if not final.kept and rewritten != requested:
            fallback = self.query_dedup.filter(requested[:MAX_QUERIES])
            final.kept, final.dropped = fallback.kept, final.dropped + fallback.dropped
        groups: list[list[Hit]] = []
        for query in final.kept:
            self.memory.queries.append(query)
            try:
                groups.append(search(self.store, self.embedder, query, collections, self.config.search, cut=False))
                self.evidence.add(query, groups[-1])
            except VectorStoreError as exc:
                notes.append(f"search for {query!r} failed: {exc}")
        hits = interleave(groups, self.passages_per_search)
        new_numbers = self.memory.learn_from_search(final.kept, hits, self.step, self.snippet_chars)
        if self.web_enabled and getattr(decision, "web", False):
            for query in final.kept:
                new_numbers += self._web_search(query, notes)
        self._record_search(final.kept, hits, final.dropped, notes, requested, rewritten=rewritten,
                            collections=collections)
        self.search_stalled = not new_numbers
        if not final.kept:
            self._diary(f"asked to search {quoted(requested)}, but every query repeated an earlier search; "
                        "nothing was searched.")
            return
        where = "all collections" if not chosen else ", ".join(chosen)
        found = f"{len(new_numbers)} new passage(s) {numbered(new_numbers)}" if new_numbers else "no new passages"
        self._diary(f"searched {where} for {quoted(final.kept)}: {found}.")

    def _rewrite(self, question: str, requests: list[str]) -> list[str]:
        """Up to three better queries; the requests themselves when the model gives nothing usable."""
        messages = self.prompter.rewrite_messages(question, requests)
        reply, entry = self._ask("rewrite", messages, Rewrite, 120, requests=requests)
        proposed = [q.strip() for q in reply.queries if not looks_like_placeholder(q)] if reply else []
        # a query sharing no word with the question or the requests was copied from elsewhere
        anchor = content_words(" ".join([question, *requests]))
        queries = [q for q in proposed if content_words(q) & anchor and len(q.split()) <= MAX_QUERY_WORDS]
        unrelated = [q for q in proposed if q not in queries]
        if unrelated:
            entry.notes.append(f"dropped rewrites that share no word with the request or run over "
                               f"{MAX_QUERY_WORDS} words: {unrelated}")
        if not queries:
            entry.notes.append("rewriting gave nothing usable: searching the requested queries")
            return requests[:MAX_QUERIES]
        return queries[:MAX_QUERIES]

    def _web_search(self, query: str, notes: list[str]) -> list[int]:
        try:
            text = web_search(query, self.web_url)
        except WebSearchUnavailable as exc:
            notes.append(str(exc))
            self.web_enabled = False
            self._diary("web search is unavailable; only the knowledge base can be searched.")
            return []
        digest = hashlib.sha1(f"{query}\n{text}".encode()).hexdigest()[:16]
        hit = Hit(f"web-{digest}", text, 0.0, "web", f"web search: {query}", f"Web search: {query}", "", 0)
        numbers, new = self.memory.add_evidence([hit])
        self.evidence.add(f"web: {query}", [hit])
        self.memory.knowledge.append(KnowledgeItem(f'What does the web say about "{query}"?',
                                                   f"[{numbers[0]}] {one_line(text, 1200)}", numbers, "web",
                                                   self.step))
        return new

    def _record_search(self, queries: list[str], hits: list[Hit], dropped: list[dict], notes: list[str],
                       requested: list[str], **inputs: Any) -> None:
        with traced(self.trace, self.llm.ledger, "search", self.step, requested=requested, **inputs) as entry:
            entry.parsed = {"queries": queries}
            entry.kept = [hit_summary(h) for h in hits]
            entry.dropped = [{**d, "reason": "near-duplicate of an earlier query"} for d in dropped]
            entry.notes.extend(notes)

    def _visit(self, question: str, decision: BaseModel) -> None:
        unread = {(h.collection, h.source): h for _, h in self.memory.unvisited()}
        targets: list[Hit] = []
        for number in decision.visit:
            passage = self.memory.passage(number)
            key = (passage.collection, passage.source) if passage else None
            if key in unread and unread[key] not in targets:
                targets.append(unread[key])
        with traced(self.trace, self.llm.ledger, "visit", self.step, chosen=list(decision.visit)) as entry:
            if not targets:
                targets = [self.memory.unvisited()[0][1]]
                entry.notes.append("no chosen number points to an unread document: reading the best-scoring one")
            read = []
            for hit in targets[: self.max_visits]:
                self.memory.visited.add((hit.collection, hit.source))
                try:
                    chunks = self.store.source_chunks(hit.collection, hit.source)
                except VectorStoreError as exc:
                    entry.notes.append(f"could not read {hit.source}: {exc}")
                    continue
                read_chunks, numbers = self.memory.learn_from_document(hit, chunks, self.step, self.document_chars,
                                                                       entry.notes)
                self.evidence.add(f"read {hit.source}", read_chunks)
                entry.kept += [hit_summary(self.memory.passage(n)) for n in numbers]
                read.append(f'"{hit.title}" ({numbered(numbers[:1])}-[{numbers[-1]}])' if numbers else hit.title)
        self._diary(f"read {', '.join(read) or 'nothing'}.")

    def _reflect(self, question: str, decision: BaseModel) -> None:
        proposed = [q for q in decision.gap_questions if not looks_like_placeholder(q)]
        with traced(self.trace, self.llm.ledger, "reflect", self.step, proposed=proposed) as entry:
            fresh = self.question_dedup.filter(proposed, remember=False)
            added = self.queue.add(fresh.kept)
            self.question_dedup.remember(added)
            entry.parsed = {"added": added, "queue": list(self.queue.items)}
            entry.dropped = [{**d, "reason": "near-duplicate of an earlier question"} for d in fresh.dropped]
            entry.dropped += [{"query": q, "reason": "gap-question queue is full"}
                              for q in fresh.kept if q not in added]
        if added:
            self._diary(f"noted sub-questions to work on: {quoted(added)}.")
        else:
            self._diary("reflected but found no new sub-question.")

    def _answer(self, question: str, decision: BaseModel) -> None:
        self.steps_since_answer = 0
        answer = drop_repeated_sentences(decision.answer) if has_substance(decision.answer) else ""
        references = [n for n in decision.references if self.memory.passage(n) is not None]
        if not answer:
            self.answer_rejected = True
            self._diary("chose to answer but wrote no real answer.")
            return
        if question != self.question:
            self.memory.knowledge.append(KnowledgeItem(question, answer, references, "qa", self.step))
            self.queue.resolve(question)
            self._diary(f"answered the sub-question {quoted([question])}; saved as knowledge.")
            return
        try:
            if self.checks is None:
                self.checks = plan_checks(self._reply, self.question, self.prompts, strict=self.limits.strict_check)
            evaluation = evaluate_answer(self._reply, self.question, answer, self.memory.cited_text(answer, references),
                                         self.checks, self.prompts)
        except BudgetExceededError:
            self.beast_reason = "token budget"
            self._accept(answer, references, "beast mode (token budget): the answer just written was kept "
                                             "without a complete evaluation")
            return
        # a rejection after which the next step is beast mode needs no lesson: nothing would read it
        ends_loop = self._beast_trigger(self.step + 1, len(self.memory.bad_attempts) + 1) is not None
        with traced(self.trace, self.llm.ledger, "evaluate", self.step, checks=self.checks) as entry:
            entry.parsed = {"passed": evaluation.passed,
                            "results": [vars(result) for result in evaluation.results]}
            if not evaluation.passed and ends_loop:
                entry.notes.append("rejected; no analysis call, since beast mode answers next")
        if evaluation.passed:
            self._accept(answer, references, "answer passed evaluation")
            return
        failed = evaluation.failed
        problem, next_step = self._lesson(answer, failed, ends_loop)
        self.memory.bad_attempts.append(BadAttempt(self.question, answer, failed.name, failed.reasoning,
                                                   problem, next_step, self.step,
                                                   self.prompts.template("agent_bad_attempt")))
        self.answer_rejected = True
        self._diary(f"answered the question; the {failed.name} check rejected it: {one_line(failed.reasoning, 160)}")

    def _lesson(self, answer: str, failed: CheckResult, ends_loop: bool) -> tuple[str, str]:
        """What went wrong with a rejected answer and what to do next (``analyze_failure``); without
        a call when the rejection ends the loop."""
        if ends_loop:
            return failed.reasoning, "Answer once more from the passages found, fixing what was rejected."
        try:
            return analyze_failure(self._reply, self.question, answer, failed,
                                   [line.render() for line in self.memory.diary[-3:]], self.prompts)
        except BudgetExceededError:
            return failed.reasoning, "Find the missing facts before answering again."

    # endings -------------------------------------------------------------------------------
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
