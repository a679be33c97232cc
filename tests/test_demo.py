"""The demo shows its work as it goes: each step's line is printed when the step ends, before the
report; ``quiet`` prints the log after the run instead (control flow only: the pipeline is faked)."""
from __future__ import annotations

import helpers.demo as demo
from helpers.config import load_config
from helpers.models.usage import UsageLedger
from helpers.prompts import PromptSet
from helpers.results import Result, traced


def fake_pipeline(question, config, prompts=None):
    print(f"(edited: {sorted(prompts.edited) if prompts else []})")
    result = Result(question, "deepsearcher", usage=UsageLedger())
    with traced(result.trace, None, "decompose") as entry:
        entry.parsed = ["When did the show start?"]
    print("(the pipeline is still running)")
    with traced(result.trace, None, "reflect", iteration=1):
        pass
    result.answer = "## Report\n\nIt changed."
    return result


def run(monkeypatch, tmp_path, capsys, quiet, prompts=None):
    monkeypatch.setattr(demo, "run_pipeline", fake_pipeline)
    monkeypatch.setattr(demo, "ingest_manifest", lambda config: [])
    demo.run_demo(load_config(), tmp_path / "out", quiet=quiet, prompts=prompts)
    return capsys.readouterr().out


def test_the_demo_prints_each_step_as_it_ends(monkeypatch, tmp_path, capsys):
    out = run(monkeypatch, tmp_path, capsys, quiet=False)
    first = out.index("sub-queries: ['When did the show start?'] · 0 call(s)")
    assert first < out.index("(the pipeline is still running)") < out.index("[round 1] no gap found")
    assert out.index("[round 1] no gap found") < out.index("It changed.")
    assert (tmp_path / "out" / "trace.json").exists() and (tmp_path / "out" / "report.md").exists()


def test_quiet_prints_the_log_after_the_run(monkeypatch, tmp_path, capsys):
    out = run(monkeypatch, tmp_path, capsys, quiet=True)
    assert out.index("(the pipeline is still running)") < out.index("sub-queries: ['When did the show start?']")
    assert "call(s)" not in out.split("What the search did:")[1].split("It changed.")[0]


def test_edited_prompts_reach_the_demo_run_and_are_named(monkeypatch, tmp_path, capsys):
    edited = PromptSet({"reflect": "Find gaps in $question. $subqueries $findings"})
    out = run(monkeypatch, tmp_path, capsys, quiet=True, prompts=edited)
    assert f"Edited prompts: {edited.version('reflect')}" in out and "(edited: ['reflect'])" in out
