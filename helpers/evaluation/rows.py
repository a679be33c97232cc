"""Evaluation questions and their rows on disk: where each run's trace goes (a safe name derived
from the question id, never a path), the key a row is reused under (``row_key``: what the row
depends on), and reading a run's rows back (``read_rows``, ``current_rows``)."""
from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from helpers.config import Config, with_overrides
from helpers.errors import DeepSearchLabError
from helpers.evaluation.specs import parse_strategy
from helpers.models.model_files import CATALOGUE
from helpers.prompts import PromptSet


@dataclass
class EvalQuestion:
    id: str
    question: str
    answer: str
    aliases: list[str] = field(default_factory=list)
    gold: list[str] = field(default_factory=list)  # titles (benchmarks) or source paths (Simpsons)
    gold_kind: str = "title"                       # "title" or "source"
    type: str = ""

    @property
    def answerable(self) -> bool:
        return self.type != "unanswerable"


_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def safe_name(text: str) -> str:
    """``text`` as a file name: itself when plain (letters, digits, ``_.-``, at most 100 characters, not
    starting with a dot), else its plain characters and a hash of the whole, so no id can name a path."""
    if _PLAIN_NAME.fullmatch(text):
        return text
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip(".-")[:60]
    return f"{plain}-{hashlib.sha256(text.encode()).hexdigest()[:12]}".lstrip("-")


def trace_path(trace_dir: Path, label: str, question_id: str) -> Path:
    """Where the evaluation keeps the trace of one strategy (``label``) on one question."""
    return trace_dir / f"{label.replace(':', '-').replace('/', '-')}__{safe_name(question_id)}.json"


def model_hash(config: Config) -> str | None:
    """The sha256 (first 16 digits) the embedded default's GGUF file was verified against; None for others."""
    gguf = CATALOGUE.get(config.llm.model) if config.llm.provider == "llamacpp" else None
    return gguf.sha256[:16] if gguf else None


# settings that do not change what a run answers (nor the row), left out of its key
_NOT_IN_KEY = {"vector_db": True, "embedding": {"batch_size"},
               "llm": {"threads", "prompt_cache_mb", "timeout_s", "api_key", "base_url"}}


def run_config_for(spec: str, config: Config) -> tuple[str, str, Config]:
    """The label, strategy name and configuration of one evaluation run of ``spec`` (short answers)."""
    label, name, overrides = parse_strategy(spec)
    return label, name, with_overrides(config, {"pipeline.answer": "short", **overrides})


def row_key(question: EvalQuestion, label: str, run_config: Config, prompts: PromptSet, judge: bool) -> str:
    """What a saved row depends on, as a short hash: the strategy, the question (id, text and gold), the
    model and its hash, the seed and every other setting that changes the run, the edited prompts and
    whether the judge was asked.  A row is reused only under the same key."""
    what = {"strategy": label, "question": [question.id, question.question, question.answer, question.aliases,
                                            question.gold], "model_sha256": model_hash(run_config),
            "settings": run_config.model_dump(exclude=_NOT_IN_KEY), "prompts": prompts.versions(), "judge": judge}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def keep_earlier_trace(trace: Path, key: str) -> None:
    """Move a trace made under another row key (its row set aside) to ``set_aside/<name>.<its key>.json``
    beside it, so that the run replacing the row does not overwrite it."""
    if not trace.exists():
        return
    try:
        earlier = json.loads(trace.read_text()).get("settings", {}).get("row_key") or "unkeyed"
    except (json.JSONDecodeError, AttributeError):
        earlier = "unreadable"
    if earlier != key:
        kept = trace.parent / "set_aside" / f"{trace.stem}.{earlier}.json"
        kept.parent.mkdir(exist_ok=True)
        trace.replace(kept)


def read_rows(results_file: Path) -> list[dict]:
    """The rows saved so far.  A last line torn by a crash is moved to ``<file>.torn`` (so the
    row runs again) and a warning says so; a bad line elsewhere is an error naming it."""
    if not results_file.exists():
        return []
    lines = results_file.read_text().splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number < len(lines):
                raise DeepSearchLabError(f"{results_file}, line {number}: not a JSON row ({exc.msg}). "
                                         "Delete that line (its run will be repeated) and re-run.") from exc
            torn = results_file.with_suffix(".torn")
            torn.write_text(line + "\n")
            results_file.write_text("".join(f"{kept}\n" for kept in lines[:-1]))
            warnings.warn(f"{results_file}: the last line was torn (an interrupted write); moved it to "
                          f"{torn.name}, and that run will be repeated")
    return rows


def run_keys(questions: list[EvalQuestion], strategies: list[str], config: Config, prompts: PromptSet,
             judge: bool = False) -> dict[tuple[str, str], str]:
    """The ``row_key`` of every (strategy, question id) of a run, question by question, every strategy in turn."""
    configs = {spec: run_config_for(spec, config) for spec in strategies}
    return {(spec, q.id): row_key(q, configs[spec][0], configs[spec][2], prompts, judge)
            for q in questions for spec in strategies}


def current_rows(results_file: Path, keys: dict[tuple[str, str], str]) -> list[dict]:
    """The saved rows of a run (``run_keys``), each once, in the order of ``keys`` (whatever order the
    runs ended in): rows made under other settings are left out."""
    saved = {row["key"]: row for row in read_rows(results_file) if row.get("key")}
    return [saved[key] for key in dict.fromkeys(keys.values()) if key in saved]
