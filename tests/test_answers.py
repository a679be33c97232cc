"""Every strategy's short answer, kept apart from its explanation; the oracle reader and the
title-lookup baseline; scored rows.  Control flow with a scripted model over a real Milvus Lite
store of the two-hop sample; the real 0.5B model reads one answer at the end."""
from __future__ import annotations

import pytest
from scripted import Seq, StepScriptedBackend

from helpers.config import with_overrides
from helpers.evaluation.harness import evaluate_one, load_questions, prepare_corpus
from helpers.evaluation.oracle import run_oracle
from helpers.knowledge.embeddings import get_embedder
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM
from helpers.strategies.chain import run_chain
from helpers.strategies.naive import run_naive
from helpers.strategies.pipeline import run_pipeline

SAMPLE = "data/multihop_sample"
READ = {"asks_for": "a person", "facts": "Hester Lindqvist is the mayor of Marrowick [1]", "answer": "Hester Lindqvist.", "sources": [1]}


@pytest.fixture(scope="module")
def sample_kb(small_config, tmp_path_factory):
    config = with_overrides(small_config, {"vector_db.uri": str(tmp_path_factory.mktemp("m") / "m.db")})
    names = prepare_corpus(f"{SAMPLE}/corpus.json", config)
    question = load_questions(f"{SAMPLE}/questions.json")[0]
    return config, open_store(config), get_embedder(config.embedding), names, question


def test_every_strategy_gives_the_answer_alone_beside_its_explanation(sample_kb):
    config, store, embedder, names, question = sample_kb
    chain_script = {"plan": {"names": ["Ardent Glassworks"], "steps": ["Where was Ardent Glassworks founded?",
                                                                      "Who is the mayor of #1?"]},
                    "read": Seq({"answer": "Valdmark"}, {"answer": "Hester Lindqvist"}), "answer": {"answer": "Hester Lindqvist [2]"}}
    pipeline_script = {"decompose": {"queries": ["mayor of the town"]}, "answer": READ,
                       "route": {"routes": [{"collection": names[0], "query": "mayor"}]}}
    runs = {
        "naive": lambda: run_naive(question.question, config, llm=LLM(StepScriptedBackend({"answer": READ})),
                                   store=store, embedder=embedder),
        "chain": lambda: run_chain(question.question, config, llm=LLM(StepScriptedBackend(chain_script)),
                                   store=store, embedder=embedder),
        "pipeline": lambda: run_pipeline(question.question, with_overrides(config, {
            "pipeline.answer": "short", "pipeline.max_iter": 1, "pipeline.relevance": "none"}),
            llm=LLM(StepScriptedBackend(pipeline_script)), store=store, embedder=embedder),
    }
    for name, run in runs.items():
        result = run()
        assert result.short_answer == "Hester Lindqvist", name      # tidied: no citation mark, no full stop
        assert result.answer != result.short_answer and "[" not in result.short_answer, name
        assert result.summary_json()["short_answer"] == "Hester Lindqvist"
        assert "**Answer: Hester Lindqvist**" in result.report_markdown()


def test_the_oracle_reads_the_gold_pages_and_the_title_baseline_puts_named_pages_first(sample_kb):
    config, store, embedder, names, question = sample_kb
    backend = StepScriptedBackend({"answer": READ})
    result = run_oracle(question.question, question.gold, config, llm=LLM(backend), store=store, embedder=embedder)
    assert [s.title for s in result.sources] == question.gold   # every gold page, in the order given, nothing else
    prompt = backend.calls[0]["messages"][0]["content"]
    assert all(f"] {title}" in prompt for title in question.gold)
    assert result.short_answer == "Hester Lindqvist"

    titled = run_naive(question.question, config, llm=LLM(StepScriptedBackend({"answer": READ})), store=store,
                       embedder=embedder, title_pages=1)
    assert titled.sources[0].title == "Ardent Glassworks" and titled.strategy == "naive_titles"
    assert "pages titled by the names ['Ardent Glassworks']" in titled.steps("retrieve")[0].notes[0]


def test_a_scored_row_holds_em_f1_and_where_it_was_measured(sample_kb, monkeypatch):
    config, store, embedder, names, question = sample_kb
    import helpers.evaluation.harness as harness
    monkeypatch.setattr(harness, "run_oracle", lambda q, gold, c, **kw: run_oracle(
        q, gold, c, llm=LLM(StepScriptedBackend({"answer": READ})), store=store, embedder=embedder))
    row = evaluate_one(question, "oracle", config, [2, 5], judge=False)
    assert (row["answer"], row["em"], row["f1"], row["contains"]) == ("Hester Lindqvist", 1.0, 1.0, True)
    assert row["explanation"].startswith("Hester Lindqvist is the mayor") and row["recall@2"] == 1.0
    assert {"model", "provider", "seed", "commit", "cpu", "date"} <= set(row)


@pytest.mark.slow
def test_the_real_small_model_reads_a_short_answer_off_the_gold_pages(sample_kb, small_backend):
    config, store, embedder, names, question = sample_kb
    result = run_oracle(question.question, question.gold, config, llm=LLM(small_backend), store=store,
                        embedder=embedder)
    assert not result.failed and result.usage.calls == 1
    assert 0 < len(result.short_answer.split()) <= 6, result.short_answer   # the answer alone, not a sentence
    assert result.short_answer.lower() in result.answer.lower() or result.cited_sources
