"""Result rows summarised: per strategy and per question type the mean recall@k, EM, F1, containment
and cost (``summarise``), the tables printed from them, and the CSV copy of the rows."""
from __future__ import annotations

import csv
from pathlib import Path

from helpers.evaluation.scoring import score_answer

MULTI_HOP_TYPES = ("multi_hop", "compositional", "bridge_comparison", "comparison", "inference")


def row_scores(row: dict) -> dict:
    """A row's EM, F1 and containment; rows saved before EM/F1 were recorded are scored from their
    answer and gold answer (no aliases were kept with them)."""
    if "em" in row:
        return {key: row[key] for key in ("em", "f1", "contains")}
    if row.get("failed"):
        return {"em": 0.0, "f1": 0.0, "contains": False}
    return score_answer(row["answer"], [row["gold_answer"]], row.get("question", "")).as_row()


ANSWER_MEASURES = ("em", "f1", "contains")


def summarise(rows: list[dict], strategies: list[str], ks: tuple[int, ...] | list[int]) -> dict:
    """Per strategy: mean recall@k (overall and multi-hop), EM, F1, containment, judge accuracy, cost,
    failures; and the same answer and recall figures per question type (``by_type``)."""
    summary = {}
    for spec in strategies:
        mine = [{**r, **row_scores(r)} for r in rows if r["strategy"] == spec]
        if not mine:
            continue
        entry = {"questions": len(mine), "failures": sum(r["failed"] for r in mine),
                 **{m: _mean([float(r[m]) for r in mine]) for m in ANSWER_MEASURES},
                 "calls": _mean([r["calls"] for r in mine]),
                 "prompt_tokens": _mean([r["prompt_tokens"] for r in mine]),
                 "completion_tokens": _mean([r["completion_tokens"] for r in mine]),
                 "seconds": _mean([r["seconds"] for r in mine])}
        for k in ks:
            entry[f"recall@{k}"] = _mean([r[f"recall@{k}"] for r in mine if r.get(f"recall@{k}") is not None])
            entry[f"recall@{k} multi_hop"] = _mean([r[f"recall@{k}"] for r in mine if r["type"] in MULTI_HOP_TYPES
                                                    and r.get(f"recall@{k}") is not None])
        entry["by_type"] = {kind: _type_summary([r for r in mine if r["type"] == kind], ks)
                            for kind in dict.fromkeys(r["type"] for r in mine)}
        judged = [r for r in mine if r.get("judge") not in (None, "no verdict")]
        if judged:
            entry["judge_accuracy"] = _mean([float(r["judge"] == "correct") for r in judged])
        summary[spec] = entry
    return summary


def _type_summary(rows: list[dict], ks) -> dict:
    entry = {"questions": len(rows), **{m: _mean([float(r[m]) for r in rows]) for m in ANSWER_MEASURES}}
    for k in ks:
        entry[f"recall@{k}"] = _mean([r[f"recall@{k}"] for r in rows if r.get(f"recall@{k}") is not None])
    return entry


def answer_table(summary: dict) -> list[dict]:
    """One row per strategy: EM / F1 overall and per question type (as text), for printing."""
    kinds = list(dict.fromkeys(kind for entry in summary.values() for kind in entry["by_type"]))

    def cell(entry: dict) -> str:
        return f"{entry['em']:.2f} / {entry['f1']:.2f}" if entry.get("em") is not None else "-"
    return [{"strategy": spec, "all": cell(entry), **{kind: cell(entry["by_type"].get(kind, {})) for kind in kinds}}
            for spec, entry in summary.items()]


def miss_table(rows: list[dict]) -> list[dict]:
    """Per strategy, how many gold titles were missed for each reason (from the rows' ``missed``)."""
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        mine = counts.setdefault(row["strategy"], {})
        for reason in row.get("missed", {}).values():
            reason = "ranked below k" if reason.startswith("ranked") else reason
            mine[reason] = mine.get(reason, 0) + 1
    reasons = sorted({reason for mine in counts.values() for reason in mine})
    return [{"strategy": spec, **{reason: mine.get(reason, 0) for reason in reasons}} for spec, mine in counts.items()]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def write_csv(rows: list[dict], path: Path) -> None:
    if not rows:
        return
    fields = [k for k in rows[0] if k != "retrieved"] + ["retrieved"]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "retrieved": " | ".join(row["retrieved"])})
