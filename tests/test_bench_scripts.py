"""Every benchmark script still runs (issue 44), in the quick tier.

Each script is loaded as ``make bench`` loads it and asked for ``--help``.  Then each runs end to
end on two questions (the demo benches on the demo question), in-process, into a temporary folder,
with the scripted model (a reply for the answer step; for whole strategies, the smallest reply each
step's schema allows) and the hash embedder in place of the real ones.  This checks their flow
(options, files, tables), not their figures, which come from the real model in ``bench/`` runs.
``NEEDS_THE_MODEL`` names the scripts that only measure the real model or the original DeepSearcher,
with the reason; they get the ``--help`` check alone.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers.config import PROJECT_ROOT
from helpers.evaluation import harness
from helpers.knowledge import embeddings
from helpers.models import llm as llm_module
from tests.hash_embedder import HashEmbedder
from tests.scripted import StepScriptedBackend

BENCH = PROJECT_ROOT / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "common")
SAMPLE = PROJECT_ROOT / "data" / "multihop_sample"
READ = {"asks_for": "a person", "facts": "Hester Lindqvist is the mayor of Marrowick [1]",
        "answer": "Hester Lindqvist", "sources": [1]}
NEEDS_THE_MODEL = {
    "bench_model_layer": "raw llama-cpp-python speed and structured output of the real GGUF models",
    "bench_floor": "the real model's prompt and generation speed on this CPU",
    "bench_prompt_lookup": "llama-cpp-python's speculative decoding (prompt lookup, the 0.5B drafting) against plain decoding",
    "bench_vs_deepsearcher": "the original DeepSearcher in its own virtual environment",
}


def load(name: str, monkeypatch) -> ModuleType:
    """``bench/<name>.py`` as a module, with ``bench/`` importable as the scripts expect."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_script_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(name: str, args: list, monkeypatch, capsys) -> str:
    """``python bench/<name>.py ARGS`` in this process; what it printed."""
    module = load(name, monkeypatch)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *map(str, args)])
    module.main()
    return capsys.readouterr().out


class AnyKey(dict):
    """The loaded-embedder cache with one embedder under every key."""

    def __init__(self, embedder):
        super().__init__()
        self.embedder = embedder

    def __contains__(self, key) -> bool:
        return True

    def __getitem__(self, key):
        return self.embedder


@pytest.fixture
def scripted(monkeypatch):
    """The scripted model and the hash embedder wherever the code asks for the configured ones, and the
    small multi-hop sample standing in for 2WikiMultiHopQA."""
    backend = StepScriptedBackend({"answer": READ})
    monkeypatch.setattr(llm_module, "get_backend", lambda config: backend)
    monkeypatch.setattr(embeddings, "_EMBEDDERS", AnyKey(HashEmbedder()))
    monkeypatch.setitem(harness.BENCHMARKS, "2wiki", (SAMPLE / "corpus.json", SAMPLE / "questions.json"))
    monkeypatch.setitem(harness.BENCHMARKS, "varied", (SAMPLE / "corpus.json", SAMPLE / "questions.json"))
    return backend


def test_every_script_is_checked_and_make_bench_names_real_scripts():
    assert set(NEEDS_THE_MODEL) <= set(SCRIPTS)
    assert "run_all" in SCRIPTS
    run_all = (BENCH / "run_all.py").read_text()
    named = [s for s in SCRIPTS if f'"{s}.py"' in run_all]
    assert named and all((BENCH / f"{s}.py").exists() for s in named)


@pytest.mark.parametrize("name", [s for s in SCRIPTS if s != "run_all"])  # run_all takes no options
def test_each_script_states_its_options(name, monkeypatch, capsys):
    module = load(name, monkeypatch)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--help"])
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert stop.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_the_multihop_bench_then_its_source_extracts_on_two_questions(scripted, tmp_path, monkeypatch, capsys):
    out = tmp_path / "multihop"
    printed = run("bench_multihop", ["--limit", 2, "--strategies", "naive,oracle", "--out", out], monkeypatch, capsys)
    assert "== 2wiki dev, 2 question(s)" in printed and "== varied dev, 2 question(s)" in printed  # each set apart
    assert "2wiki oracle reader (gold paragraphs): EM 0.500" in printed  # s1 right, the other wrong
    out = out / "2wiki"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["strategy"] for r in rows) == ["naive", "naive", "oracle", "oracle"]
    assert all(r["em"] == 1.0 for r in rows if r["id"] == "s1")  # the scripted answer is s1's gold
    assert {call["step"] for call in scripted.calls} == {"answer"}

    printed = run("extract_sources", [out, "--strategy", "naive"], monkeypatch, capsys)
    sources = out / "sources.jsonl"
    assert "2 question(s)" in printed and len(sources.read_text().splitlines()) == 2

    printed = run("bench_source_orders", [sources, "--questions", SAMPLE / "questions.json"], monkeypatch, capsys)
    assert printed.startswith("2 questions") and "R@5" in printed

    named_pages = load("bench_named_pages", monkeypatch)
    monkeypatch.setattr(named_pages, "BENCH_OUT", tmp_path / "named")
    monkeypatch.setattr(sys, "argv", ["bench_named_pages.py", "--sources", str(sources)])
    named_pages.main()
    printed = capsys.readouterr().out
    assert printed.startswith("2 questions") and "named pages first" in printed


def test_the_answer_goals_name_the_agent_and_the_chain_only_with_each_sets_goal(monkeypatch):
    goals = load("bench_multihop", monkeypatch).answer_goal_lines
    entry = {"em": 0.46, "f1": 0.5, "seconds": 2.0, "recall@5": 0.9, "by_type": {"bridge": {"em": 0.31}}}
    lines = goals({spec: entry for spec in ("naive", "deepsearcher:1", "deepsearch", "chain/hybrid")}, "varied")
    assert [line.split(":")[0] for line in lines] == ["varied deepsearch", "varied chain/hybrid"]  # no pipeline goal
    assert "EM 0.460 (goal >= 0.30: met)" in lines[0] and "NOT met" not in lines[1]
    lines = goals({spec: entry for spec in ("naive", "chain")}, "2wiki")
    assert "EM 0.460 (goal >= 0.5): NOT met" in lines[0] and "R@5" not in lines[0]


def test_the_evaluation_bench_on_two_questions(scripted, tmp_path, monkeypatch, capsys):
    out = tmp_path / "evaluation"
    printed = run("bench_evaluation", ["--limit", 2, "--strategies", "naive", "--questions", SAMPLE / "questions.json",
                                       "--corpus", SAMPLE / "corpus.json", "--out", out], monkeypatch, capsys)
    assert "2 question(s)" in printed and "em" in printed.split("\n== goals")[0]
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_the_answer_checks_bench_reads_kept_rows(monkeypatch, capsys):
    printed = run("bench_answer_checks", ["--out", BENCH / "results" / "multihop_agent_nostrict_2wiki"],
                  monkeypatch, capsys)
    assert "agent run(s)" in printed and "fail rate right / wrong" in printed


def test_the_storage_benches_on_a_small_corpus(scripted, tmp_path, monkeypatch, capsys):
    knowledge_base = load("bench_knowledge_base", monkeypatch)
    monkeypatch.setattr(knowledge_base, "BENCH_OUT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench_knowledge_base.py", "--copies", "1", "--repeats", "1", "--rows", "40",
                                      "--queries", "2"])
    knowledge_base.main()
    printed = capsys.readouterr().out
    assert "ingest / embedding %" in printed and "hybrid" in printed

    printed = run("bench_reingest", ["--megabytes", 0.02], monkeypatch, capsys)
    assert "only changed chunks embedded again" in printed and "count before = count after" in printed


def test_the_scale_bench_on_a_small_corpus(any_reply, tmp_path, monkeypatch, capsys):
    printed = run("bench_scale", ["--paragraphs", 300, "--sizes", "300,900", "--queries", 3, "--workers", "",
                                  "--out", tmp_path], monkeypatch, capsys)
    rows = [json.loads(line) for line in (tmp_path / "scale.jsonl").read_text().splitlines()]
    assert [r["part"] for r in rows] == ["ingest", "search", "search"] and rows[2]["chunks"] == 900
    assert all(r["dense p95 ms"] > 0 and r["hybrid p95 ms"] > 0 and r["disk MiB"] > 0 for r in rows[1:])
    assert "dense p95 at 900 chunks" in printed


@pytest.fixture(scope="module")
def bench_out(tmp_path_factory) -> Path:
    """One bench folder for this module's runs: the knowledge base the first one ingests, the next reuse."""
    return tmp_path_factory.mktemp("bench")


@pytest.fixture
def any_reply(scripted, bench_out, monkeypatch):
    """The scripted model answering every step with the smallest reply its schema allows, and the bench
    folder (knowledge bases, reports, traces) in ``bench_out``."""
    scripted.fill = True
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(importlib.import_module("common"), "BENCH_OUT", bench_out)
    return scripted


def test_the_pipeline_bench_on_the_demo_question(any_reply, bench_out, monkeypatch, capsys):
    pipeline = load("bench_pipeline", monkeypatch)
    monkeypatch.setattr(pipeline, "BENCH_OUT", bench_out)
    monkeypatch.setattr(sys, "argv", ["bench_pipeline.py", "--fast"])
    pipeline.main()
    printed = capsys.readouterr().out
    assert "goals for deepsearcher" in printed and (bench_out / "report_deepsearcher.md").exists()
    assert {"decompose", "route", "answer"} <= set(any_reply.steps())


def test_the_report_bench_on_the_demo_question(any_reply, monkeypatch, capsys):
    printed = run("bench_report", ["--fast", "--runs", 1], monkeypatch, capsys)
    assert "topics run 1" in printed and "story run 1" in printed and "goals (issue 58)" in printed
    assert "time ≤ 1.3× topics" in printed and "documented changes stated" in printed


def test_the_agent_bench_on_the_demo_question_and_two_more(any_reply, bench_out, monkeypatch, capsys):
    agent = load("bench_agent", monkeypatch)
    monkeypatch.setattr(agent, "BENCH_DB", str(bench_out / "milvus.db"))
    monkeypatch.setattr(sys, "argv", ["bench_agent.py", "--fast", "--questions", "2"])
    agent.main()
    printed = capsys.readouterr().out
    assert "How have The Simpsons changed over time?" in printed and '"em": ' in printed and "F1" in printed


def test_the_prompt_cache_bench_on_two_questions(any_reply, monkeypatch, capsys):
    printed = run("bench_prompt_cache", ["--fast", "--limit", 2, "--strategies", "chain,deepsearcher:1"], monkeypatch,
                  capsys)
    assert "prompt cache off vs on, 2 2Wiki dev question(s)" in printed and "deepsearcher:1" in printed
