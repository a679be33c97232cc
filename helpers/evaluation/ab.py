"""A prompt A/B in one call: one strategy on the same questions with the shipped prompts (A) and
with an edited prompt set (B); recall, EM/F1 and cost side by side per question type, the
questions whose answer changed, and a verdict that says whether the difference is more than noise.

The noise shown is that of the question sample: at temperature 0 the model gives the same reply to
the same prompt, so a second run of A would change nothing, but another 20 questions would.  The
verdict therefore rests on the paired differences per question: how many answers got better or
worse, and a bootstrap 95 % interval of the mean EM and F1 difference.  An interval that contains 0
means the edit's effect is not told apart from which questions were drawn.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

from helpers.config import Config
from helpers.evaluation.harness import EvalQuestion, run_evaluation
from helpers.evaluation.rows import current_rows, run_keys
from helpers.prompts import PromptSet, as_prompt_set

MEASURES = ("em", "f1", "recall@5")


@dataclass
class ABReport:
    """The rows of both runs, paired by question id."""

    strategy: str
    shipped: list[dict]
    edited: list[dict]
    edits: list[str]  # the edited prompts, as name@hash

    def pairs(self) -> list[tuple[dict, dict]]:
        by_id = {row["id"]: row for row in self.edited}
        return [(a, by_id[a["id"]]) for a in self.shipped if a["id"] in by_id]

    def table(self) -> list[dict]:
        """One row per question type and one for all: A and B side by side."""
        pairs = self.pairs()
        kinds = ["all", *dict.fromkeys(a["type"] for a, _ in pairs)]
        lines = []
        for kind in kinds:
            chosen = [(a, b) for a, b in pairs if kind == "all" or a["type"] == kind]
            line: dict = {"type": kind, "questions": len(chosen)}
            for measure in (*MEASURES, "calls", "prompt_tokens", "seconds"):
                for side, rows in (("A", [a for a, _ in chosen]), ("B", [b for _, b in chosen])):
                    values = [float(r[measure]) for r in rows if r.get(measure) is not None]
                    line[f"{measure} {side}"] = round(sum(values) / len(values), 3) if values else None
            lines.append(line)
        return lines

    def changed(self) -> list[dict]:
        """The questions whose short answer changed, with their F1 before and after."""
        return [{"type": a["type"], "question": a["question"], "gold": a["gold_answer"], "answer A": a["answer"],
                 "answer B": b["answer"], "F1 A": a["f1"], "F1 B": b["f1"]}
                for a, b in self.pairs() if a["answer"] != b["answer"]]

    def verdict(self) -> str:
        """Better, worse or within noise, with the counts and intervals that decide it."""
        pairs = self.pairs()
        if not pairs:
            return "no question was answered by both runs"
        parts, decided = [], []
        for measure in ("em", "f1"):
            diffs = [float(b[measure]) - float(a[measure]) for a, b in pairs]
            low, high = paired_interval(diffs)
            mean = sum(diffs) / len(diffs)
            parts.append(f"{measure.upper()} {mean:+.3f} (95% interval {low:+.3f} to {high:+.3f})")
            decided.append("better" if low > 0 else "worse" if high < 0 else "")
        up = sum(float(b["f1"]) > float(a["f1"]) for a, b in pairs)
        down = sum(float(b["f1"]) < float(a["f1"]) for a, b in pairs)
        word = next((d for d in decided if d), "")
        said = (f"the edit is {word} than the shipped prompts beyond question-sampling noise" if word else
                "within noise: the interval contains 0, so these questions do not tell A and B apart")
        return (f"{said}. B vs A over {len(pairs)} questions: {'; '.join(parts)}; answers better in {up}, "
                f"worse in {down}.")


def paired_interval(diffs: list[float], rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A bootstrap 95 % interval of the mean of paired differences (questions drawn with replacement)."""
    if not diffs:
        return 0.0, 0.0
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=len(diffs))) / len(diffs) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def set_key(prompts: PromptSet) -> str:
    """A short name for a prompt set (the shipped set: 'shipped'), so each set's rows have their own folder."""
    if not prompts.versions():
        return "shipped"
    return "edited-" + hashlib.sha256(",".join(prompts.versions()).encode()).hexdigest()[:10]


def run_prompt_ab(questions: list[EvalQuestion], strategy: str, config: Config, edited: PromptSet | dict,
                  out_dir: str | Path, progress: bool = True) -> ABReport:
    """Run ``strategy`` on ``questions`` with the shipped prompts and with ``edited`` (resumable: each
    set's rows live in a folder named by its prompts' versions under ``out_dir``)."""
    edited = as_prompt_set(edited)
    out = Path(out_dir)
    rows = {}
    for prompts in (PromptSet(), edited):
        folder = out / set_key(prompts)
        run_evaluation(questions, [strategy], config, folder, progress=progress, prompts=prompts)
        rows[set_key(prompts)] = current_rows(folder / "results.jsonl",
                                              run_keys(questions, [strategy], config, prompts))
    return ABReport(strategy, rows["shipped"], rows[set_key(edited)], edited.versions())
