"""One prompt set, carried everywhere: every prompt is a file, an edited set reaches each strategy,
the evaluation and the CLI, and the trace names the version each step used."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from scripted import Seq, StepScriptedBackend

import helpers.cli as cli
import helpers.evaluation.harness as harness
import helpers.strategies.registry as registry
from helpers.cli import main
from helpers.config import with_overrides
from helpers.errors import InputError
from helpers.evaluation.ab import ABReport, paired_interval, run_prompt_ab, set_key
from helpers.evaluation.harness import EvalQuestion, read_rows, run_evaluation
from helpers.knowledge.embeddings import get_embedder
from helpers.models.llm import LLM, Budget
from helpers.models.model_files import CATALOGUE
from helpers.prompts import PromptSet, get_prompt, prompt_names, prompt_version
from helpers.results import Hit, Result, TraceStep
from helpers.strategies.answer import read_short_answer
from helpers.strategies.answer_checks import OPTIONAL_CHECKS, STRICT_CHECK
from helpers.strategies.chain import run_chain
from helpers.strategies.pipeline import run_pipeline

PACKAGE = Path(__file__).resolve().parents[1] / "helpers"
QUESTION = "How did the animation of The Simpsons change?"
HIT = Hit("h1", "Film Roman animated the show from 1992.", 0.9, "c", "anim.md", "Animation", "", 0)


def test_every_prompt_file_is_used_and_no_prompt_text_lives_in_python():
    code = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    checks = {f"agent_check_{name}" for name in [*OPTIONAL_CHECKS, STRICT_CHECK]}  # named by the check
    unused = [name for name in prompt_names() if f'"{name}"' not in code and name not in checks]
    assert not unused, f"prompt files no code renders: {unused}"
    inline = re.findall(r'"content":\s*\(?\s*f?"[A-Z][^"]{20,}', code)  # also f-strings and wrapped lines
    assert not inline, f"prompt text written in Python: {inline}"


def test_a_prompt_set_saves_loads_and_names_its_versions(tmp_path):
    edited = PromptSet({"reflect": "Edited: $question $subqueries $findings"})
    assert edited.version("reflect") != PromptSet().version("reflect") == prompt_version("reflect")
    assert edited.version("decompose") == prompt_version("decompose")       # the others stay as shipped
    loaded = PromptSet.load(edited.save(tmp_path / "prompts.json"))
    assert loaded.edited == edited.edited and loaded.text("decompose") == get_prompt("decompose")
    loaded.take_used()
    loaded.render("reflect", question="q", subqueries="s", findings="f")
    assert loaded.take_used() == [edited.version("reflect")] and loaded.take_used() == []
    with pytest.raises(InputError, match="unknown prompt name"):
        PromptSet({"reflct": "x"})
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="expected a JSON object"):
        PromptSet.load(tmp_path / "bad.json")


def test_an_edited_prompt_reaches_the_pipeline_and_its_trace(simpsons_kb):
    config, store, _ = simpsons_kb
    edited = {"reflect": "EDITED REFLECT. Question: $question\nAsked: $subqueries\nFound: $findings\n"
                         'Reply with JSON: {"gaps": []}'}
    backend = StepScriptedBackend({
        "decompose": {"queries": ["animation changes"]},
        "route": {"routes": [{"collection": "simpsons_production", "query": "digital colouring"}]},
        "relevance": {"relevant": [1]}, "reflect": {"gaps": []},
        "answer": {"asks_for": "a technique", "facts": "Digital ink and paint came in 1991 [1]", "answer": "Digital ink and paint",
                   "sources": [1]}})
    result = run_pipeline(QUESTION, with_overrides(config, {"pipeline.answer": "short", "pipeline.max_iter": 2}),
                          llm=LLM(backend, budget=Budget(max_calls=20)), store=store,
                          embedder=get_embedder(config.embedding), prompts=edited)
    assert backend.calls_for("reflect")[0]["messages"][0]["content"].startswith("EDITED REFLECT.")
    assert result.steps("reflect")[0].prompts == [prompt_version("reflect", edited["reflect"])]
    assert result.steps("decompose")[0].prompts == [prompt_version("decompose")]


def test_an_edited_free_text_prompt_reaches_the_fallback_after_a_failed_structured_reply():
    fallback = "Write freely about $question from these: $sources"
    backend = StepScriptedBackend({"answer": Seq("no json here", "Film Roman animated it [1]. Later seasons too.")})
    reply, _, step = read_short_answer(LLM(backend, retries=0), "Who animated it?", [HIT],
                                       prompts={"answer_naive": fallback})
    assert reply.explanation == "Film Roman animated it [1]. Later seasons too."
    assert reply.answer == "Film Roman animated it"  # the first sentence, tidied
    assert backend.calls[-1]["messages"][0]["content"].startswith("Write freely about Who animated it?")
    assert step.prompts[-1] == prompt_version("answer_naive", fallback) != prompt_version("answer_naive")


def test_an_edited_prompt_reaches_the_chain(simpsons_kb):
    config, store, _ = simpsons_kb
    edited = {"chain_plan": 'EDITED PLAN for $question. Reply with JSON: {"names": [], "steps": []}'}
    backend = StepScriptedBackend({"plan": {"names": [], "steps": ["Who voices Homer?"]},
                                   "read": Seq({"answer": "Dan Castellaneta"}), "answer": {"asks_for": "a person", "answer": "Dan"}})
    result = run_chain("Who voices Homer?", config, llm=LLM(backend), store=store,
                       embedder=get_embedder(config.embedding), prompts=edited)
    assert backend.calls_for("plan")[0]["messages"][0]["content"].startswith("EDITED PLAN for Who voices Homer?")
    assert result.steps("plan")[0].prompts == [prompt_version("chain_plan", edited["chain_plan"])]


def test_the_evaluation_and_the_cli_carry_a_prompt_set(capsys, monkeypatch, tmp_path, small_config):
    seen = []
    monkeypatch.setattr(cli, "knowledge_base", lambda config: (None, ["stub"]))  # the runs are stubbed

    def fake_run(name, question, config, **kwargs):  # stands in for the model: this is about plumbing
        seen.append(kwargs.get("prompts"))
        sent = [kwargs["prompts"].version("reflect")] if kwargs.get("prompts") else []
        return Result(question, name, answer="x", trace=[TraceStep("reflect", prompts=sent)])

    monkeypatch.setattr(harness, "run_strategy", fake_run)
    run_evaluation([EvalQuestion("1", "q?", "x")], ["naive"], small_config, tmp_path, progress=False,
                   prompts={"reflect": "edited $question $subqueries $findings"})
    assert seen[-1].edited == {"reflect": "edited $question $subqueries $findings"}
    edited_version = prompt_version("reflect", "edited $question $subqueries $findings")
    row = read_rows(tmp_path / "results.jsonl")[0]
    assert row["prompts"] == [edited_version]                                      # the row names what was sent
    assert (row["provider"], row["seed"], row["model_sha256"]) == (  # and the model file it was verified against
        "llamacpp", small_config.llm.seed, CATALOGUE[small_config.llm.model].sha256[:16])

    path = PromptSet({"answer_structured": "edited $question $sources"}).save(tmp_path / "p.json")
    monkeypatch.setattr(registry, "STRATEGIES", {"naive": lambda question, config, **kw: fake_run("naive", question,
                                                                                                  config, **kw)})
    assert main(["query", "Who voices Homer?", "--strategy", "naive", "--prompts", str(path)]) == 0
    assert seen[-1].edited == {"answer_structured": "edited $question $sources"}
    assert main(["query", "Who voices Homer?", "--prompts", str(tmp_path / "none.json")]) == 2
    assert "prompt file" in capsys.readouterr().err


def ab_row(id_: str, kind: str, answer: str, em: float, f1: float) -> dict:
    return {"id": id_, "type": kind, "question": f"q{id_}?", "gold_answer": "g", "answer": answer, "em": em, "f1": f1,
            "recall@5": 1.0, "calls": 2, "prompt_tokens": 100, "seconds": 1.0, "strategy": "chain"}


def test_a_prompt_ab_pairs_the_questions_lists_changed_answers_and_weighs_the_noise():
    shipped = [ab_row(str(n), "comparison" if n % 2 else "inference", "a", 0.0, 0.0) for n in range(20)]
    small = ABReport("chain", shipped, [{**r, "answer": "g", "em": 1.0, "f1": 1.0} if r["id"] == "3" else r
                                        for r in shipped], ["reflect@x"])
    assert [c["question"] for c in small.changed()] == ["q3?"]
    assert small.table()[0] == {**small.table()[0], "type": "all", "questions": 20, "em A": 0.0, "em B": 0.05}
    assert small.verdict().startswith("within noise") and "better in 1, worse in 0" in small.verdict()
    large = ABReport("chain", shipped, [{**r, "answer": "g", "em": 1.0, "f1": 1.0} for r in shipped], [])
    assert large.verdict().startswith("the edit is better") and len(large.changed()) == 20
    assert paired_interval([0.0] * 10) == (0.0, 0.0)


def test_a_prompt_ab_runs_each_set_into_its_own_folder(monkeypatch, tmp_path, small_config):
    seen = []

    def fake_run(name, question, config, **kwargs):  # stands in for the model: this is about plumbing
        prompts = kwargs["prompts"]
        seen.append(dict(prompts.edited))
        return Result(question, name, answer="x", short_answer="edited" if prompts.edited else "shipped")

    monkeypatch.setattr(harness, "run_strategy", fake_run)
    edited = PromptSet({"chain_read": get_prompt("chain_read") + "\nBe brief."})
    report = run_prompt_ab([EvalQuestion("1", "q?", "edited", type="inference")], "chain", small_config, edited,
                           tmp_path, progress=False)
    assert seen == [{}, edited.edited] and report.edits == [edited.version("chain_read")]
    assert {p.name for p in tmp_path.iterdir()} == {"shipped", set_key(edited)}
    assert report.changed()[0]["answer B"] == "edited" and report.table()[0]["em B"] == 1.0
    run_prompt_ab([EvalQuestion("1", "q?", "edited", type="inference")], "chain", small_config, edited, tmp_path,
                  progress=False)
    assert len(seen) == 2                                 # resumed: nothing is run twice
