"""Evaluation metrics on hand-made cases, resumable runs, and the harness end to end."""
from __future__ import annotations

import json

import pytest

import helpers.evaluation.harness as evaluation
from helpers.config import PROJECT_ROOT, with_overrides
from helpers.errors import InputError
from helpers.evaluation.harness import (EvalQuestion, answer_matches, load_questions, parse_strategy, recall_at_k,
                                        run_evaluation, sample_by_type, score, summarise)
from helpers.results import Result

SAMPLE = PROJECT_ROOT / "data" / "multihop_sample"


def test_recall_counts_distinct_titles_in_order():
    retrieved = ["A", "A", "B", "C", "D"]
    assert recall_at_k(retrieved, ["A", "C"], 2) == 0.5      # first two distinct: A, B
    assert recall_at_k(retrieved, ["A", "C"], 5) == 1.0
    assert recall_at_k(retrieved, ["Z"], 5) == 0.0
    assert recall_at_k(retrieved, [], 5) is None               # unanswerable: no gold, no recall
    sources = ["data/simpsons/production/a.md", "data/simpsons/reception/b.md"]
    assert recall_at_k(sources, ["simpsons/reception/b.md"], 1, kind="source") == 0.0
    assert recall_at_k(sources, ["simpsons/reception/b.md"], 2, kind="source") == 1.0


def test_answer_matching_normalises_and_uses_aliases():
    q = EvalQuestion("1", "Who?", "Film Roman", aliases=["Film Roman Inc."])
    assert answer_matches("It was **film roman**, from season 4.", q)
    assert answer_matches("film roman inc", q) and score("Film Roman Inc.", q).em == 1.0
    assert not answer_matches("Klasky Csupo", q)
    unanswerable = EvalQuestion("2", "Budget?", "not in the corpus", type="unanswerable")
    assert answer_matches("The knowledge base does not contain the budget.", unanswerable)
    assert not answer_matches("It cost 75 million dollars.", unanswerable)


def test_loading_both_dataset_formats():
    sample = load_questions(SAMPLE / "questions.json")
    assert len(sample) >= 8 and all(q.gold and q.gold_kind == "title" for q in sample)
    assert len(sample[0].gold) == len(set(sample[0].gold))    # titles from supporting_facts, once each
    simpsons = load_questions(PROJECT_ROOT / "data" / "qa" / "simpsons_qa.jsonl")
    assert len(simpsons) >= 30 and simpsons[0].gold_kind == "source"
    assert {q.type for q in simpsons} >= {"single", "multi_part", "multi_hop", "unanswerable"}


def test_strategy_specs():
    assert parse_strategy("naive") == ("naive", "naive", {})
    assert parse_strategy("deepsearcher:2")[2] == {"pipeline.max_iter": 2}
    assert parse_strategy("deepsearch:8000")[2] == {"agent.token_budget": 8000}
    assert parse_strategy("chain:3/hybrid") == ("chain:3/hybrid", "chain", {"chain.max_hops": 3, "search.mode": "hybrid"})
    assert parse_strategy("agent")[1] == "deepsearch"                                  # the new name is accepted
    for bad, message in [("naive:3", "takes no parameter"), ("naiv", "unknown strategy"),
                         ("deepsearcher:x", "whole number"), ("deepsearcher:0", "whole number"),
                         ("chain/bm25", "dense' or 'hybrid")]:
        with pytest.raises(InputError, match=message):
            parse_strategy(bad)


def test_sampling_takes_one_question_of_each_type_in_turn():
    questions = [EvalQuestion(str(i), "?", "x", type=kind)
                 for i, kind in enumerate(["single", "single", "multi_hop", "unanswerable", "multi_hop", "other"])]
    assert [q.id for q in sample_by_type(questions, 4)] == ["2", "0", "3", "5"]   # the known types first, in order
    assert [q.id for q in sample_by_type(questions, 5)][-1] == "4"                # then the second of each type
    assert [q.id for q in sample_by_type(questions, None, ["multi_hop"])] == ["2", "4"]
    assert len(sample_by_type(questions)) == 6 and sample_by_type(questions, 3, ["missing"]) == []


def test_summary_means_and_failures():
    rows = [{"strategy": "naive", "id": "1", "type": "compositional", "failed": False, "em": 1.0, "f1": 1.0,
             "contains": True, "calls": 1, "prompt_tokens": 100, "completion_tokens": 10, "seconds": 1.0,
             "recall@2": 0.5},
            {"strategy": "naive", "id": "2", "type": "single", "failed": True, "em": 0.0, "f1": 0.0,
             "contains": False, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0,
             "recall@2": None}]
    entry = summarise(rows, ["naive"], [2])["naive"]
    assert entry["failures"] == 1 and entry["em"] == entry["contains"] == 0.5 and entry["recall@2"] == 0.5
    assert entry["recall@2 multi_hop"] == 0.5


def test_interrupted_run_resumes(monkeypatch, tmp_path, small_config):
    questions = load_questions(SAMPLE / "questions.json")[:3]
    calls = []

    def fake_run(name, question, config, **kwargs):  # stands in for the model: this test is about bookkeeping
        calls.append(question)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return Result(question, name, answer="Hester Lindqvist")

    monkeypatch.setattr(evaluation, "run_strategy", fake_run)
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(questions, ["naive"], small_config, tmp_path, progress=False)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 1
    summary = run_evaluation(questions, ["naive"], small_config, tmp_path, progress=False)
    assert len(calls) == 4                                   # 1 done + 1 interrupted + 2 remaining
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(q.id for q in questions)
    assert summary["naive"]["questions"] == 3 and (tmp_path / "evaluation.png").exists()
    saved = Result.load(tmp_path / "traces" / f"naive__{questions[0].id}.json")  # each run's trace is kept
    assert saved.answer == "Hester Lindqvist"


@pytest.mark.slow
def test_harness_on_the_tiny_sample_with_the_small_model(tmp_path, small_config):
    config = with_overrides(small_config, {"vector_db.uri": str(tmp_path / "milvus.db"), "pipeline.max_iter": 1,
                                           "pipeline.max_calls": 8})
    evaluation.prepare_corpus(SAMPLE / "corpus.json", config)
    questions = load_questions(SAMPLE / "questions.json")[:2]
    summary = run_evaluation(questions, ["naive", "deepsearcher:1"], config, tmp_path, progress=False)
    for spec in ("naive", "deepsearcher:1"):
        assert summary[spec]["questions"] == 2 and summary[spec]["failures"] == 0
        assert summary[spec]["recall@5"] is not None and summary[spec]["calls"] >= 1
    assert summary["naive"]["recall@5"] > 0      # the bridge entity's paragraph is found by plain search
    assert (tmp_path / "results.csv").exists() and (tmp_path / "summary.json").exists()


def fake_runs(monkeypatch, stop_after: int | None = None) -> list[str]:
    """``run_strategy`` replaced by runs that end in a varying order (a short sleep each), and that raise
    KeyboardInterrupt as run ``stop_after`` starts: this is about bookkeeping, not answers."""
    import threading
    import time as clock
    started, lock = [], threading.Lock()

    def fake_run(name, question, config, **kwargs):
        with lock:
            started.append(question)
            count = len(started)
        if stop_after is not None and count == stop_after:
            raise KeyboardInterrupt
        clock.sleep(0.05 * (hash(question) % 4))
        return Result(question, name, answer="Hester Lindqvist")

    monkeypatch.setattr(evaluation, "run_strategy", fake_run)
    return started


def test_parallel_rows_equal_one_workers_and_a_kill_loses_or_doubles_none(monkeypatch, tmp_path, small_config):
    server = with_overrides(small_config, {"llm.provider": "openai", "llm.base_url": "http://127.0.0.1:9/v1"})
    for shared in ("get_backend", "get_embedder", "open_store"):  # nothing real is asked: the runs are fakes
        monkeypatch.setattr(evaluation, shared, lambda config: None)
    questions = load_questions(SAMPLE / "questions.json")[:4]
    fake_runs(monkeypatch)
    run_evaluation(questions, ["naive", "chain"], server, tmp_path / "one", progress=False)
    fake_runs(monkeypatch, stop_after=5)
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(questions, ["naive", "chain"], server, tmp_path / "two", progress=False, workers=2)
    lines = (tmp_path / "two" / "results.jsonl").read_text().splitlines()
    assert 3 <= len(lines) <= 5 and all(json.loads(line)["answer"] for line in lines)  # whole rows only
    started = fake_runs(monkeypatch)
    summary = run_evaluation(questions, ["naive", "chain"], server, tmp_path / "two", progress=False, workers=2)
    assert len(started) == 8 - len(lines)                       # only what was not saved runs again
    one, two = ([json.loads(line) for line in (tmp_path / name / "results.jsonl").read_text().splitlines()]
                for name in ("one", "two"))
    assert sorted((r["strategy"], r["id"]) for r in two) == sorted((r["strategy"], r["id"]) for r in one)
    assert len(two) == 8 and summary["chain"]["questions"] == 4      # none lost, none doubled
    csv_order = [line.split(",")[:2] for line in (tmp_path / "two" / "results.csv").read_text().splitlines()[1:]]
    assert [tuple(pair) for pair in csv_order] == [(s, q.id) for q in questions for s in ("naive", "chain")]


def test_the_embedded_model_runs_one_question_at_a_time(small_config):
    with pytest.warns(UserWarning, match="answers one call at a time: running 1"):
        assert evaluation.usable_workers(small_config, 3) == 1
    with pytest.raises(InputError, match="1 or more"):
        evaluation.usable_workers(small_config, 0)


KILLED_RUN = """
import sys, time
sys.path.insert(0, {root!r})
import helpers.evaluation.harness as evaluation
from helpers.config import FAST_OVERRIDES, load_config
from helpers.results import Result

def fake_run(name, question, config, **kwargs):  # a run that takes a while, as a model's would
    time.sleep(0.3)
    return Result(question, name, answer="Hester Lindqvist")

evaluation.run_strategy = fake_run
for shared in ("get_backend", "get_embedder", "open_store"):
    setattr(evaluation, shared, lambda config: None)
config = load_config(overrides={{**FAST_OVERRIDES, "llm.temperature": 0.0, "llm.provider": "openai",
                                 "llm.base_url": "http://127.0.0.1:9/v1"}})  # the tests' profile (conftest)
questions = evaluation.load_questions({questions!r})
evaluation.run_evaluation(questions, ["naive", "chain"], config, {out!r}, progress=False, workers=2)
"""


def test_a_parallel_run_killed_at_any_moment_resumes_without_losing_or_doubling_a_row(monkeypatch, tmp_path,
                                                                                       small_config):
    import signal
    import subprocess
    import sys
    import time as clock
    out = tmp_path / "killed"
    script = KILLED_RUN.format(root=str(PROJECT_ROOT), questions=str(SAMPLE / "questions.json"), out=str(out))
    process = subprocess.Popen([sys.executable, "-c", script], cwd=PROJECT_ROOT)
    results = out / "results.jsonl"
    deadline = clock.monotonic() + 120
    while clock.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 3):
        clock.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # no handler runs: whatever is on disk is what a crash leaves
    process.wait(timeout=30)
    saved = [json.loads(line) for line in results.read_text().splitlines()]  # whole lines only
    questions = load_questions(SAMPLE / "questions.json")
    assert 3 <= len(saved) < 2 * len(questions)
    server = with_overrides(small_config, {"llm.provider": "openai", "llm.base_url": "http://127.0.0.1:9/v1"})
    for shared in ("get_backend", "get_embedder", "open_store"):
        monkeypatch.setattr(evaluation, shared, lambda config: None)
    started = fake_runs(monkeypatch)
    run_evaluation(questions, ["naive", "chain"], server, out, progress=False, workers=2)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(started) == 2 * len(questions) - len(saved)
    assert sorted((r["strategy"], r["id"]) for r in rows) == sorted((s, q.id) for q in questions
                                                                    for s in ("naive", "chain"))
