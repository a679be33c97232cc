"""One edited prompt set reaches every run that uses it: each of the shipped prompts is edited
with a marker of its own, runs that together use every prompt are made with that set (a scripted
model: this is about plumbing), and each marker must be in something sent to the model.  No code
outside ``helpers/prompts.py`` reads a prompt file."""
from __future__ import annotations

import json
import re
from pathlib import Path

from scripted import Seq, StepScriptedBackend
from test_deepsearch_agent import ANALYSIS, GOOD_ANSWER, PLAN_STRICT_ONLY, answer, reflect, run_script, search, verdict

import helpers.evaluation.harness as harness
from helpers.config import with_overrides
from helpers.evaluation.harness import EvalQuestion, judge_answer
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.models.llm import LLM, Budget
from helpers.prompts import PROMPT_DIR, PromptSet, get_prompt, prompt_names
from helpers.strategies.chain import run_chain
from helpers.strategies.naive import run_naive
from helpers.strategies.pipeline import run_pipeline

PACKAGE = Path(__file__).resolve().parents[1] / "helpers"
MARKED = PromptSet({name: f"{get_prompt(name)}\n[marker of {name}]" for name in prompt_names()})
# the shipped prompt folder named in code: its constant, a path built to it, or a path to one of its files
READS_PROMPT_FILE = re.compile(r"""PROMPT_DIR|with_name\(["']prompts|["']helpers["']\s*/\s*["']prompts"""
                               r"""|prompts/[^\s"']*\.txt["']""")
ALL_CHECKS = json.dumps({"definitive": True, "freshness": True, "plurality": True, "completeness": True})


def sent(backend: StepScriptedBackend) -> str:
    return "\n".join(m["content"] for call in backend.calls for m in call["messages"])


def passage_points(messages):
    """A per-passage section reply: each passage's first sentence."""
    content = messages[0]["content"]
    texts = [re.match(r".*?[.!?](?=\s)", block, flags=re.DOTALL).group().replace("\n", " ")
             for block in content.split("<<<DATA\n")[1:]]
    numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", content, flags=re.MULTILINE)]
    return {"heading": "Findings", **{f"passage_{n}": text for n, text in zip(numbers, texts)}}


def pipeline_runs(kb) -> list[StepScriptedBackend]:
    config, store, _ = kb
    base = {"pipeline.route_check": False, "pipeline.subquery_focus": 0.0, "pipeline.report_sections": 2,
            "pipeline.max_iter": 2, "pipeline.relevance_accept": 1.0, "pipeline.relevance_threshold": -1.0,
            "pipeline.report_style": "sections", "pipeline.answer": "report"}
    script = {"decompose": {"queries": ["animation studios and digital colouring", "voice cast changes"]},
              "route": lambda messages: {"routes": [
                  {"collection": "simpsons_characters" if "voice" in messages[-1]["content"] else
                   "simpsons_production", "query": "animation studios voice cast"}]},
              "relevance": {"relevant": [1, 2]}, "reflect": {"gaps": []}, "section": passage_points,
              "overview": {"overview": "The show changed."}, "synthesize": "not a report",
              "story plan": lambda messages: {"title": "The show", **{key: "Animation studios" for key in re.findall(
                  r'"(theme_\d+)"', messages[-1]["content"])}},
              "conclusion": {"conclusion": "At first the show was short cartoons, later a series."}}
    backends = []
    for settings in ({}, {"pipeline.relevance": "per_chunk", "pipeline.report_style": "single"},
                     {"pipeline.section_points": "free", "pipeline.max_iter": 1, "pipeline.report_shape": "topics"},
                     {"pipeline.max_iter": 1, "pipeline.report_shape": "topics"}):
        per_chunk = settings.get("pipeline.relevance") == "per_chunk"
        backend = StepScriptedBackend({**script, "relevance": {"relevant": True}} if per_chunk else script)
        run_pipeline("How have The Simpsons changed over time?", with_overrides(config, {**base, **settings}),
                     llm=LLM(backend, budget=Budget(max_calls=30, max_prompt_tokens=30000)), store=store,
                     embedder=get_embedder(config.embedding), prompts=MARKED)
        backends.append(backend)
    return backends


def agent_runs(embedder: Embedder) -> list[StepScriptedBackend]:
    rewrite = [json.dumps({"queries": ["simpsons ratings households"]}), json.dumps({"queries": ["viewers"]})]
    rejected_then_beast = {
        "action": [search("simpsons ratings"), reflect("What were first-season ratings?"),
                   answer("13.4 million households [1].", [1]), answer("The ratings changed [1].", [1]),
                   search("viewer numbers"), answer("They changed a lot [2].", [2])],
        "rewrite": rewrite, "evaluate plan": [ALL_CHECKS], "check definitive": [verdict(True)],
        "check freshness": [verdict(True)], "check plurality": [verdict(True)],
        "check completeness": [verdict(True)], "check strict": [verdict(False)], "analyze": [ANALYSIS],
        "beast answer": [answer(GOOD_ANSWER, [1, 2])]}
    read = json.dumps({"action": "visit", "visit": [1]})
    draft = {"action": [search("simpsons ratings"), search("first season households"),
                        answer("The ratings changed [1].", [1]), read, read, answer(GOOD_ANSWER, [1, 2])],
             "rewrite": rewrite, "evaluate plan": [PLAN_STRICT_ONLY], "check strict": [verdict(False), verdict(True)],
             "analyze": [ANALYSIS]}
    backends = []
    for script, options in ((rejected_then_beast, {"max_steps": 10, "max_bad_attempts": 2}),
                            (draft, {"budget": 8000, "max_steps": 10, "draft_every": 2})):
        _, backend = run_script(embedder, script, prompts=MARKED, **options)
        backends.append(backend)
    return backends


def test_every_edited_prompt_reaches_the_model_in_a_run_that_uses_it(simpsons_kb, monkeypatch):
    config, store, _ = simpsons_kb
    backends = pipeline_runs(simpsons_kb) + agent_runs(get_embedder(config.embedding))
    # naive: the structured answer, the repair request after a bad reply, and the free-text fallback
    naive = StepScriptedBackend({"answer": Seq("no json", "no json", "no json", "Film Roman animated it.")})
    run_naive("Who animated The Simpsons?", config, llm=LLM(naive, retries=2), store=store,
              embedder=get_embedder(config.embedding), prompts=MARKED)
    # chain: a comparison the dates cannot decide, so the facts are answered by a call
    chain = StepScriptedBackend({
        "plan": {"names": ["Homer Simpson", "Ned Flanders"],
                 "steps": ["When did Homer Simpson first appear?", "When did Ned Flanders first appear?"]},
        "read": Seq({"answer": "Homer Simpson"},       # names its subject: asked once more (chain_reread)
                    {"answer": "Springfield"}),        # no date, asked when: asked once more (chain_rekind)
        "reread": Seq({"answer": "the 1980s shorts"}, {"answer": "the 1990s"}),
        "answer": {"asks_for": "a character", "answer": "Ned Flanders"}})
    run_chain("Which character appeared first, Homer Simpson or Ned Flanders?", config, llm=LLM(chain), store=store,
              embedder=get_embedder(config.embedding), prompts=MARKED)
    # chain: a family relation, read off the family the model writes down (chain_family)
    family = StepScriptedBackend({"family": {"father": "Abe Simpson", "mother": "Mona Simpson", "spouses": [],
                                             "children": [], "siblings": []},
                                  "answer": {"asks_for": "a person", "answer": "Mona Simpson"}})
    run_chain("Who is the mother of Homer Simpson?", config, llm=LLM(family), store=store,
              embedder=get_embedder(config.embedding), prompts=MARKED)
    judge = StepScriptedBackend({"judge": {"verdict": "correct", "reason": "same person"}})
    monkeypatch.setattr(harness, "make_llm", lambda config: LLM(judge))
    judge_answer(EvalQuestion("1", "Who voices Homer?", "Dan Castellaneta"), "Dan Castellaneta", config,
                 MARKED.template("judge"))
    text = "\n".join(sent(b) for b in [*backends, naive, chain, family, judge])
    missing = [name for name in prompt_names() if f"[marker of {name}]" not in text]
    assert not missing, f"edited prompts that never reached the model: {missing}"
    assert len(prompt_names()) >= 40


def test_no_code_reads_a_prompt_file_but_the_prompt_module():
    readers = [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
               if path.name != "prompts.py" and READS_PROMPT_FILE.search(path.read_text())]
    assert not readers, f"modules that read prompt files themselves: {readers}"
    assert PROMPT_DIR.is_dir() and sorted(p.stem for p in PROMPT_DIR.glob("*.txt")) == sorted(prompt_names())
