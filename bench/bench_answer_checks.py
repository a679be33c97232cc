"""Do the agent's answer checks tell a right answer from a wrong one?  Read from the traces of a
``bench_multihop.py`` run with ``deepsearch`` (no model is called here).

Every answer the agent put to its evaluators is scored against the gold answer (normalised
containment, as in the benchmark), and each check's verdicts are counted separately for right and
wrong answers.  A check worth its calls fails wrong answers far more often than right ones; one that
fails both at the same rate only costs time (each rejection costs a lesson call and more steps).
Also: how often a first answer was rejected, and whether the final answer was better for it.

The verdicts are saved as ``answer_checks.jsonl`` beside ``results.jsonl`` (small enough to keep
with the rows), and read back from there when the traces are gone.

Usage: python bench/bench_answer_checks.py --out outputs/bench/multihop/strict
       (a folder from: python bench/bench_multihop.py --strategies deepsearch --set agent.strict_check=true --out …)
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from common import table

from helpers.evaluation.harness import BENCHMARKS, answer_matches, load_questions, read_rows, trace_path

STRATEGY = "deepsearch"


def evaluated_answers(trace: list[dict]) -> list[dict]:
    """The answers of one run that reached the evaluators, in order, each with its check verdicts."""
    attempts, answer = [], None
    for step in trace:
        parsed = step.get("parsed") or {}
        if step["step"] == "action" and parsed.get("action") == "answer":
            answer = parsed.get("answer", "")
        elif step["step"] == "evaluate" and answer is not None:
            attempts.append({"answer": answer, "passed": parsed["passed"],
                             "verdicts": {r["name"]: r["passed"] for r in parsed["results"] if r.get("ran", True)}})
            answer = None
    return attempts


def collect(out: Path) -> list[dict]:
    """One record per question: its evaluated answers (scored) and whether the final answer was right."""
    saved = out / "answer_checks.jsonl"
    rows = [r for r in read_rows(out / "results.jsonl") if r["strategy"] == STRATEGY]
    traced = [(row, trace_path(out / "traces", STRATEGY, row["id"])) for row in rows]
    traced = [(row, path) for row, path in traced if path.exists()]
    if not traced and saved.exists():
        return [json.loads(line) for line in saved.read_text().splitlines() if line.strip()]
    questions = {q.id: q for q in load_questions(BENCHMARKS["2wiki"][1])}
    records = []
    for row, path in traced:
        attempts = evaluated_answers(json.loads(path.read_text())["trace"])
        for attempt in attempts:
            attempt["right"] = answer_matches(attempt.pop("answer"), questions[row["id"]])
        records.append({"id": row["id"], "type": row["type"], "final_right": row["correct"], "attempts": attempts})
    saved.write_text("".join(json.dumps(record) + "\n" for record in records))
    return records


def check_rows(records: list[dict]) -> list[dict]:
    """Per check: how often it failed right answers and wrong ones."""
    counts: Counter = Counter()
    for attempt in (a for record in records for a in record["attempts"]):
        for name, passed in attempt["verdicts"].items():
            counts[name, attempt["right"], passed] += 1
    rows = []
    for name in sorted({name for name, _, _ in counts}):
        right = counts[name, True, True] + counts[name, True, False]
        wrong = counts[name, False, True] + counts[name, False, False]
        rows.append({"check": name, "verdicts": right + wrong,
                     "failed right answers": f"{counts[name, True, False]} of {right}",
                     "failed wrong answers": f"{counts[name, False, False]} of {wrong}",
                     "fail rate right / wrong": f"{counts[name, True, False] / max(right, 1):.2f} / "
                                                f"{counts[name, False, False] / max(wrong, 1):.2f}"})
    return rows


def rejection_rows(records: list[dict]) -> list[dict]:
    """Questions whose first evaluated answer was rejected: was it right, and was the final answer right?"""
    outcome: Counter = Counter()
    for record in records:
        if record["attempts"] and not record["attempts"][0]["passed"]:
            outcome[record["attempts"][0]["right"], record["final_right"]] += 1
    return [{"first answer": "right" if first else "wrong", "final answer": "right" if final else "wrong",
             "questions": outcome[first, final]} for first in (True, False) for final in (True, False)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, help="a bench_multihop.py results folder with deepsearch rows")
    args = parser.parse_args()
    records = collect(Path(args.out))
    evaluated = [r for r in records if r["attempts"]]
    first_passed = sum(r["attempts"][0]["passed"] for r in evaluated)
    print(f"== {len(records)} agent run(s), {len(evaluated)} with an evaluated answer; "
          f"first answer passed on {first_passed}, rejected on {len(evaluated) - first_passed} ==")
    print(table(check_rows(records)))
    print("\n== first answer rejected: did the rest of the run make the answer better? ==")
    print(table(rejection_rows(records)))


if __name__ == "__main__":
    main()
