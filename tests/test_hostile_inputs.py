"""Hostile and faulty inputs, second pass (issue 61): each case of the probe fed again, asserting on
the outcome: a message that names the input and the fix, exit code 2 where nothing useful was done,
no row reused under other settings, and no file written outside the named folders.  None loads a
model: runs are stubbed, embeddings come from ``HashEmbedder``."""
from __future__ import annotations

import json
import re
from argparse import Namespace
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from servers import free_port

import helpers.cli as cli
import helpers.evaluation.harness as harness
import helpers.knowledge.ingest as ingest_module
import helpers.strategies.registry as registry
from helpers.config import load_config, with_overrides
from helpers.errors import ConfigError, InputError, ModelNotFoundError, VectorStoreError
from helpers.evaluation.harness import EvalQuestion, load_questions, read_rows, run_evaluation
from helpers.evaluation.rows import safe_name
from helpers.knowledge.embeddings import SentenceTransformerEmbedder
from helpers.knowledge.ingest import ingest
from helpers.knowledge.vectorstore import MilvusStore
from helpers.lab.display import _checked
from helpers.prompts import PromptSet, get_prompt, render
from helpers.results import Result

SAMPLE = "data/multihop_sample"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``python -m helpers ARGV``."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture
def no_runs(monkeypatch):
    """Any strategy run or corpus ingest fails the test: the input must be refused before one starts."""
    def never(*args, **kwargs):
        raise AssertionError("a run started")
    monkeypatch.setattr(registry, "STRATEGIES", {name: never for name in registry.STRATEGIES})
    monkeypatch.setattr(harness, "prepare_corpus", never)


@pytest.fixture
def stub_runs(monkeypatch):
    """Evaluation runs answer at once; returns the questions run, in order."""
    asked = []

    def run(name, question, config, **kwargs):
        asked.append(question)
        return Result(question, name, answer="Dan Castellaneta")
    monkeypatch.setattr(harness, "run_strategy", run)
    return asked


QUESTIONS = [EvalQuestion(f"q{n}", f"Who voices character {n}?", "Dan Castellaneta") for n in range(3)]


# 1. resume keyed by what the row depends on ------------------------------------------
def test_rows_made_under_other_settings_are_set_aside_not_reused(tmp_path, small_config, stub_runs):
    run_evaluation(QUESTIONS, ["naive"], small_config, tmp_path, progress=False)
    assert len(stub_runs) == 3
    run_evaluation(QUESTIONS, ["naive"], with_overrides(small_config, {"llm.threads": 1}), tmp_path, progress=False)
    assert len(stub_runs) == 3                                  # threads do not change a run: rows reused
    other_model = with_overrides(small_config, {"llm.model": "qwen2.5-coder-1.5b"})
    with pytest.warns(UserWarning, match="3 saved row\\(s\\) were made under other settings"):
        summary = run_evaluation(QUESTIONS, ["naive"], other_model, tmp_path, progress=False)
    assert len(stub_runs) == 6 and summary["naive"]["questions"] == 3
    edited = PromptSet({"answer_naive": get_prompt("answer_naive") + "\nBe brief."})
    with pytest.warns(UserWarning, match="other settings"):
        run_evaluation(QUESTIONS, ["naive"], other_model, tmp_path, progress=False, prompts=edited)
    run_evaluation(QUESTIONS, ["naive"], other_model, tmp_path, progress=False, prompts=edited, ks=(2, 5))
    assert len(stub_runs) == 9                                  # edited prompts: run again; the same again: reused
    seeded = with_overrides(other_model, {"llm.seed": 8})
    with pytest.warns(UserWarning, match="other settings"):
        run_evaluation(QUESTIONS[:1], ["naive"], seeded, tmp_path, progress=False)
    rows = read_rows(tmp_path / "results.jsonl")
    assert len(rows) == 10 and len({r["key"] for r in rows}) == 10   # the old rows stay, each under its key
    kept = sorted(p.name for p in (tmp_path / "traces" / "set_aside").iterdir())
    assert len(kept) == 7 and all(name.startswith("naive__q") for name in kept)   # and so do their traces
    assert {r["key"] for r in rows} == {name.split(".")[1] for name in kept} | {
        Result.load(p).settings["row_key"] for p in (tmp_path / "traces").glob("*.json")}


def test_rows_written_before_rows_were_keyed_are_run_again(tmp_path, small_config, stub_runs):
    (tmp_path / "results.jsonl").write_text(json.dumps({"strategy": "naive", "id": "q0", "em": 1.0}) + "\n")
    with pytest.warns(UserWarning, match="1 saved row\\(s\\) .* before rows were keyed"):
        run_evaluation(QUESTIONS[:1], ["naive"], small_config, tmp_path, progress=False)
    assert stub_runs == [QUESTIONS[0].question]


# 2, 3. ids are data: safe trace names, duplicates refused ------------------------------
def test_an_id_that_looks_like_a_path_stays_inside_out(tmp_path, small_config, stub_runs):
    out = tmp_path / "deep" / "er" / "out"
    question = EvalQuestion("../../../../escaped", "Who voices Homer?", "Dan Castellaneta")
    run_evaluation([question], ["naive"], small_config, out, progress=False)
    assert files_under(tmp_path) - {"deep", "deep/er"} == {"deep/er/out", *(f"deep/er/out/{name}" for name in
                                                                            files_under(out))}
    traces = list((out / "traces").iterdir())
    assert len(traces) == 1 and traces[0].name.startswith("naive__escaped-")
    assert Result.load(traces[0]).answer == "Dan Castellaneta"
    assert safe_name("s1") == "s1" and safe_name("83bf3b5a0bd911eb") == "83bf3b5a0bd911eb"  # plain ids unchanged
    assert safe_name("a/b") != safe_name("a-b") and "/" not in safe_name("/etc/passwd")


def test_two_questions_sharing_an_id_are_refused_up_front(capsys, tmp_path, small_config, stub_runs, no_runs):
    path = tmp_path / "dup.json"
    path.write_text(json.dumps([{"id": "x", "question": "A?", "answer": "a"}, {"id": "y", "question": "B?",
                                "answer": "b"}, {"id": "x", "question": "C?", "answer": "c"}]))
    with pytest.raises(InputError, match="questions 1 and 3 share the id 'x'"):
        load_questions(path)
    with pytest.raises(InputError, match="share the id 'q0'"):
        run_evaluation([QUESTIONS[0], QUESTIONS[0]], ["naive"], small_config, tmp_path / "out", progress=False)
    assert not stub_runs and not (tmp_path / "out").exists()
    code, _, err = run_cli(capsys, "eval", "--questions", str(path), "--corpus", f"{SAMPLE}/corpus.json",
                           "--out", str(tmp_path / "out"))
    assert code == 2 and "share the id 'x': give each question its own id" in err


# 4. question files: empty question, null answer ---------------------------------------
@pytest.mark.parametrize("record, message", [
    ({"id": "e", "question": "", "answer": "a"}, "question 1: the question '' has no words in it"),
    ({"id": "e", "question": None, "answer": "a"}, "has no words in it"),
    ({"id": "n", "question": "Who?", "answer": None}, "question 1: 'answer' is null: give the gold answer as text"),
    ({"id": "b", "question": "Who?", "answer": "  "}, "'answer' is \"  \""),
    ({"id": "l", "question": "Who?", "answer": ["a"]}, "'answer' is [\"a\"]"),
])
def test_an_empty_question_or_a_null_answer_is_refused_up_front(capsys, tmp_path, no_runs, record, message):
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps(record) + "\n")
    code, out, err = run_cli(capsys, "eval", "--questions", str(path), "--corpus", f"{SAMPLE}/corpus.json",
                             "--out", str(tmp_path / "out"))
    assert code == 2 and message in err and "Traceback" not in err and not out
    assert files_under(tmp_path) == {"questions.jsonl"}


# 5. edited prompts checked when loaded ------------------------------------------------
@pytest.mark.parametrize("name, text, message", [
    ("answer_structured", "Answer confidently.\nBe brief.\n",
     "edited prompt 'answer_structured': $question, $sources left out"),
    ("answer_structured", "Q: $question\nIt costs $5.\n$sources", "line 2: '$5' starts no placeholder (write $$"),
    ("reflect", "Gaps in $question\n$subqueries $findings\n$chunks", "line 3: $chunks is not filled by its step"),
    ("agent_check_system", "Check ${answer}.", "$answer is not filled by its step (it fills none)"),
])
def test_an_edited_prompt_its_step_cannot_fill_is_named_before_any_model(capsys, tmp_path, no_runs, name, text,
                                                                          message):
    with pytest.raises(InputError, match=re.escape(message)):
        PromptSet({name: text})
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({name: text}))
    code, out, err = run_cli(capsys, "query", "Who voices Homer?", "--prompts", str(path))
    assert code == 2 and f"{path}: edited prompt '{name}'" in err and message in err and not out
    ran = []
    with pytest.raises(InputError, match=f"edited prompt '{name}'"):
        _checked(name, ran.append)(text)                     # a notebook's prompt editor checks before its run
    assert not ran
    assert PromptSet({name: get_prompt(name) + "\nCosts $$5."}).edited  # a $$ and the shipped placeholders: fine


def test_a_stray_dollar_in_a_template_given_to_a_step_names_the_prompt_and_line():
    with pytest.raises(InputError, match="edited prompt 'judge': line 2: '\\$5' starts no placeholder"):
        render("judge", "$question $gold $answer\nIt costs $5", question="q", gold="g", answer="a")


# 6. ingest flags with no sources -------------------------------------------------------
def test_ingest_with_a_collection_but_no_sources_does_not_reingest_everything(capsys, monkeypatch):
    only = []
    monkeypatch.setattr(ingest_module, "ingest_manifest", lambda config, **kwargs: only.append(kwargs["only"]) or [])
    code, _, err = run_cli(capsys, "ingest", "--collection", "my_only", "--description", "mine")
    assert code == 2 and "no sources given for --collection my_only" in err and not only
    code, _, err = run_cli(capsys, "ingest", "--description", "mine")
    assert code == 2 and "name the files, folders or URLs to ingest" in err and not only
    known = ingest_module.read_manifest()[0]["name"]
    assert run_cli(capsys, "ingest", "--collection", known)[0] == 0 and only == [[known]]  # that one only


# 7, 8. empty strategies and an empty search ------------------------------------------------
@pytest.mark.parametrize("strategies, message", [
    ("", "--strategies '' names an empty strategy"),
    ("naive,,chain", "names an empty strategy"),
    ("naive, naive", "names naive more than once"),
])
def test_eval_refuses_an_empty_or_repeated_strategy(capsys, tmp_path, no_runs, strategies, message):
    code, _, err = run_cli(capsys, "eval", "--strategies", strategies, "--questions", f"{SAMPLE}/questions.json",
                           "--corpus", f"{SAMPLE}/corpus.json", "--out", str(tmp_path / "out"))
    assert code == 2 and message in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ["", "  ", "?!"])
def test_search_refuses_text_with_no_words_like_query(capsys, text):
    code, out, err = run_cli(capsys, "search", text)
    assert code == 2 and "has no words in it" in err and not out


# 9. an empty database ----------------------------------------------------------------------
def test_a_query_against_an_empty_database_says_to_ingest_first(capsys, tmp_path, monkeypatch, no_runs):
    monkeypatch.setenv("DSL_MILVUS_URI", str(tmp_path / "empty.db"))
    code, out, err = run_cli(capsys, "query", "Who voices Homer?")
    assert code == 2 and "holds no collection yet: run `python -m helpers ingest` first" in err and not out
    assert not (tmp_path / "empty.db").exists()               # the check creates no database


# 10. --fast and DSL_MODEL ------------------------------------------------------------------
def test_fast_and_dsl_model_in_conflict_are_refused(capsys, monkeypatch, no_runs):
    monkeypatch.setenv("DSL_MODEL", "qwen2.5-coder-1.5b")
    code, _, err = run_cli(capsys, "query", "Who voices Homer?", "--fast")
    assert code == 2 and "--fast picks the model qwen2.5-coder-0.5b, but DSL_MODEL=qwen2.5-coder-1.5b" in err
    assert "DSL_FAST=1 keeps DSL_MODEL" in err
    assert load_config(environ={"DSL_FAST": "1", "DSL_MODEL": "qwen2.5-coder-1.5b"}).llm.model == "qwen2.5-coder-1.5b"
    monkeypatch.setenv("DSL_MODEL", "qwen2.5-coder-0.5b")     # the same model: no conflict
    assert cli._overrides(Namespace(fast=True))["llm.model"] == "qwen2.5-coder-0.5b"


# 11, 13. the configuration --------------------------------------------------------------------
def test_a_yaml_file_whose_top_level_is_a_list_is_a_config_error(tmp_path):
    path = tmp_path / "deepsearch.yaml"
    path.write_text("- llm:\n    model: x\n")
    with pytest.raises(ConfigError, match="the top level is a list, not a mapping of sections"):
        load_config(path, environ={})


@pytest.mark.parametrize("overlap", [900, 1200])
def test_chunk_overlap_not_below_chunk_size_is_refused_by_the_config(overlap):
    with pytest.raises(ConfigError, match=f"chunk_overlap \\({overlap}\\) must be smaller than chunk_size \\(900\\)"):
        load_config(environ={}, overrides={"chunking.chunk_overlap": overlap})


# 12. a self-referencing symbolic link ----------------------------------------------------------
def test_a_self_referencing_symlink_is_skipped_and_the_folder_ingested(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nHomer works at the Springfield nuclear power plant.\n")
    (docs / "loop.md").symlink_to(docs / "loop.md")
    store = MilvusStore(str(tmp_path / "kb.db"))
    try:
        report = ingest([str(docs)], "docs", "docs", load_config(), store=store, embedder=HashEmbedder(),
                        progress=False)
    finally:
        store.close()
    assert report.files_read == 1 and report.chunks_added == 1
    assert report.skipped == [(str(docs / "loop.md"), "a symbolic link that loops or points nowhere; not read")]


# 14. an embedding folder with no model -------------------------------------------------------------
def test_an_embedding_folder_with_no_model_says_what_it_needs(tmp_path):
    with pytest.raises(ModelNotFoundError, match="holds no sentence-transformers model .*DSL_EMBEDDING_MODEL"):
        SentenceTransformerEmbedder(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")               # a model folder missing its weights
    with pytest.raises(ModelNotFoundError, match="cannot be loaded .*SentenceTransformer.save"):
        SentenceTransformerEmbedder(str(tmp_path))


# 15. a damaged Milvus Lite store ----------------------------------------------------------------------
@pytest.mark.parametrize("damaged", ["data/*.parquet", "indexes/*.idx"])
def test_a_damaged_collection_is_named_with_how_to_rebuild_it_and_the_others_work(tmp_path, damaged):
    db, docs = tmp_path / "kb.db", {}
    store = MilvusStore(str(db))
    for name in ("alpha", "beta"):
        docs[name] = tmp_path / name
        docs[name].mkdir()
        (docs[name] / "a.md").write_text(f"# {name}\n\nSome text about {name}.\n")
        ingest([str(docs[name])], name, name, load_config(), store=store, embedder=HashEmbedder(), progress=False)
    store.close()
    for file in (db / "collections" / "alpha" / "partitions" / "_default").glob(damaged):
        file.write_bytes(file.read_bytes()[:10])
    store = MilvusStore(str(db))
    try:
        if damaged.startswith("data"):
            with pytest.warns(UserWarning, match="collection 'alpha' .* is damaged"):
                assert store.list_collections() == ["beta"]
        assert store.search("beta", "text", HashEmbedder(), k=1)[0].title == "beta"
        with pytest.raises(VectorStoreError, match="collection 'alpha' of the Milvus Lite database .* is damaged "
                                                   ".*ingest --collection alpha --force"):
            store.search("alpha", "text", HashEmbedder(), k=1)
        ingest([str(docs["alpha"])], "alpha", "alpha", load_config(), store=store, embedder=HashEmbedder(),
               progress=False, force=True)                    # the fix the message gives works
        assert store.list_collections() == ["alpha", "beta"]
        assert store.search("alpha", "text", HashEmbedder(), k=1)[0].title == "alpha"
    finally:
        store.close()


# 16. a 20,000-character question -----------------------------------------------------------------------
def test_a_question_too_long_for_the_context_names_its_length(capsys, tmp_path, no_runs):
    question = "Who voices Homer? " * 1111 + "ab"                # 20,000 characters
    code, out, err = run_cli(capsys, "query", question)
    assert code == 2 and "the question is 20,000 characters long; at most 8,192 fit" in err and not out
    path = tmp_path / "long.json"
    path.write_text(json.dumps([{"id": "long", "question": question, "answer": "a"}]))
    code, _, err = run_cli(capsys, "eval", "--questions", str(path), "--corpus", f"{SAMPLE}/corpus.json",
                           "--out", str(tmp_path / "out"), "--fast")
    assert code == 2 and "question 'long' is 20,000 characters long; at most 4,096 fit" in err
    assert not (tmp_path / "out").exists()


# 17. a Milvus server address where none listens -------------------------------------------------------
def test_a_closed_milvus_port_says_what_to_do(capsys, monkeypatch):
    monkeypatch.setenv("MILVUS_URI", f"http://127.0.0.1:{free_port()}")
    code, _, err = run_cli(capsys, "search", "Emmy awards")
    assert code == 2 and "cannot open the vector database at http://127.0.0.1:" in err
    assert "Start the Milvus server at that address, or unset MILVUS_URI" in err and "Traceback" not in err
