"""What the title lookup of the names a question mentions adds to Recall@k, without a model call.

The agent's own search of the question puts first the pages titled by the names the
question mentions (``named_pages``, ``agent.pages``).  On the 2Wiki dev questions this
prints, per question type: one plain search (naive RAG's retrieval) against the same
search with those pages first (both exact: no model is involved); and, given a
``sources.jsonl`` of ``bench/results/`` recorded before the lookup existed, the agent's
source rule (``EvidenceLog.answer_sources``) recomputed on that run's evidence, with its
first search as recorded and with the named pages first (its later searches and cited
passages as recorded, so a live run will differ: it starts from other passages).

    python bench/bench_named_pages.py [--pages 2] \
        [--sources bench/results/multihop_agent_2wiki_sources2/sources.jsonl]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_source_orders import in_turns
from common import BENCH_OUT, bench_config, more_same_less, table

from helpers.evaluation.harness import BENCHMARKS, load_questions, prepare_corpus, recall_at_k
from helpers.knowledge.embeddings import get_embedder
from helpers.knowledge.retrieval import named_pages, search_collections
from helpers.knowledge.vectorstore import open_store

KS = (2, 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2, help="pages looked up per name (agent.pages)")
    parser.add_argument("--sources", type=Path, help="a sources.jsonl of bench/results/ with search_hits")
    args = parser.parse_args()
    model = bench_config().llm.model  # the corpus bench_multihop.py ingests, in its folder
    config = bench_config(**{"vector_db.uri": str(BENCH_OUT / "multihop" / model / "milvus.db")})
    corpus, questions_file = BENCHMARKS["2wiki"]
    questions = {q.id: q for q in load_questions(questions_file)}
    collections = prepare_corpus(corpus, config)
    store, embedder = open_store(config), get_embedder(config.embedding)
    records = ([json.loads(line) for line in args.sources.read_text(encoding="utf-8").splitlines() if line.strip()]
               if args.sources else [{"id": qid} for qid in questions])

    orders: dict[str, list[tuple[str, list[str]]]] = {}  # name -> (question id, titles in rank order)
    for record in records:
        question = questions[record["id"]]
        hits = search_collections(store, embedder, question.question, collections, k=config.search.top_k,
                                  mode=config.search.mode, ranker=config.search.ranker)[: config.search.top_k]
        _, pages = named_pages(store, embedder, question.question, collections, args.pages)
        own = [h.title for h in hits]
        with_pages = list(dict.fromkeys([p.title for p in pages] + own))
        found = {"one search (naive RAG)": own, "one search, named pages first": with_pages}
        if "search_hits" in record:
            run = [title for title, _ in record["sources"]]
            cited = [title for title, was_cited in record["sources"] if was_cited]
            for name, first in (("agent's rule, recorded evidence", record["question_hits"]),
                                ("agent's rule, named pages first", with_pages)):
                lead = in_turns(cited, in_turns(first, *record["search_hits"]))
                found[name] = lead + [t for t in run if t not in lead]
        for name, order in found.items():
            orders.setdefault(name, []).append((record["id"], order))

    kinds = list(dict.fromkeys(questions[r["id"]].type for r in records))
    base = {qid: order for qid, order in orders["one search (naive RAG)"]}
    rows = []
    for name, entries in orders.items():
        scores = [(questions[qid].type, *(recall_at_k(order, questions[qid].gold, k) for k in KS),
                   *(recall_at_k(base[qid], questions[qid].gold, k) for k in KS)) for qid, order in entries]
        row = {"order": name,
               **{f"R@{k}": f"{sum(s[1 + i] for s in scores) / len(scores):.3f}" for i, k in enumerate(KS)}}
        for kind in kinds:
            of_kind = [s for s in scores if s[0] == kind]
            row[f"{kind} ({len(of_kind)})"] = " / ".join(f"{sum(s[1 + i] for s in of_kind) / len(of_kind):.2f}"
                                                         for i in range(len(KS)))
        for i, k in enumerate(KS):
            row[f"R@{k} vs one search"] = more_same_less([({"r": s[1 + i]}, {"r": s[1 + len(KS) + i]}) for s in scores],
                                                         "r")
        rows.append(row)
    print(f"{len(records)} questions, {config.embedding.model}, top {config.search.top_k}, "
          f"{args.pages} page(s) per name; per type R@2 / R@5")
    print(table(rows))


if __name__ == "__main__":
    main()
