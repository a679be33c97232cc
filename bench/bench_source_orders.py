"""Recall@k of the agent's kept evidence under other source orders, without a model call.

Reads a ``sources.jsonl`` of ``bench/results/`` (per question: the question's own hits,
the agent's sources in the order of its run with their cited flags and, where kept,
each later search's hits) and prints R@2 / R@5 for each order, and per question how
each order compares with the run's own; the agent's order now is the one marked
"the agent's rule" (``EvidenceLog.answer_sources``; printed where later searches' hits
were kept, and recomputed without the judge's demotions, which the records lack).

    python bench/bench_source_orders.py bench/results/multihop_agent_2wiki_sources2/sources.jsonl
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

from common import PROJECT_ROOT

from helpers.evaluation.harness import load_questions, recall_at_k
from helpers.knowledge.retrieval import interleave

KS = (2, 5)
RUN = "this run's order"


def in_turns(*groups: list[str]) -> list[str]:
    """The titles of ``groups`` taking turns (``interleave``), each once."""
    return [p.id for p in interleave([[SimpleNamespace(id=t) for t in g] for g in groups], limit=10**6)]


def orders(record: dict) -> dict[str, list[str]]:
    """Each source order of one question's evidence, as titles (the rest follows in the run's order)."""
    own = record["question_hits"]
    run = [title for title, _ in record["sources"]]
    cited = [title for title, was_cited in record["sources"] if was_cited]
    novel = [t for t in cited if t not in own]
    found = {
        "the question's own hits (naive RAG)": own,
        RUN: run,
        "cited passages the question missed, in turns with its hits (sources2 run)": in_turns(novel, own),
        "every cited passage in turns with the question's hits": in_turns(cited, own),
    }
    if "search_hits" in record:
        turn_order = in_turns(own, *record["search_hits"])
        found["the agent's rule: cited passages in turns with all searches in turn order"] = in_turns(cited, turn_order)
        later = [t for t in turn_order if t not in own]
        found["later searches' finds in turns with the question's hits"] = in_turns(novel + later, own)
    return {name: lead + [t for t in run if t not in lead] for name, lead in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, help="a sources.jsonl of bench/results/")
    parser.add_argument("--questions", type=Path, default=PROJECT_ROOT / "data" / "2wiki" / "dev.json")
    args = parser.parse_args()
    gold = {q.id: q.gold for q in load_questions(args.questions)}
    records = [json.loads(line) for line in args.sources.read_text(encoding="utf-8").splitlines() if line.strip()]
    scores: dict[str, list[tuple]] = {}
    for record in records:
        for name, order in orders(record).items():
            scores.setdefault(name, []).append(tuple(recall_at_k(order, gold[record["id"]], k) for k in KS))
    run_scores = scores[RUN]
    print(f"{len(records)} questions; per question against this run's order (more / less)")
    for name, values in scores.items():
        means = " ".join(f"R@{k} {sum(v[i] for v in values) / len(values):.3f}" for i, k in enumerate(KS))
        moves = " ".join(f"R@{k} +{sum(v[i] > c[i] for v, c in zip(values, run_scores))}"
                         f"/-{sum(v[i] < c[i] for v, c in zip(values, run_scores))}" for i, k in enumerate(KS))
        print(f"  {name:<90} {means}   {moves}")


if __name__ == "__main__":
    main()
