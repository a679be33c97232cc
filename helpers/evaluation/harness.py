"""Evaluation harness: recall@k, answer scores (EM and F1, as the field reports them, and
containment) and cost for every strategy, beside the oracle reader (``oracle``: the
answer step given the gold passages).

Datasets
* the Simpsons QA set (``data/qa/simpsons_qa.jsonl``): gold answers, aliases and gold source files;
* any multi-hop benchmark in the common public format (2WikiMultiHopQA, HotpotQA):
  a corpus JSON list of ``{"title", "text"}`` paragraphs and questions with
  ``question``, ``answer`` and ``supporting_facts`` (or ``gold_titles``).

Recall@k follows DeepSearcher's published protocol: the share of gold titles
(or sources) among the first k *distinct* titles the run retrieved.

Runs are resumable: each (strategy, question) row is appended to
``results.jsonl`` as soon as it is done and skipped on the next run (a line torn
by a crash is set aside, and that row runs again).  A row is reused only under
the settings that made it (``row_key``: the question, the model and its hash, the
seed, the edited prompts and every setting that changes the run); rows made
otherwise stay in the file, unused, and the run says how many it set aside.
Question ids are data: they must be unique, and trace file names are derived
from them (``safe_name``), never taken as paths.  A row that crashes is recorded
as that row's failure, with the traceback in its trace file, and the run goes on.

Every row also says why each gold title it missed was missed (``explain_misses``):
never retrieved, retrieved then dropped by a step, or ranked below k.

With ``workers`` > 1 several questions run at once against a model server (``parallel``).  Each run
keeps its own budget, ledger and trace; the rows are written by this thread as the runs end, so a kill
loses at most the runs in flight (they run again on resume).  The file's lines are in the order the
runs ended; ``current_rows`` gives them back in question order, so the summary and the CSV do not
depend on which worker ran what.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
import traceback
import warnings
from functools import partial
from pathlib import Path

from pydantic import BaseModel
from tqdm.auto import tqdm

from helpers.config import PROJECT_ROOT, Config, check_question_fits
from helpers.errors import InputError, StructuredOutputError
from helpers.evaluation.oracle import ORACLE, run_oracle
from helpers.evaluation.parallel import append_row, run_jobs, usable_workers
from helpers.evaluation.plots import plot_evaluation
from helpers.evaluation.scoring import AnswerScore, score_answer
from helpers.evaluation.rows import (EvalQuestion, current_rows, keep_earlier_trace, model_hash, read_rows, row_key,
                                     run_config_for, run_keys, trace_path)
from helpers.evaluation.specs import parse_strategy  # noqa: F401 - the CLI and the notebooks import it from here
from helpers.evaluation.summary import summarise, write_csv
from helpers.knowledge.ingest import ingest, ingest_manifest
from helpers.models.backend import cpu_name
from helpers.knowledge.embeddings import get_embedder
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import get_backend, make_llm
from helpers.prompts import PromptSet, as_prompt_set, fence, render
from helpers.results import Result
from helpers.strategies.registry import check_question, run_strategy


# -- datasets -----------------------------------------------------------------------
def _read_json(path: Path, what: str) -> object:
    """A JSON (or, for ``.jsonl``, one JSON value per line) file, or an ``InputError`` saying where it is wrong."""
    if not path.is_file():
        raise InputError(f"{what} file {path} does not exist (check the path)")
    text = path.read_text(errors="replace")
    if path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}, line {number}: not valid JSON ({exc.msg}); fix or remove that line")
        return rows
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc


def load_questions(path: str | Path) -> list[EvalQuestion]:
    """Read a Simpsons-style JSONL file or a 2Wiki/HotpotQA-style JSON list.  Each record needs
    ``question`` and ``answer``; a bad record is an ``InputError`` naming it."""
    path = Path(path)
    rows = _read_json(path, "questions")
    if not isinstance(rows, list) or not rows:
        raise InputError(f"{path}: expected a non-empty list of questions (a JSON list, or one JSON object per line)")
    questions = []
    for i, row in enumerate(rows):
        where = f"{path}, question {i + 1}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected an object with 'question' and 'answer', got {type(row).__name__}")
        missing = [key for key in ("question", "answer") if key not in row]
        if missing:
            raise InputError(f"{where}: missing {' and '.join(repr(m) for m in missing)}")
        try:
            check_question(str(row["question"] or ""))
        except InputError as exc:
            raise InputError(f"{where}: {exc}, or remove the record") from exc
        answer = row["answer"]
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)) or not str(answer).strip():
            raise InputError(f"{where}: 'answer' is {json.dumps(answer)}: give the gold answer as text (for a "
                             "question the corpus cannot answer, \"type\": \"unanswerable\" and an answer such as "
                             "\"not in the corpus\")")
        if "gold_sources" in row:
            gold, kind = row["gold_sources"], "source"
        elif "gold_titles" in row:
            gold, kind = row["gold_titles"], "title"
        else:
            gold, kind = list(dict.fromkeys(fact[0] for fact in row.get("supporting_facts", []))), "title"
        questions.append(EvalQuestion(str(row.get("id", row.get("_id", i))), str(row["question"]), str(answer),
                                      list(row.get("aliases", row.get("answer_aliases", []))), list(gold), kind, row.get("type", "")))
    check_unique_ids(questions, str(path))
    return questions


def check_unique_ids(questions: list[EvalQuestion], where: str = "the questions") -> None:
    """Refuse two questions with one id: rows and trace files are keyed by it."""
    first: dict[str, int] = {}
    for number, question in enumerate(questions, start=1):
        if question.id in first:
            raise InputError(f"{where}: questions {first[question.id]} and {number} share the id {question.id!r}: "
                             "give each question its own id (rows and trace files are keyed by it)")
        first[question.id] = number


def check_questions(questions: list[EvalQuestion], config: Config) -> None:
    """Refuse, before any run, questions whose ids repeat or whose text does not fit the model's context."""
    check_unique_ids(questions)
    for question in questions:
        check_question_fits(question.question, config, f"question {question.id!r}")


QUESTION_TYPES = ["multi_hop", "single", "unanswerable", "multi_part",  # the order sample_by_type takes them in
                  "compositional", "comparison", "bridge_comparison", "inference",
                  "bridge", "three_hop", "temporal_arithmetic", "temporal_yes_no", "comparison_other", "open_lookup"]

# public benchmarks shipped in data/ (name -> corpus, questions); see each folder's README for sources
BENCHMARKS = {
    "2wiki": (PROJECT_ROOT / "data" / "2wiki" / "corpus.json", PROJECT_ROOT / "data" / "2wiki" / "dev.json"),
    # 60 multi-hop questions of six other shapes over the same corpus (data/varied/README.md)
    "varied": (PROJECT_ROOT / "data" / "2wiki" / "corpus.json", PROJECT_ROOT / "data" / "varied" / "varied_dev.json"),
}


def sample_by_type(questions: list[EvalQuestion], limit: int | None = None,
                   types: list[str] | None = None) -> list[EvalQuestion]:
    """Questions of the given types (all by default), one of each type in turn, at most ``limit``."""
    if types:
        questions = [q for q in questions if q.type in types]
    if limit is None:
        return list(questions)
    kinds = list(dict.fromkeys([*QUESTION_TYPES, *(q.type for q in questions)]))
    groups = [[q for q in questions if q.type == kind] for kind in kinds]
    ordered = [group[i] for i in range(max(map(len, groups), default=0)) for group in groups if i < len(group)]
    return ordered[:limit]


def check_corpus(corpus: str | Path) -> list:
    """The corpus records: a collections manifest (``[{"path", ...}]``) or ``[{"title", "text"}]``
    paragraphs; anything else is an ``InputError`` saying what was expected."""
    corpus = Path(corpus)
    records = _read_json(corpus, "corpus")
    shape_ok = isinstance(records, list) and records and all(
        isinstance(r, dict) and ("path" in r or ("title" in r and "text" in r)) for r in records)
    if not shape_ok:
        raise InputError(f"{corpus}: expected a JSON list of {{\"title\", \"text\"}} paragraphs or a collections "
                         "manifest (a list of {\"name\", \"path\", \"description\"})")
    return records


def prepare_corpus(corpus: str | Path, config: Config) -> list[str]:
    """Ingest a manifest (``collections.json``) or a ``{"title","text"}`` corpus; return collection names."""
    corpus = Path(corpus)
    records = check_corpus(corpus)
    if "path" in records[0]:
        ingest_manifest(config, corpus, progress=False)
        return [entry["name"] for entry in records]
    name = re.sub(r"[^a-zA-Z0-9_]", "_", corpus.stem) or "corpus"
    ingest([str(corpus)], name, f"Paragraphs of the benchmark corpus '{corpus.stem}', one per title.", config,
           progress=False)
    return [name]


# -- metrics ------------------------------------------------------------------------
def score(answer: str, question: EvalQuestion) -> AnswerScore:
    """EM, F1 and containment of ``answer`` against the gold answer and its aliases (``scoring``)."""
    return score_answer(answer, [question.answer, *question.aliases], question.question, question.answerable)


def answer_matches(answer: str, question: EvalQuestion) -> bool:
    """Lenient containment: the gold (or an alias) appears in the answer, which names no second option."""
    return score(answer, question).contains


def retrieved_keys(result: Result, kind: str) -> list[str]:
    """Distinct titles (or sources) in the order the run retrieved them."""
    keys = [s.title if kind == "title" else s.source for s in result.sources]
    return list(dict.fromkeys(keys))


def recall_at_k(retrieved: list[str], gold: list[str], k: int, kind: str = "title") -> float | None:
    """Share of ``gold`` among the first k distinct ``retrieved`` keys (None when there is no gold)."""
    if not gold:
        return None
    first = list(dict.fromkeys(retrieved))[:k]
    if kind == "source":
        found = sum(any(key.endswith(g) for key in first) for g in gold)
    else:
        found = sum(g in first for g in gold)
    return found / len(gold)


class JudgeVerdict(BaseModel):
    verdict: str  # "correct" | "partly correct" | "incorrect"
    reason: str


def judge_answer(question: EvalQuestion, answer: str, config: Config,
                 template: str | None = None) -> tuple[str, str, int]:
    """An LLM's verdict with our rubric (or an edited ``judge`` prompt); returns (verdict, reason, tokens used)."""
    llm = make_llm(config)
    gold = "the corpus does not contain the answer" if not question.answerable else question.answer
    messages = [{"role": "user", "content": render("judge", template, question=question.question, gold=gold,
                                                   answer=fence(answer[:2000]))}]
    try:
        reply = llm.structured(messages, JudgeVerdict, step="judge", max_tokens=120)
        verdict = reply.value.verdict.strip().lower()
        verdict = verdict if verdict in ("correct", "partly correct", "incorrect") else "incorrect"
        return verdict, reply.value.reason, llm.ledger.total_tokens
    except StructuredOutputError as exc:
        return "no verdict", exc.last_error, llm.ledger.total_tokens


# -- runs ---------------------------------------------------------------------------
def explain_misses(result: Result, gold: list[str], k: int, kind: str = "title") -> dict[str, str]:
    """For each gold key missing from the first k sources, why: 'never retrieved',
    'dropped by <step>' (retrieved, then left out by that step) or 'ranked N' (found, below k)."""
    ranked = retrieved_keys(result, kind)

    def matches(key: str, g: str) -> bool:
        return key == g if kind == "title" else key.endswith(g)

    def key_of(hit: dict) -> str:
        return hit.get("title", "") if kind == "title" else hit.get("source", "")

    reasons = {}
    for g in gold:
        rank = next((n for n, key in enumerate(ranked, start=1) if matches(key, g)), None)
        if rank is not None and rank <= k:
            continue
        if rank is not None:
            reasons[g] = f"ranked {rank}"
            continue
        dropped_by = [step.step for step in result.trace if any(matches(key_of(h), g) for h in step.dropped)]
        seen = any(matches(key_of(h), g) for step in result.trace for h in step.kept)
        reasons[g] = f"dropped by {dropped_by[0]}" if dropped_by else ("dropped" if seen else "never retrieved")
    return reasons


def run_stamp(config: Config) -> dict:
    """What a result row needs to be compared later: the model (and, for the embedded default, the
    sha256 its GGUF file was verified against), its provider and seed, the commit, the CPU and the date."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"model": config.llm.model, "model_sha256": model_hash(config),
            "provider": config.llm.provider, "seed": config.llm.seed,
            "commit": commit or "unknown", "cpu": cpu_name(), "date": time.strftime("%Y-%m-%d")}


def evaluate_one(question: EvalQuestion, spec: str, config: Config, ks: list[int], judge: bool,
                 trace_dir: Path | None = None, prompts: PromptSet | None = None) -> dict:
    """Run one strategy on one question and score it; with ``trace_dir`` the run's full trace is saved
    there as ``<strategy>__<id>.json`` (load it with ``Result.load`` to see why a row scored as it did).

    Benchmark questions get short answers (``pipeline.answer: short``), not reports.  Any exception
    becomes this row's failure (type and message in the row, the traceback in the trace file)."""
    label, name, run_config = run_config_for(spec, config)
    prompts = as_prompt_set(prompts)
    started = time.perf_counter()
    try:
        result = run_oracle(question.question, question.gold, run_config, prompts=prompts) if name == ORACLE else \
            run_strategy(name, question.question, run_config, prompts=prompts)
        error = result.error or ("" if result.answer.strip() else "empty answer")
    except Exception as exc:  # noqa: BLE001 - one crashing row must not end the evaluation
        result, error = Result(question.question, name), f"{type(exc).__name__}: {exc}"
        result.error = error
        result.settings["traceback"] = traceback.format_exc()
    answer = result.short_answer or result.answer
    scores = score(answer, question) if not error else AnswerScore(0.0, 0.0, False)
    row = {"strategy": label, "id": question.id, "type": question.type, "question": question.question,
           "answer": answer, "explanation": result.answer if result.short_answer else "",
           "gold_answer": question.answer, "failed": bool(error), "error": error, **scores.as_row(),
           "calls": result.usage.calls, "prompt_tokens": result.usage.prompt_tokens,
           "completion_tokens": result.usage.completion_tokens,
           "seconds": round(time.perf_counter() - started, 2), **run_stamp(run_config),
           "retrieved": retrieved_keys(result, question.gold_kind), "prompts": result.prompt_versions,
           "key": row_key(question, label, run_config, prompts, judge)}
    for k in ks:
        row[f"recall@{k}"] = recall_at_k(row["retrieved"], question.gold, k, question.gold_kind)
    row["missed"] = explain_misses(result, question.gold, max(ks), question.gold_kind)
    if trace_dir is not None:
        trace = trace_path(trace_dir, label, question.id)
        result.settings["row_key"] = row["key"]
        try:
            trace_dir.mkdir(parents=True, exist_ok=True)
            keep_earlier_trace(trace, row["key"])
            result.save(trace)
        except OSError as exc:  # a side write: the row is kept
            warnings.warn(f"the trace {trace} was not saved ({exc.strerror or exc}); the row is kept")
    if judge and not error:
        try:
            row["judge"], row["judge_reason"], row["judge_tokens"] = judge_answer(
                question, answer, config, prompts.template("judge"))
        except Exception as exc:  # noqa: BLE001 - a failed verdict must not end the evaluation
            row["judge"], row["judge_reason"], row["judge_tokens"] = "no verdict", f"{type(exc).__name__}: {exc}", 0
    return row


def run_evaluation(questions: list[EvalQuestion], strategies: list[str], config: Config, out_dir: str | Path,
                   ks: tuple[int, ...] = (2, 5), judge: bool = False, progress: bool = True,
                   prompts: PromptSet | dict | None = None, workers: int = 1) -> dict:
    """Run every strategy on every question (resuming), then write summary.json, results.csv and plots.
    Each run's trace goes to ``traces/`` in ``out_dir``; ``prompts`` (edited prompt texts) reach every run;
    ``workers``: questions run at once against a model server (see the module's docstring)."""
    prompts = as_prompt_set(prompts)
    check_questions(questions, config)  # refuse bad questions and specs before any run starts
    workers = usable_workers(config, workers)
    keys = run_keys(questions, strategies, config, prompts, judge)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / "results.jsonl"
    saved = read_rows(results_file)
    done = {row.get("key") for row in saved}
    # question by question, every strategy in turn: a partial run still compares them on the same questions
    todo = [(s, q) for q in questions for s in strategies if keys[(s, q.id)] not in done]
    set_aside = {(row["strategy"], row["id"]) for row in saved} & {(s, q.id) for s, q in todo}
    if set_aside:
        warnings.warn(f"{results_file}: {len(set_aside)} saved row(s) were made under other settings (model, "
                      "prompts, seed or settings) or before rows were keyed: they are not reused, and run again "
                      "(the old rows stay in the file)")
    if workers > 1:  # the shared parts, made once here: the caches that hold them are not filled by two threads
        for spec in strategies:
            run_config = run_config_for(spec, config)[2]
            get_backend(run_config.llm), get_embedder(run_config.embedding), open_store(run_config)
    recalls: list[float] = []
    with tqdm(total=len(todo), desc="evaluate", unit="run", disable=not progress) as bar:
        def saved(row: dict) -> None:
            append_row(results_file, row)
            bar.update()
            if row.get(f"recall@{ks[-1]}") is not None:
                recalls.append(row[f"recall@{ks[-1]}"])
                bar.set_postfix({f"recall@{ks[-1]}": f"{sum(recalls) / len(recalls):.2f}", "strategy": row["strategy"]})

        run_jobs([partial(evaluate_one, question, spec, config, list(ks), judge, trace_dir=out / "traces",
                          prompts=prompts) for spec, question in todo], workers, saved)
    rows = current_rows(results_file, keys)
    summary = summarise(rows, strategies, ks)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    write_csv(rows, out / "results.csv")
    plot_evaluation(summary, out / "evaluation.png")
    return summary
