"""The DeepSearch agent: masking, the question queue, query dedup, evaluation,
beast mode and the token budget with a scripted chat model and a small fake
knowledge base; plus one end-to-end run with the real 0.5B model (slow)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace
from urllib.parse import parse_qs, urlparse

import pytest
from pydantic import ValidationError
from scripted import StepScriptedBackend
from servers import free_port

from helpers.config import load_config, with_overrides
from helpers.errors import BackendUnreachableError, BudgetExceededError
from helpers.knowledge.embeddings import get_embedder
from helpers.knowledge.query_dedup import QueryDeduper
from helpers.knowledge.retrieval import interleave
from helpers.knowledge.store import VectorStore
from helpers.knowledge.web import WebSearchUnavailable, web_search
from helpers.models.llm import LLM
from helpers.prompts import prompt_version
from helpers.results import Hit, cited_numbers
from helpers.strategies.agent import run_agent
from helpers.strategies.agent_actions import (action_schema, allowed_actions, cite_sources, drop_repeated_sentences,
                                              has_substance, schema_actions)
from helpers.strategies.agent_budget import AgentBudget, NoRoomForCall
from helpers.strategies.agent_memory import AgentMemory, KnowledgeItem, QuestionQueue
from helpers.strategies.agent_prompts import TEMPLATE_SLACK
from helpers.strategies.answer_checks import evaluate_answer, plan_checks

QUESTION = "How did the ratings of The Simpsons change over time?"


# a scripted chat model and a tiny knowledge base ------------------------------------

def _hit(collection: str, source: str, index: int, text: str) -> Hit:
    return Hit(f"{source}#{index}", text, 0.0, collection, source, source.split("/")[-1], f"part {index}", index)


DOCS = {
    ("simpsons_reception", "reception/ratings.md"): [
        _hit("simpsons_reception", "reception/ratings.md", 0,
             "In its first season The Simpsons averaged 13.4 million households and ranked among Fox's top shows."),
        _hit("simpsons_reception", "reception/ratings.md", 1,
             "Ratings declined through the 2000s; by season 30 the show drew under 3 million viewers."),
    ],
    ("simpsons_production", "production/history.md"): [
        _hit("simpsons_production", "production/history.md", 0,
             "The Simpsons premiered in December 1989 after shorts on The Tracey Ullman Show."),
        _hit("simpsons_production", "production/history.md", 1,
             "In 2009 the show switched to high definition and a new opening sequence."),
    ],
}


class FakeStore:
    """Word-overlap search over ``docs`` (``DOCS`` unless given): a ``VectorStore`` without Milvus."""

    def __init__(self, docs: dict | None = None):
        self.docs = docs or DOCS

    def list_collections(self):
        return sorted({collection for collection, _ in self.docs})

    def info(self, name):
        return SimpleNamespace(description=f"Documents about {name.split('_')[1]}: ratings, history.", count=2)

    def search(self, name, query, embedder, k=5, mode="dense", ranker="rrf", vector=None):
        words = set(query.lower().split())
        found = []
        for (collection, _), chunks in self.docs.items():
            for chunk in chunks:
                overlap = len(words & set(chunk.text.lower().split()))
                if collection == name and overlap:
                    found.append(Hit(**{**chunk.to_dict(), "score": overlap / len(words)}))
        return sorted(found, key=lambda h: h.score, reverse=True)[:k]

    def source_chunks(self, collection, source):
        return list(self.docs[(collection, source)])

    def titles(self, name):
        return list(dict.fromkeys(h.title for (c, _), hits in self.docs.items() if c == name for h in hits))

    def titled_chunks(self, name, titles, vector):
        return [h for (c, _), hits in self.docs.items() if c == name for h in hits if h.title in titles]


def test_the_fake_store_is_a_vector_store():
    assert isinstance(FakeStore(), VectorStore)       # the protocol the strategies search through


def search(*queries: str) -> str:
    return json.dumps({"action": "search", "queries": list(queries)})


def answer(text: str, references: list[int]) -> str:
    return json.dumps({"action": "answer", "references": references, "answer": text})


def reflect(*questions: str) -> str:
    return json.dumps({"action": "reflect", "gap_questions": list(questions)})


def verdict(passed: bool) -> str:
    return json.dumps({"reasoning": "looks fine" if passed else "too vague, no numbers", "passed": passed})


PLAN_STRICT_ONLY = json.dumps({"definitive": False, "freshness": False, "plurality": False, "completeness": False})
ANALYSIS = json.dumps({"what_went_wrong": "no figures were given",
                       "next_step": "search viewer numbers per decade"})
GOOD_ANSWER = "Ratings fell from 13.4 million households in season one [1] to under 3 million by season 30 [2]."


@pytest.fixture(scope="module")
def embedder():
    return get_embedder(load_config().embedding)


def run_script(embedder, script, budget=6000, context_size=4096, prompts=None, store=None, **agent):
    config = load_config(overrides={"llm.max_tokens": 64, "search.top_k": 3, "agent.token_budget": budget,
                                    "agent.draft_every": 0, "agent.max_stalls": 0,  # tests that want drafts say so
                                    "agent.rewrite": "always",  # scripted rewrites; the test of the default says so
                                    "agent.strict_check": True,  # scripted strict verdicts; likewise
                                    **{f"agent.{key}": value for key, value in agent.items()}})
    script = {"short answer": {"asks_for": "a fact", "facts": "As the answer says [1]", "answer": "the short answer", "sources": [1]},
              **script}
    backend = StepScriptedBackend(script, context_size, tokens="words", message_overhead=6)
    result = run_agent(QUESTION, config, llm=LLM(backend, retries=1), store=store or FakeStore(), embedder=embedder,
                       prompts=prompts)
    return result, backend


def allowed_in(schema: dict) -> set[str]:
    return schema_actions(schema)


def fields_of(schema: dict, action: str) -> set[str]:
    """The property names of one action's branch in a reply schema."""
    branches = list(schema.get("$defs", {}).values()) or [schema]
    branch = next(b for b in branches if b["properties"]["action"]["const"] == action)
    return set(branch["properties"])


# masking ---------------------------------------------------------------------------------

def test_masking_rules():
    everything = dict(beast_mode=False, has_evidence=True, has_unvisited=True, queue_full=False,
                      answer_rejected=False)
    assert allowed_actions(**everything) == ["search", "visit", "reflect", "answer"]
    assert "visit" not in allowed_actions(**{**everything, "has_unvisited": False})
    assert "reflect" not in allowed_actions(**{**everything, "queue_full": True})
    assert "answer" not in allowed_actions(**{**everything, "answer_rejected": True})
    assert allowed_actions(**{**everything, "has_evidence": False}) == ["search", "visit"]
    assert allowed_actions(**{**everything, "search_stalled": True}) == ["visit", "reflect", "answer"]
    nothing_else = {**everything, "has_evidence": False, "has_unvisited": False, "search_stalled": True}
    assert allowed_actions(**nothing_else) == ["search"]  # never an empty choice
    assert allowed_actions(**{**everything, "beast_mode": True}) == ["answer"]


def test_schema_admits_only_allowed_actions_with_their_fields():
    schema = action_schema(["search", "reflect"], ["a", "b"])
    json_schema = schema.model_json_schema()
    assert allowed_in(json_schema) == {"search", "reflect"}
    assert "answer" not in json.dumps(json_schema)
    assert fields_of(json_schema, "search") == {"action", "queries", "collections"}
    assert fields_of(json_schema, "reflect") == {"action", "gap_questions"}
    assert schema.model_validate({"action": "reflect", "gap_questions": ["q?"]}).root.gap_questions == ["q?"]
    for bad in ({"action": "answer", "answer": "x"},                     # masked action
                {"action": "search", "queries": []},                      # an action without its payload
                {"action": "search", "queries": ["x"], "collections": ["not_a_collection"]}):
        with pytest.raises(ValidationError):
            schema.model_validate(bad)
    beast = action_schema(["answer"], []).model_json_schema()
    assert allowed_in(beast) == {"answer"} and "answer" in beast["required"]


# the question queue ------------------------------------------------------------------------

def test_front_queue_puts_new_gaps_first_and_the_original_last():
    queue = QuestionQueue("Q", "front", capacity=3)
    assert queue.next(1) == "Q"
    assert queue.add(["g1", "g2"]) == ["g1", "g2"]
    assert queue.items == ["g1", "g2", "Q"]
    assert queue.next(2) == "g1"
    queue.add(["g3", "g2", "Q"])  # repeats and the original are not queued twice
    assert queue.items == ["g3", "g2", "Q"]
    assert [queue.next(s) for s in (3, 4, 5, 6)] == ["g3", "g2", "Q", "Q"]
    assert queue.add(["a", "b", "c", "d"]) == ["a", "b", "c"] and queue.is_full()


def test_rotate_queue_cycles_with_the_step_number():
    queue = QuestionQueue("Q", "rotate", capacity=4)
    assert [queue.next(s) for s in (1, 2)] == ["Q", "Q"]
    queue.add(["g1", "g2"])
    assert queue.items == ["Q", "g1", "g2"]
    assert [queue.next(s) for s in (3, 4, 5, 6)] == ["Q", "g1", "g2", "Q"]
    queue.resolve("g1")
    queue.resolve("Q")  # the original never leaves
    assert queue.items == ["Q", "g2"]
    assert [queue.next(s) for s in (7, 8)] == ["g2", "Q"]


# query dedup (real embeddings) ---------------------------------------------------------------

def test_dedup_drops_near_duplicates_and_keeps_distinct_queries(embedder):
    dedup = QueryDeduper(embedder, threshold=0.86)
    dedup.remember(["simpsons ratings decline"])
    result = dedup.filter(["decline of Simpsons ratings", "sourdough starter feeding",
                           "history of the simpsons animation", "Simpsons animation history"])
    assert result.kept == ["sourdough starter feeding", "history of the simpsons animation"]
    assert [(d["query"], d["similar_to"]) for d in result.dropped] == [
        ("decline of Simpsons ratings", "simpsons ratings decline"),
        ("Simpsons animation history", "history of the simpsons animation")]
    assert all(d["similarity"] >= 0.86 for d in result.dropped)
    assert dedup.texts[-2:] == result.kept  # kept queries join the history
    assert dedup.filter(["sourdough starter feeding"]).kept == []


def test_repeated_search_is_dropped_then_search_is_masked_and_visit_reads_documents(embedder):
    script = {"action": [search("simpsons ratings"), search("ratings of the simpsons"),
                         json.dumps({"action": "visit", "visit": [1]})],
              "rewrite": [json.dumps({"queries": ["simpsons ratings", "simpsons season one households"]})],
              "beast answer": [answer(GOOD_ANSWER, [1, 2])]}
    result, backend = run_script(embedder, script, max_steps=4)
    own, *searches = result.steps("search")
    assert own.parsed["queries"] == [QUESTION] and own.iteration == 0  # the question itself, before step 1
    assert searches[0].parsed["queries"] == ["simpsons ratings", "simpsons season one households"]
    assert searches[1].parsed["queries"] == []  # the second request repeats the first search
    assert searches[1].dropped[0]["similar_to"] == "simpsons ratings"
    actions = backend.calls_for("action")
    assert "search" not in allowed_in(actions[2]["schema"])  # masked after a search that found nothing new
    visit = result.steps("visit")[0]
    first_passage = own.kept[0]  # passage [1], whose document the script asks to visit
    assert {hit["source"] for hit in visit.kept} == {first_passage["source"]}
    assert len(visit.kept) == len(DOCS[(first_passage["collection"], first_passage["source"])])
    assert "visit" not in allowed_in(backend.calls_for("beast answer")[0]["schema"])
    assert result.settings["beast_mode"] == "steps"


def test_the_question_s_own_search_brings_the_pages_its_names_title_first(embedder):
    # a page titled "The Simpsons" that shares no word with the question: only its title can find it
    page = _hit("simpsons_production", "wiki/The Simpsons", 0, "Matt Groening's animated sitcom about a family.")
    store = FakeStore({**DOCS, ("simpsons_production", "wiki/The Simpsons"): [page]})
    script = {"action": [answer(GOOD_ANSWER, [2, 3])], "evaluate plan": [PLAN_STRICT_ONLY],
              "check strict": [verdict(True)]}
    result, _ = run_script(embedder, script, store=store, max_steps=2)
    own = result.steps("search")[0]
    assert own.kept[0]["title"] == "The Simpsons" and len(own.kept) == 4  # the page, then the question's top 3
    assert any("The Simpsons" in note for note in own.notes)
    assert "The Simpsons" in {s.title for s in result.sources}
    result, _ = run_script(embedder, script, store=store, max_steps=2, pages=0)
    assert "The Simpsons" not in {h["title"] for h in result.steps("search")[0].kept}  # no lookup: never found


# evaluation and bad attempts ------------------------------------------------------------------

def test_rejected_answer_becomes_a_bad_attempt_and_masks_answer_next_step(embedder):
    script = {"action": [search("simpsons ratings"), answer("The ratings changed over the years [1].", [1]),
                         search("viewer numbers per decade"), answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["viewers season 30"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(False), verdict(True)],
              "analyze": [ANALYSIS]}
    result, backend = run_script(embedder, script, max_steps=8, max_bad_attempts=2)
    actions = backend.calls_for("action")
    assert "answer" in allowed_in(actions[1]["schema"])
    assert "answer" not in allowed_in(actions[2]["schema"])  # masked right after the rejection
    assert "answer" in allowed_in(actions[3]["schema"])
    prompt = actions[2]["messages"][-1]["content"]
    assert "Rejected answer 1 (step" in prompt and "search viewer numbers per decade" in prompt
    assert len(backend.calls_for("evaluate plan")) == 1  # the plan is made once per question
    assert result.settings["finish"] == "answer passed evaluation" and result.settings["bad_attempts"] == 1
    assert result.answer.startswith("Ratings fell")
    cited = [s.number for s in result.sources if s.cited]  # the answer's [n] are its sources' numbers
    assert cited_numbers(result.answer) == set(cited) and len(cited) == 2 and cited[0] == 1
    own_best = result.steps("search")[0].kept[0]["id"]  # the best passage found takes turns with the answer's,
    assert own_best in [s.chunk_id for s in result.sources[:2]]  # the question's best passage stays in the top two


def test_a_draft_is_required_after_draft_every_steps_and_evaluated(embedder):
    read = json.dumps({"action": "visit", "visit": [1]})
    script = {"action": [search("simpsons ratings"), search("first season households"),
                         answer("The ratings changed [1].", [1]), read, read, answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": [q]}) for q in ("simpsons ratings households", "season one ratings")],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(False), verdict(True)],
              "analyze": [ANALYSIS]}
    result, backend = run_script(embedder, script, budget=8000, max_steps=10, draft_every=2)
    actions = backend.calls_for("action")
    assert [allowed_in(a["schema"]) == {"answer"} for a in actions] == [False, False, True, False, False, True]
    draft = actions[2]["messages"][-1]["content"]
    assert "Time for a draft" in draft and "choose another action" not in draft
    notes = [note for step in result.trace for note in step.notes if note.startswith("draft due")]
    assert notes == ["draft due: 2 step(s) without an answer attempt, so only answer is allowed"] * 2
    assert len(backend.calls_for("check strict")) == 2  # a draft is evaluated like any answer
    assert result.settings["finish"] == "answer passed evaluation" and result.settings["bad_attempts"] == 1
    assert allowed_actions(beast_mode=False, has_evidence=True, has_unvisited=True, queue_full=False,
                           answer_rejected=False, draft_due=True) == ["answer"]
    assert "answer" not in allowed_actions(beast_mode=False, has_evidence=False, has_unvisited=False,
                                           queue_full=False, answer_rejected=False, draft_due=True)


def test_a_stalled_step_makes_the_next_one_answer(embedder):
    """The 1.5B model asked for the same search again and again until its budget ran out (2Wiki traces):
    a step that repeats an earlier request, or adds nothing, stalls; after max_stalls the next step answers."""
    script = {"action": [search("simpsons ratings"), search("simpsons ratings"), answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]})] * 2,
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(True)]}
    result, backend = run_script(embedder, script, max_steps=10, max_stalls=1)
    actions = backend.calls_for("action")
    assert [allowed_in(a["schema"]) == {"answer"} for a in actions] == [False, False, True]
    stalls = [note for step in result.trace for note in step.notes if note.startswith("stalled")]
    assert stalls == ["stalled: the same search was asked for before (1 in a row)"]
    assert [note for step in result.trace for note in step.notes if note.startswith("draft due")] == \
        ["draft due: 1 stalled step(s) in a row, so only answer is allowed"]
    assert result.settings["finish"] == "answer passed evaluation"


def test_checks_are_planned_per_question_run_one_by_one_and_stop_at_the_first_failure():
    asked = []

    def ask(step, messages, schema, max_tokens):
        asked.append((step, messages[-1]["content"]))
        replies = {"evaluate plan": {"definitive": True, "freshness": False, "plurality": True,
                                     "completeness": False},
                   "check definitive": {"reasoning": "commits", "passed": True},
                   "check plurality": {"reasoning": "one item for three", "passed": False}}
        return schema.model_validate(replies[step]) if step in replies else None

    assert plan_checks(ask, "Name three showrunners.") == ["definitive", "plurality"]
    asked.clear()
    checks = plan_checks(ask, "Name three showrunners.", strict=True)
    assert checks == ["definitive", "plurality", "strict"]
    evaluation = evaluate_answer(ask, "Name three showrunners.", "Al Jean [1].", "[1] Al Jean ran it.", checks)
    assert not evaluation.passed and evaluation.failed.name == "plurality"
    assert [step for step, _ in asked] == ["evaluate plan", "check definitive", "check plurality"]
    assert "<<<DATA" in asked[1][1]  # the answer is fenced
    skipped = evaluate_answer(ask, "q", "a", "", ["freshness", "strict"])  # no usable verdicts
    assert skipped.passed and not any(result.ran for result in skipped.results)
    assert plan_checks(lambda *call: None, "q") == ["definitive"]  # no usable plan
    assert plan_checks(lambda *call: None, "q", strict=True) == ["definitive", "strict"]


def test_by_default_only_the_planned_checks_run(embedder):
    """Without agent.strict_check an answer faces only the checks the plan chose: none here, so it is accepted."""
    script = {"action": [answer(GOOD_ANSWER, [1, 2])], "evaluate plan": [PLAN_STRICT_ONLY]}
    result, backend = run_script(embedder, script, max_steps=4, strict_check=False)
    assert result.steps("evaluate")[0].inputs["checks"] == []
    assert not [call for call in backend.calls if call["step"].startswith("check")]
    assert result.settings["finish"] == "answer passed evaluation"


def test_beast_mode_after_too_many_bad_attempts(embedder):
    script = {"action": [search("simpsons ratings"), answer("The ratings changed [1].", [1]),
                         search("viewer numbers"), answer("They changed a lot [2].", [2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["viewers season 30"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(False)], "analyze": [ANALYSIS],
              "beast answer": [answer(GOOD_ANSWER, [1, 2])]}
    result, backend = run_script(embedder, script, max_steps=10, max_bad_attempts=2)
    assert result.settings["beast_mode"] == "bad attempts" and result.settings["steps"] == 5
    # the first rejection is analysed; the second ends the loop, so no lesson call is made for it
    assert len(backend.calls_for("analyze")) == 1
    assert "no analysis call" in result.steps("evaluate")[-1].notes[0]
    beast = backend.calls_for("beast answer")
    assert len(beast) == 1 and allowed_in(beast[0]["schema"]) == {"answer"}
    assert len(backend.calls_for("check strict")) == 2  # beast-mode answers are not evaluated
    assert result.cited_sources


def test_gap_questions_are_worked_on_then_the_original_returns(embedder):
    script = {"action": [search("simpsons ratings"), reflect("What were first-season ratings?"),
                         answer("13.4 million households [1].", [1]), answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households viewers"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(True)]}
    result, backend = run_script(embedder, script, max_steps=8)
    actions = backend.calls_for("action")
    assert "<current-sub-question>" in actions[2]["messages"][-1]["content"]
    assert "<current-sub-question>" not in actions[3]["messages"][-1]["content"]
    assert "13.4 million households" in actions[3]["messages"][-1]["content"]  # the sub-answer is knowledge
    assert len(backend.calls_for("check strict")) == 1  # only the original question's answer is evaluated
    assert result.settings["finish"] == "answer passed evaluation"


# degrading, budget and the fallback ------------------------------------------------------------

def test_keyword_requests_are_searched_as_asked_and_questions_are_rewritten(embedder):
    script = {"action": [search("simpsons ratings"), search("How many households watched season one?"),
                         answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["season one households"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(True)]}
    result, backend = run_script(embedder, script, rewrite="questions")
    searches = result.steps("search")[1:]
    assert searches[0].parsed["queries"] == ["simpsons ratings"]  # a keyword request: no rewrite call
    assert any("not rewritten" in note for note in searches[0].notes)
    assert searches[1].parsed["queries"] == ["season one households"]  # a question: rewritten
    assert len(backend.calls_for("rewrite")) == 1 and result.steps("rewrite")[0].iteration == 2


def test_broken_rewrite_and_action_replies_degrade(embedder):
    script = {"action": ["no json here", "still none", search("season 30 viewers")],
              "rewrite": ["no queries today", json.dumps({"queries": ["tram network closure decision"]})],
              "beast answer": [answer(GOOD_ANSWER, [1])]}
    result, _ = run_script(embedder, script, max_steps=4)
    first = result.steps("action")[0]
    assert any("doing 'search' instead" in note for note in first.notes)
    rewrites = result.steps("rewrite")
    assert any("valid only at attempt 2" in note for note in rewrites[0].notes)
    assert any("share no word with the request" in note for note in rewrites[0].notes)  # a copied example
    assert any("rewriting gave nothing usable" in note for note in rewrites[0].notes)
    # the question was searched before step 1, so searching it again finds nothing new
    assert [step.parsed["queries"] for step in result.steps("search")] == [[QUESTION], [], ["season 30 viewers"]]
    assert result.answer and result.cited_sources


@pytest.mark.parametrize("budget", [1200, 1800, 2600, 4000])
def test_beast_mode_on_budget_and_the_budget_is_never_exceeded(embedder, budget):
    script = {"action": [search("simpsons ratings"), search("show history premiere"), search("high definition"),
                         search("viewers season 30"), search("first season households")],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["premiere december 1989"]}),
                          json.dumps({"queries": ["switched to high definition"]}),
                          json.dumps({"queries": ["under 3 million viewers"]})],
              "beast answer": [answer("Ratings fell [1] " + "and fell " * 80, [1])]}
    result, backend = run_script(embedder, script, budget=budget, max_steps=12)
    assert result.usage.total_tokens <= budget
    assert result.settings["beast_mode"] == "token budget"
    assert result.cut_short == ["the agent had to answer at once (token budget)"]
    assert result.answer and result.sources
    assert [step for step in backend.steps() if step != "short answer"][-1] == "beast answer"


def test_the_agent_budget_keeps_the_final_answer_s_tokens_from_other_calls():
    caller = LLM(StepScriptedBackend({"action": "x" * 400, "beast answer": "y" * 40}, tokens="words"))
    caller.chat([{"role": "user", "content": "an earlier run"}], step="action")
    spent = caller.ledger.total_tokens
    budget = AgentBudget(caller, 1000, memory_share=0.2, answer_tokens=100, memory=AgentMemory())
    assert budget.llm.ledger is caller.ledger and budget.memory_cap == 200
    assert budget.limit == spent + 1000 - TEMPLATE_SLACK and budget.tokens_left() == 1000 - TEMPLATE_SLACK
    reserve = budget.final_reserve(300)  # the final prompt, today's (nearly empty) memory, the reply
    assert 400 <= reserve < 400 + budget.memory_cap
    small = [{"role": "user", "content": "word " * 100}]
    budget.check_room(small, 100, final_prompt_tokens=300)  # fits beside what is kept back
    with pytest.raises(NoRoomForCall, match=f"{reserve} tokens kept for the final answer") as caught:
        budget.check_room(small * 5, 100, final_prompt_tokens=300)
    assert isinstance(caught.value, BudgetExceededError)  # callers catch both as one
    assert budget.final_memory_tokens(300) == min(200, budget.tokens_left() - 400)


def test_failed_beast_mode_falls_back_to_an_answer_from_memory(embedder):
    script = {"action": [search("simpsons ratings")],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]})],
              "beast answer": ["I refuse to write JSON"]}
    result, _ = run_script(embedder, script, max_steps=2)
    assert result.steps("fallback") and result.settings["finish"].startswith("fallback")
    assert "13.4 million households" in result.answer and result.sources[0].cited
    assert not result.failed


def test_a_backend_failure_is_reported_and_still_answered_from_memory(embedder):
    class DyingBackend(StepScriptedBackend):
        def complete(self, messages, *, step, **kwargs):
            if step == "action" and self.calls_for("action"):
                raise BackendUnreachableError("the model server went away")
            return super().complete(messages, step=step, **kwargs)

    config = load_config(overrides={"llm.max_tokens": 64, "search.top_k": 3})
    backend = DyingBackend({"action": [search("simpsons ratings")],
                            "rewrite": [json.dumps({"queries": ["simpsons ratings households"]})]},
                           4096, tokens="words", message_overhead=6)
    result = run_agent(QUESTION, config, llm=LLM(backend), store=FakeStore(), embedder=embedder)
    assert result.error.startswith("BackendUnreachableError") and result.failed
    assert result.steps("fallback") and result.cited_sources


class SearxngHandler(BaseHTTPRequestHandler):
    """Answers /search?q=...&format=json as a SearXNG instance does (its JSON API)."""
    asked: list[str] = []

    def do_GET(self):  # noqa: N802 (the name http.server calls)
        query = parse_qs(urlparse(self.path).query)
        type(self).asked.append(query["q"][0])
        body = json.dumps({"query": query["q"][0], "results": [
            {"title": "Simpsons ratings", "url": "https://example.org/ratings",
             "content": "About 13 million households watched in season 4."}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def searxng():
    server = HTTPServer(("127.0.0.1", free_port()), SearxngHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


WEB_SCRIPT = {"action": [json.dumps({"action": "search", "queries": ["simpsons ratings"], "web": True})],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]})],
              "beast answer": [answer(GOOD_ANSWER, [1])]}


def test_web_search_through_searxng_adds_the_results_as_evidence(embedder, searxng):
    assert "13 million households" in web_search("simpsons ratings", searxng)
    result, backend = run_script(embedder, WEB_SCRIPT, max_steps=3, web_search_url=searxng)
    assert "web" in fields_of(backend.calls_for("action")[0]["schema"], "search")
    web_items = [h for h in result.sources if h.collection == "web"]
    assert web_items and web_items[0].source == "web search: simpsons ratings households"
    assert "13 million households" in backend.calls_for("beast answer")[0]["messages"][-1]["content"]
    assert "simpsons ratings households" in SearxngHandler.asked          # the rewritten query went out


def test_an_unreachable_web_search_is_noted_and_the_run_goes_on(embedder):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(WebSearchUnavailable, match="check that SearXNG runs there"):
        web_search("simpsons", dead, timeout=2)
    result, backend = run_script(embedder, WEB_SCRIPT, max_steps=3, web_search_url=dead)
    actions = backend.calls_for("action")
    assert not [h for h in result.sources if h.collection == "web"]
    assert any("check that SearXNG runs there" in note for step in result.steps("search") for note in step.notes)
    assert "web" not in fields_of(actions[1]["schema"], "search") and result.answer


# memory and citations ------------------------------------------------------------------------------

def test_each_step_only_adds_to_the_end_of_the_prompt(embedder):
    """llama.cpp re-reads only what follows the longest start a prompt shares with an earlier one: the
    system message never changes within a run, and the research log only grows at its end."""
    script = {"action": [search("simpsons ratings"), reflect("Who was the showrunner in 1998?"),
                         search("show history premiere"), answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["premiere december 1989"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(True)]}
    result, backend = run_script(embedder, script, max_steps=6)
    actions = backend.calls_for("action")
    assert len(actions) == 4 and len({a["messages"][0]["content"] for a in actions}) == 1
    logs = [a["messages"][1]["content"].split("</research-log>")[0] for a in actions]
    assert all(later.startswith(earlier) and later != earlier for earlier, later in zip(logs, logs[1:]))
    assert logs[-1].index("Step 1: searched") < logs[-1].index("[K2]") < logs[-1].index("Step 2: noted")


def test_memory_trimming_keeps_the_prompt_inside_the_context(embedder):
    script = {"action": [search("simpsons ratings"), search("show history premiere"), search("high definition")],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["premiere december 1989"]}),
                          json.dumps({"queries": ["switched to high definition"]})],
              "beast answer": [answer(GOOD_ANSWER, [1])]}
    result, backend = run_script(embedder, script, context_size=700, max_steps=4)
    for call in backend.calls:
        prompt = sum(backend.count_tokens(m["content"]) + 6 for m in call["messages"])
        assert prompt + call["max_tokens"] <= backend.context_size
    assert any(note.startswith("memory trimmed") for step in result.trace for note in step.notes)


def test_memory_render_trims_oldest_first():
    memory = AgentMemory()
    for step in range(1, 6):
        memory.knowledge.append(KnowledgeItem(f"question {step}?", f"[{step}] " + f"fact{step} " * 60,
                                              [step], "search", step))
        memory.note(step, "searched something.")
    words = lambda text: len(text.split())  # noqa: E731
    full, notes = memory.render(words, 10_000)
    assert notes == [] and "fact1 " * 59 + "fact1" in full
    shortened, notes = memory.render(words, 300)
    assert words(shortened) <= 300 and "shortened" in notes[0]
    assert "fact1 " * 59 not in shortened and "fact5 " * 59 + "fact5" in shortened  # oldest first
    trimmed, notes = memory.render(words, 120)
    assert words(trimmed) <= 120 and "question 5?" in trimmed and "question 1?" not in trimmed
    assert "left out 3 older knowledge item(s)" in notes[0] and "(left out to save space: 3 older" in trimmed


def test_each_query_contributes_to_a_search_step():
    broad = [_hit("c", "broad", i, f"b{i}") for i in range(4)]
    precise = [_hit("c", "precise", i, f"p{i}") for i in range(2)]
    assert [h.source for h in interleave([broad, precise], 3)] == ["broad", "precise", "broad"]
    assert len(interleave([broad, broad], 10)) == 4  # each chunk once


def test_answer_cleaning_for_small_models():
    looped = "Ratings fell [1]. The show aged. Ratings fell [2]. The show aged. The end."
    assert drop_repeated_sentences(looped) == "Ratings fell [1]. The show aged. The end."
    assert not has_substance("[1], [2], [3]") and not has_substance("<answer>")
    assert has_substance("David Silverman directed it [4].") and has_substance("Al Jean [2]") and has_substance("1989")


def test_citations_are_renumbered_and_unknown_ones_removed():
    memory = AgentMemory()
    memory.add_evidence([_hit("c", f"s{i}", i, f"text {i}") for i in range(1, 6)])
    text, hits, notes = cite_sources("A [4]. B [2, 4]. C [9].", [2, 5], memory)
    assert text == "A [1]. B [2][1]. C ." and [h.source for h in hits] == ["s4", "s2", "s5"]
    assert notes and "9" in notes[0]
    text, hits, _ = cite_sources("No citations here.", [3], memory)
    assert text == "No citations here. [1]" and hits[0].source == "s3"


# end to end with the real model ----------------------------------------------------------------

@pytest.mark.slow
def test_real_model_run_finishes_within_budget_and_cites(simpsons_kb):
    config, store, _ = simpsons_kb
    config = with_overrides(config, {"agent.token_budget": 6000, "agent.max_steps": 4, "llm.max_tokens": 256})
    result = run_agent("Who directed The Simpsons Movie?", config, store=store)
    assert result.usage.total_tokens <= 6000
    assert result.settings["steps"] <= 4
    assert result.answer.strip() and result.cited_sources, result.to_json()[:3000]
    assert all(1 <= n <= len(result.sources) for n in _cited(result.answer))


def _cited(text: str) -> set[int]:
    from helpers.results import cited_numbers
    return cited_numbers(text)


def test_edited_prompts_reach_every_agent_call_and_the_trace_names_their_versions(embedder):
    edited = {"agent_rewrite_system": "You rewrite queries (edited).", "agent_check_system": "Strict (edited)."}
    script = {"action": [search("simpsons ratings"), answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(True)]}
    result, backend = run_script(embedder, script, max_steps=4, prompts=edited)
    assert backend.calls_for("rewrite")[0]["messages"][0]["content"] == edited["agent_rewrite_system"]
    assert backend.calls_for("check strict")[0]["messages"][0]["content"] == edited["agent_check_system"]
    rewrite = result.steps("rewrite")[0]
    assert prompt_version("agent_rewrite_system", edited["agent_rewrite_system"]) in rewrite.prompts
    assert any(v.startswith("agent_rewrite@") for v in rewrite.prompts)
    action = result.steps("action")[0]
    assert {v.split("@")[0] for v in action.prompts} >= {"agent_system", "agent_action", "agent_action_search"}
    assert "agent_beast" not in {v.split("@")[0] for v in action.prompts}   # measured, never sent here
