"""The DeepSearch agent: masking, the question queue, query dedup, evaluation,
beast mode and the token budget with a scripted chat model and a small fake
knowledge base; plus one end-to-end run with the real 0.5B model (slow)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from helpers.agent_memory import AgentMemory, KnowledgeItem, QuestionQueue
from helpers.config import load_config
from helpers.deepsearch_agent import action_schema, allowed_actions, cite_sources, run_deepsearch
from helpers.embeddings import get_embedder
from helpers.llm import LLM, Completion
from helpers.query_dedup import QueryDeduper
from helpers.vectorstore import Hit

QUESTION = "How did the ratings of The Simpsons change over time?"


# a scripted chat model and a tiny knowledge base ------------------------------------

class ScriptedBackend:
    """Replies chosen by the call's ``step`` name; the last reply of a step repeats.

    Tokens are words, for prompts and replies alike, and a reply longer than the
    ``max_tokens`` it is given is cut there, as a real model's would be.
    """

    name = "scripted"
    model = "script"

    def __init__(self, script: dict[str, list[str]], context_size: int = 4096):
        self.script = {step: list(replies) for step, replies in script.items()}
        self.context_size = context_size
        self.calls: list[dict] = []

    def complete(self, messages, *, schema, temperature, max_tokens, step):
        self.calls.append({"step": step, "messages": messages, "schema": schema, "max_tokens": max_tokens})
        if step not in self.script:
            raise AssertionError(f"the script has no reply for step {step!r}")
        replies = self.script[step]
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        words = reply.split()
        finish = "length" if len(words) > max_tokens else "stop"
        prompt_tokens = sum(self.count_tokens(m["content"]) + 6 for m in messages)
        return Completion(" ".join(words[:max_tokens]), prompt_tokens, min(len(words), max_tokens), 0.001, finish)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def steps(self, name: str) -> list[dict]:
        return [call for call in self.calls if call["step"] == name]


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
    """Word-overlap search over ``DOCS`` with the VectorStore methods the agent uses."""

    def list_collections(self):
        return sorted({collection for collection, _ in DOCS})

    def info(self, name):
        return SimpleNamespace(description=f"Documents about {name.split('_')[1]}: ratings, history.", count=2)

    def search(self, name, query, embedder, k=5, mode="dense", ranker="rrf"):
        words = set(query.lower().split())
        found = []
        for (collection, _), chunks in DOCS.items():
            for chunk in chunks:
                overlap = len(words & set(chunk.text.lower().split()))
                if collection == name and overlap:
                    found.append(Hit(**{**chunk.to_dict(), "score": overlap / len(words)}))
        return sorted(found, key=lambda h: h.score, reverse=True)[:k]

    def source_chunks(self, collection, source):
        return list(DOCS[(collection, source)])


def search(*queries: str) -> str:
    return json.dumps({"action": "search", "reason": "need facts", "queries": list(queries)})


def answer(text: str, references: list[int]) -> str:
    return json.dumps({"action": "answer", "reason": "enough facts", "answer": text, "references": references})


def reflect(*questions: str) -> str:
    return json.dumps({"action": "reflect", "reason": "missing parts", "gap_questions": list(questions)})


def verdict(passed: bool) -> str:
    return json.dumps({"reasoning": "looks fine" if passed else "too vague, no numbers", "passed": passed})


PLAN_STRICT_ONLY = json.dumps({"definitive": False, "freshness": False, "plurality": False, "completeness": False})
ANALYSIS = json.dumps({"what_went_wrong": "no figures were given",
                       "next_step": "search viewer numbers per decade"})
GOOD_ANSWER = "Ratings fell from 13.4 million households in season one [1] to under 3 million by season 30 [2]."


@pytest.fixture(scope="module")
def embedder():
    return get_embedder(load_config().embedding)


def run_script(embedder, script, budget=6000, context_size=4096, **agent):
    config = load_config(overrides={"llm.max_tokens": 64, "search.top_k": 3, "agent.token_budget": budget,
                                    **{f"agent.{key}": value for key, value in agent.items()}})
    backend = ScriptedBackend(script, context_size)
    result = run_deepsearch(QUESTION, config, llm=LLM(backend, retries=1), store=FakeStore(), embedder=embedder)
    return result, backend


def allowed_in(schema: dict) -> set[str]:
    action = schema["properties"]["action"]
    return set(action["enum"]) if "enum" in action else {action["const"]}


# masking ---------------------------------------------------------------------------------

def test_masking_rules():
    everything = dict(beast_mode=False, has_evidence=True, has_unvisited=True, queue_full=False,
                      answer_rejected=False)
    assert allowed_actions(**everything) == ["search", "visit", "reflect", "answer"]
    assert "visit" not in allowed_actions(**{**everything, "has_unvisited": False})
    assert "reflect" not in allowed_actions(**{**everything, "queue_full": True})
    assert "answer" not in allowed_actions(**{**everything, "answer_rejected": True})
    assert "answer" not in allowed_actions(**{**everything, "has_evidence": False})
    assert allowed_actions(**{**everything, "beast_mode": True}) == ["answer"]


def test_schema_enum_holds_only_allowed_actions():
    schema = action_schema(["search", "reflect"], ["a", "b"])
    json_schema = schema.model_json_schema()
    assert allowed_in(json_schema) == {"search", "reflect"}
    assert {"queries", "collections", "gap_questions"} <= set(json_schema["properties"])
    assert not {"answer", "visit", "references"} & set(json_schema["properties"])
    with pytest.raises(ValidationError):
        schema.model_validate({"action": "answer", "answer": "x"})
    with pytest.raises(ValidationError):
        schema.model_validate({"action": "search", "collections": ["not_a_collection"]})
    assert allowed_in(action_schema(["answer"], []).model_json_schema()) == {"answer"}


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


def test_agent_records_dropped_duplicate_queries_in_the_trace(embedder):
    script = {"action": [search("simpsons ratings"), search("ratings of the simpsons")],
              "rewrite": [json.dumps({"queries": ["simpsons ratings", "simpsons season one households"]})],
              "beast answer": [answer(GOOD_ANSWER, [1, 2])]}
    result, _ = run_script(embedder, script, max_steps=3)
    searches = result.steps("search")
    assert searches[0].parsed["queries"] == ["simpsons ratings", "simpsons season one households"]
    assert searches[1].parsed["queries"] == []  # the second request repeats the first search
    assert searches[1].dropped[0]["similar_to"] == "simpsons ratings"
    assert result.settings["beast_mode"] == "steps"


# evaluation and bad attempts ------------------------------------------------------------------

def test_rejected_answer_becomes_a_bad_attempt_and_masks_answer_next_step(embedder):
    script = {"action": [search("simpsons ratings"), answer("Ratings changed [1].", [1]),
                         search("viewer numbers per decade"), answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["viewers season 30"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(False), verdict(True)],
              "analyze": [ANALYSIS]}
    result, backend = run_script(embedder, script, max_steps=8, max_bad_attempts=2)
    actions = backend.steps("action")
    assert "answer" in allowed_in(actions[1]["schema"])
    assert "answer" not in allowed_in(actions[2]["schema"])  # masked right after the rejection
    assert "answer" in allowed_in(actions[3]["schema"])
    prompt = actions[2]["messages"][-1]["content"]
    assert "<bad-attempts>" in prompt and "search viewer numbers per decade" in prompt
    assert len(backend.steps("evaluate plan")) == 1  # the plan is made once per question
    assert result.settings["finish"] == "answer passed evaluation" and result.settings["bad_attempts"] == 1
    assert result.answer.startswith("Ratings fell") and [s.cited for s in result.sources] == [True, True]


def test_beast_mode_after_too_many_bad_attempts(embedder):
    script = {"action": [search("simpsons ratings"), answer("They changed [1].", [1]),
                         search("viewer numbers"), answer("They changed a lot [2].", [2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["viewers season 30"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(False)], "analyze": [ANALYSIS],
              "beast answer": [answer(GOOD_ANSWER, [1, 2])]}
    result, backend = run_script(embedder, script, max_steps=10, max_bad_attempts=2)
    assert result.settings["beast_mode"] == "bad attempts" and result.settings["steps"] == 5
    beast = backend.steps("beast answer")
    assert len(beast) == 1 and allowed_in(beast[0]["schema"]) == {"answer"}
    assert len(backend.steps("check strict")) == 2  # beast-mode answers are not evaluated
    assert result.cited_sources


def test_gap_questions_are_worked_on_then_the_original_returns(embedder):
    script = {"action": [search("simpsons ratings"), reflect("What were first-season ratings?"),
                         answer("13.4 million households [1].", [1]), answer(GOOD_ANSWER, [1, 2])],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households viewers"]})],
              "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(True)]}
    result, backend = run_script(embedder, script, max_steps=8)
    actions = backend.steps("action")
    assert "<current-sub-question>" in actions[2]["messages"][-1]["content"]
    assert "<current-sub-question>" not in actions[3]["messages"][-1]["content"]
    assert "13.4 million households" in actions[3]["messages"][-1]["content"]  # the sub-answer is knowledge
    assert len(backend.steps("check strict")) == 1  # only the original question's answer is evaluated
    assert result.settings["finish"] == "answer passed evaluation"


# degrading, budget and the fallback ------------------------------------------------------------

def test_broken_rewrite_and_action_replies_degrade(embedder):
    script = {"action": ["no json here", "still none", search("simpsons ratings")], "rewrite": ["no queries today"],
              "beast answer": [answer(GOOD_ANSWER, [1])]}
    result, _ = run_script(embedder, script, max_steps=3)
    first = result.steps("action")[0]
    assert any("searching the current question" in note for note in first.notes)
    assert any("rewriting gave nothing usable" in note for note in result.steps("rewrite")[0].notes)
    assert result.steps("search")[0].parsed["queries"] == [QUESTION]
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
    assert result.answer and result.sources
    assert backend.calls[-1]["step"] == "beast answer"


def test_failed_beast_mode_falls_back_to_an_answer_from_memory(embedder):
    script = {"action": [search("simpsons ratings")],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]})],
              "beast answer": ["I refuse to write JSON"]}
    result, _ = run_script(embedder, script, max_steps=2)
    assert result.steps("fallback") and result.settings["finish"].startswith("fallback")
    assert "13.4 million households" in result.answer and result.sources[0].cited
    assert not result.failed


def test_web_search_offline_is_noted_and_the_run_goes_on(embedder):
    reply = json.dumps({"action": "search", "queries": ["simpsons ratings"], "web": True})
    script = {"action": [reply], "rewrite": [json.dumps({"queries": ["simpsons ratings households"]})],
              "beast answer": [answer(GOOD_ANSWER, [1])]}
    result, backend = run_script(embedder, script, max_steps=3, web_search=True)
    actions = backend.steps("action")
    assert "web" in actions[0]["schema"]["properties"]
    web_items = [h for h in result.sources if h.collection == "web"]
    noted = any("web search" in note for step in result.steps("search") for note in step.notes)
    assert web_items or (noted and "web" not in actions[1]["schema"]["properties"])
    assert result.answer


# memory and citations ------------------------------------------------------------------------------

def test_memory_trimming_keeps_the_prompt_inside_the_context(embedder):
    script = {"action": [search("simpsons ratings"), search("show history premiere"), search("high definition")],
              "rewrite": [json.dumps({"queries": ["simpsons ratings households"]}),
                          json.dumps({"queries": ["premiere december 1989"]}),
                          json.dumps({"queries": ["switched to high definition"]})],
              "beast answer": [answer(GOOD_ANSWER, [1])]}
    result, backend = run_script(embedder, script, context_size=560, max_steps=4)
    for call in backend.calls:
        prompt = sum(backend.count_tokens(m["content"]) + 6 for m in call["messages"])
        assert prompt + call["max_tokens"] <= backend.context_size
    assert any(note.startswith("memory trimmed") for step in result.trace for note in step.notes)


def test_memory_render_trims_oldest_first():
    memory = AgentMemory()
    for step in range(1, 6):
        memory.knowledge.append(KnowledgeItem(f"question {step}?", f"[{step}] " + f"fact{step} " * 60,
                                              [step], "search", step))
        memory.diary.append(f"Step {step}: searched something.")
    words = lambda text: len(text.split())  # noqa: E731
    full, notes = memory.render(words, 10_000)
    assert notes == [] and "fact1 " * 59 + "fact1" in full
    trimmed, notes = memory.render(words, 200)
    assert words(trimmed) <= 200 and "question 5?" in trimmed and "question 1?" not in trimmed
    assert "left out" in notes[0]


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
    config = config.model_copy(update={
        "agent": config.agent.model_copy(update={"token_budget": 6000, "max_steps": 4}),
        "llm": config.llm.model_copy(update={"max_tokens": 256})})
    result = run_deepsearch("Who directed The Simpsons Movie?", config, store=store)
    assert result.usage.total_tokens <= 6000
    assert result.settings["steps"] <= 4
    assert result.answer.strip() and result.cited_sources, result.to_json()[:3000]
    assert all(1 <= n <= len(result.sources) for n in _cited(result.answer))


def _cited(text: str) -> set[int]:
    from helpers.trace import cited_numbers
    return cited_numbers(text)
