"""The DeepSearch agent's actions (``DeepSearchAgent`` inherits these): search (with query
rewriting, dedup and the optional web search), visit, reflect and answer (with its evaluation
and the lesson a rejected answer leaves)."""
from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel

from helpers.errors import BudgetExceededError, VectorStoreError
from helpers.knowledge.retrieval import interleave, search
from helpers.knowledge.web import WebSearchUnavailable, web_search
from helpers.results import Hit, hit_summary, traced
from helpers.strategies.agent_actions import (MAX_QUERIES, MAX_QUERY_WORDS, Rewrite, drop_repeated_sentences,
                                              has_substance, is_keyword_query, looks_like_placeholder)
from helpers.strategies.agent_memory import BadAttempt, KnowledgeItem, numbered, one_line, quoted
from helpers.strategies.answer_checks import CheckResult, analyze_failure, evaluate_answer, plan_checks
from helpers.strategies.reports import content_words


class AgentActions:
    """search, visit, reflect and answer, acting on the agent's memory, queue and evidence."""

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
