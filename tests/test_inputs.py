"""Bad input at the edges (config, CLI, evaluation files) gets one clear message and exit code 2,
before any model or long ingest starts; a finished answer is never lost to a failed side write."""
from __future__ import annotations

import json

import pytest

import helpers.cli as cli
import helpers.evaluation.harness as harness
import helpers.strategies.registry as registry
from helpers.cli import main
from helpers.config import load_config
from helpers.errors import ConfigError, DeepSearchLabError
from helpers.evaluation.harness import EvalQuestion, evaluate_one, read_rows
from helpers.results import Result

SAMPLE = "data/multihop_sample"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``python -m helpers ARGV``."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def stored(monkeypatch):
    """A knowledge base that holds a collection, for query tests whose strategies are stubbed."""
    monkeypatch.setattr(cli, "knowledge_base", lambda config: (None, ["stub"]))


@pytest.mark.parametrize("overrides, message", [
    ({"pipeline.max_iter": 0}, "pipeline.max_iter: Input should be greater than or equal to 1"),
    ({"pipeline.max_iter": -1}, "pipeline.max_iter"),
    ({"agent.token_budget": 1}, "agent.token_budget: Input should be greater than or equal to 500"),
    ({"search.top_k": -2}, "search.top_k"),
    ({"llm.context_size": -1}, "llm.context_size"),
    ({"chain.max_hops": 0}, "chain.max_hops"),
    ({"llm.modle": "x"}, "'llm.modle' is not a setting (did you mean 'llm.model'?)"),
    ({"llm.temprature": 0.1}, "did you mean 'llm.temperature'?"),
    ({"search.topk": 3}, "did you mean 'search.top_k'?"),
])
def test_settings_out_of_range_or_unknown_are_refused_by_name(overrides, message):
    with pytest.raises(ConfigError) as caught:
        load_config(environ={}, overrides=overrides)
    assert message in str(caught.value)


def test_unknown_keys_in_the_yaml_file_are_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("llm:\n  modle: x\nserch:\n  top_k: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert "'llm.modle' is not a setting (did you mean 'llm.model'?)" in str(caught.value)
    assert "'serch' is not a setting (did you mean 'search'?)" in str(caught.value)


@pytest.mark.parametrize("argv, message", [
    (["query", ""], "has no words in it"),
    (["query", " ?! ..."], "has no words in it"),
    (["query", "Who voices Homer?", "--max-iter", "-1"], "pipeline.max_iter"),
    (["query", "Who voices Homer?", "--max-iter", "0"], "pipeline.max_iter"),
    (["query", "Who voices Homer?", "--token-budget", "0"], "agent.token_budget"),
    (["query", "Who voices Homer?", "--strategy", "naiv"], "unknown strategy 'naiv'"),
])
def test_query_refuses_bad_input_before_any_model_call(capsys, monkeypatch, argv, message):
    monkeypatch.setattr(registry, "STRATEGIES", {})  # any run would fail loudly: none may start
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err and not out


@pytest.mark.parametrize("name, runs", [("pipeline", "deepsearcher"), ("agent", "deepsearch"), ("chain", "chain")])
def test_query_accepts_the_strategy_aliases(capsys, monkeypatch, stored, name, runs):
    monkeypatch.setattr(registry, "STRATEGIES", {
        key: (lambda q, c, key=key, **k: Result(q, key, answer=f"ran {key}")) for key in registry.STRATEGIES})
    code, out, _ = run_cli(capsys, "query", "Who voices Homer?", "--strategy", name)
    assert code == 0 and f"ran {runs}" in out


def test_search_refuses_a_negative_k(capsys):
    code, _, err = run_cli(capsys, "search", "Emmy awards", "-k", "-3")
    assert code == 2 and "expected a whole number of at least 1" in err


def test_search_on_an_empty_database_says_to_ingest_first(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DSL_MILVUS_URI", str(tmp_path / "empty.db"))
    code, out, err = run_cli(capsys, "search", "Emmy awards")
    assert code == 2 and "run `python -m helpers ingest` first" in err and not out


def test_a_finished_answer_is_printed_even_when_the_trace_cannot_be_written(capsys, monkeypatch, stored):
    monkeypatch.setattr(registry, "STRATEGIES", {"naive": lambda q, c, **k: Result(q, "naive", answer="Dan [1]")})
    code, out, err = run_cli(capsys, "query", "Who voices Homer?", "--strategy", "naive",
                             "--trace", "/proc/no/such/dir/trace.json")
    assert code == 0 and "Dan [1]" in out
    assert "warning: the trace was not saved" in err and "the answer above is complete" in err


@pytest.fixture
def eval_files(tmp_path):
    """Bad and good evaluation inputs, and an output folder that must stay empty."""
    files = {
        "broken.json": '[{"question": "a?", "answer": "b"',
        "broken.jsonl": '{"question": "a?", "answer": "b"}\n{"question": oops}\n',
        "no_answer.json": json.dumps([{"question": "a?"}]),
        "not_a_list.json": json.dumps({"title": "x", "text": "y"}),
        "empty.json": "[]",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("questions, corpus, extra, message", [
    ("broken.json", None, [], "not valid JSON"),
    ("broken.jsonl", None, [], "line 2: not valid JSON"),
    ("no_answer.json", None, [], "question 1: missing 'answer'"),
    ("empty.json", None, [], "expected a non-empty list of questions"),
    ("missing.json", None, [], "questions file"),
    (None, "not_a_list.json", [], 'expected a JSON list of {"title", "text"} paragraphs'),
    (None, "missing.json", [], "corpus file"),
    (None, None, ["--strategies", "naiv"], "unknown strategy 'naiv'"),
    (None, None, ["--strategies", "deepsearcher:x"], "whole number"),
    (None, None, ["--strategies", "naive:3"], "takes no parameter"),
    (None, None, ["--k", "2,x"], "argument --k: expected a whole number of at least 1, got 'x'"),
])
def test_eval_checks_every_input_before_the_ingest(capsys, eval_files, questions, corpus, extra, message):
    argv = ["eval", "--questions", str(eval_files / questions) if questions else f"{SAMPLE}/questions.json",
            "--corpus", str(eval_files / corpus) if corpus else f"{SAMPLE}/corpus.json",
            "--out", str(eval_files / "out"), *extra]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert not (eval_files / "out").exists()                 # nothing was ingested or written


def test_eval_limit_must_be_positive(capsys):
    code, _, err = run_cli(capsys, "eval", "--limit", "0")
    assert code == 2 and "at least 1" in err


def test_ctrl_c_during_eval_says_how_many_rows_are_saved(capsys, monkeypatch, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.jsonl").write_text('{"strategy": "naive", "id": "s1"}\n')
    monkeypatch.setattr(harness, "prepare_corpus", lambda corpus, config: ["corpus"])

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(harness, "run_evaluation", interrupted)
    code, _, err = run_cli(capsys, "eval", "--questions", f"{SAMPLE}/questions.json", "--corpus",
                           f"{SAMPLE}/corpus.json", "--out", str(tmp_path / "out"))
    assert code == 130 and "stopped; 1 row(s) saved" in err and "re-run the same command to resume" in err
    assert "KeyboardInterrupt" not in err


def test_ctrl_c_during_the_corpus_ingest_of_eval_says_so(capsys, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(harness, "prepare_corpus", interrupted)
    code, _, err = run_cli(capsys, "eval", "--questions", f"{SAMPLE}/questions.json", "--corpus",
                           f"{SAMPLE}/corpus.json", "--out", str(tmp_path / "out"))
    assert code == 130 and "stopped; 0 row(s) saved" in err and "KeyboardInterrupt" not in err


def test_an_unexpected_error_is_one_line_unless_debug(capsys, monkeypatch, stored):
    def broken(question, config, **kwargs):
        raise RuntimeError("a library fault")
    monkeypatch.setattr(registry, "STRATEGIES", {"naive": broken})
    code, out, err = run_cli(capsys, "query", "Who voices Homer?", "--strategy", "naive")
    assert code == 1 and not out and "Traceback" not in err
    assert "error: unexpected RuntimeError during `query`: a library fault" in err and "--debug" in err
    with pytest.raises(RuntimeError, match="a library fault"):
        main(["--debug", "query", "Who voices Homer?", "--strategy", "naive"])


def test_a_torn_last_line_is_set_aside_and_its_row_runs_again(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text('{"strategy": "naive", "id": "1"}\n{"strategy": "naive", "id": "2", "answ')
    with pytest.warns(UserWarning, match="the last line was torn"):
        rows = read_rows(results)
    assert [r["id"] for r in rows] == ["1"]
    assert results.read_text() == '{"strategy": "naive", "id": "1"}\n'
    assert (tmp_path / "results.torn").read_text().startswith('{"strategy": "naive", "id": "2"')
    results.write_text('{"strategy": "naive", "id": "1"}\nnot json\n{"strategy": "naive", "id": "3"}\n')
    with pytest.raises(DeepSearchLabError, match="line 2: not a JSON row"):
        read_rows(results)


def test_a_crashing_row_is_recorded_and_the_evaluation_goes_on(monkeypatch, tmp_path, small_config):
    def crash(name, question, config, **kwargs):
        raise RuntimeError("a library failed")
    monkeypatch.setattr(harness, "run_strategy", crash)
    question = EvalQuestion("q1", "Who voices Homer?", "Dan Castellaneta", gold=["voice_cast.md"], gold_kind="source")
    row = evaluate_one(question, "naive", small_config, [2, 5], judge=False, trace_dir=tmp_path)
    assert row["failed"] and row["error"] == "RuntimeError: a library failed" and row["em"] == 0.0
    saved = Result.load(tmp_path / "naive__q1.json")
    assert "RuntimeError: a library failed" in saved.settings["traceback"]


def test_a_failed_verdict_or_trace_write_keeps_the_row(monkeypatch, tmp_path, small_config):
    """The judge and the trace file come after the run: their failures are noted, the row is kept."""
    def judge_down(*args, **kwargs):
        raise ConnectionError("the judge's server went away")
    monkeypatch.setattr(harness, "run_strategy", lambda name, q, c, **k: Result(q, name, answer="Dan Castellaneta"))
    monkeypatch.setattr(harness, "judge_answer", judge_down)
    question = EvalQuestion("q1", "Who voices Homer?", "Dan Castellaneta", gold=["voice_cast.md"], gold_kind="source")
    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")
    with pytest.warns(UserWarning, match="was not saved"):
        row = evaluate_one(question, "naive", small_config, [2, 5], judge=True, trace_dir=blocked / "traces")
    assert row["em"] == 1.0 and row["contains"] and not row["failed"]
    assert row["judge"] == "no verdict" and row["judge_reason"] == "ConnectionError: the judge's server went away"


@pytest.mark.parametrize("name", ["../escape", ".", "has-dash", "9lives", "x" * 300])
def test_collection_names_milvus_refuses_are_named_before_any_file_is_read(capsys, tmp_path, monkeypatch, name):
    monkeypatch.setenv("DSL_MILVUS_URI", str(tmp_path / "kb.db"))
    code, _, err = run_cli(capsys, "ingest", f"{SAMPLE}/corpus.json", "--collection", name)
    assert code == 2 and "is not allowed: Milvus names start with a letter" in err and "Traceback" not in err
    assert not (tmp_path / "kb.db").exists()


@pytest.mark.parametrize("where, message", [
    ("/proc/self/kb.db", "is under /proc, a system file system"),
    ("/sys/kb.db", "is under /sys"),
    ("{tmp}/a_file.db", "is an existing file, not a database directory"),
    ("{tmp}/kb", "must end in .db"),
])
def test_a_milvus_lite_path_that_cannot_work_says_what_to_do(capsys, tmp_path, monkeypatch, where, message):
    (tmp_path / "a_file.db").write_text("not a database")
    monkeypatch.setenv("DSL_MILVUS_URI", where.format(tmp=tmp_path))
    code, _, err = run_cli(capsys, "search", "Emmy awards")
    assert code == 2 and message in err and "DSL_MILVUS_URI" in err and "Traceback" not in err


def test_a_model_file_that_is_not_gguf_or_is_truncated_is_named(tmp_path):
    from helpers.errors import ModelNotFoundError
    from helpers.models.llamacpp_backend import LlamaCppBackend
    text_file = tmp_path / "model.gguf"
    text_file.write_text("this is a README, not a model")
    with pytest.raises(ModelNotFoundError, match=r"is not a GGUF file \(it starts with b'this'"):
        LlamaCppBackend(str(text_file), context_size=512)
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ModelNotFoundError, match="may be truncated or damaged"):
        LlamaCppBackend(str(truncated), context_size=512)


KILLED_EVAL = """
import os, signal, sys
from pathlib import Path
import helpers.cli as cli
import helpers.evaluation.harness as harness
import helpers.strategies.registry as registry
from helpers.config import load_config
from helpers.evaluation.harness import EvalQuestion, run_evaluation
from helpers.results import Result

out, where, after = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
answered = []

def die_after(count):
    if after >= 0 and count > after:
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9: no cleanup, no atexit

def strategy(question, config, **kwargs):
    answered.append(question)
    if where == "run":
        die_after(len(answered))
    return Result(question, "naive", answer="Dan Castellaneta")

original_csv = harness.write_csv
def write_csv(*args):
    if where == "csv":
        die_after(1)
    return original_csv(*args)

registry.STRATEGIES["naive"] = strategy
harness.write_csv = write_csv
questions = [EvalQuestion(f"q{n}", f"Question {n}?", "Dan Castellaneta", gold=["voice_cast.md"], gold_kind="source")
             for n in range(6)]
run_evaluation(questions, ["naive"], load_config(), out, progress=False)
"""


@pytest.mark.parametrize("where, after", [("run", 0), ("run", 3), ("csv", 0)])
def test_kill_9_at_any_point_of_an_evaluation_then_a_rerun_completes_it(tmp_path, where, after):
    import signal
    import subprocess
    import sys
    script = tmp_path / "killed_eval.py"
    script.write_text(KILLED_EVAL)

    def child(*argv: str) -> int:
        return subprocess.run([sys.executable, str(script), str(tmp_path / "out"), *argv], capture_output=True,
                              text=True, timeout=300).returncode

    assert child(where, str(after)) == -signal.SIGKILL
    assert child("nowhere", "-1") == 0
    rows = read_rows(tmp_path / "out" / "results.jsonl")
    assert sorted(r["id"] for r in rows) == [f"q{n}" for n in range(6)]          # each row once
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["naive"]["questions"] == 6 and (tmp_path / "out" / "results.csv").exists()
