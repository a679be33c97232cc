"""Write the ``sources.jsonl`` that ``bench_source_orders.py`` and ``bench_named_pages.py`` read, from
the traces of an evaluation run (``<out>/traces/<strategy>__<id>.json``, written by ``run_evaluation``).

Per question, one line: ``question_hits`` (the titles the question's own search kept: the first
search step of the trace), ``search_hits`` (the titles each later search step kept, in step order)
and ``sources`` (the run's ``Result.sources`` as [title, cited], in order).  Traces are not
committed (they are large), so the extract is: this script is how the committed one was made.

Usage: python bench/extract_sources.py <out folder> [--strategy deepsearch] [--out sources.jsonl]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.files import write_atomically  # noqa: E402
from helpers.results import Result  # noqa: E402


def extract(trace: Path) -> dict:
    """The ``sources.jsonl`` line of one trace."""
    result = Result.load(trace)
    searches = [[hit["title"] for hit in step.kept] for step in result.steps("search")]
    return {"id": trace.stem.split("__", 1)[1], "question_hits": searches[0] if searches else [],
            "search_hits": searches[1:], "sources": [[s.title, s.cited] for s in result.sources]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path, help="an evaluation output folder (with traces/)")
    parser.add_argument("--strategy", default="deepsearch")
    parser.add_argument("--out", type=Path, help="default <run>/sources.jsonl")
    args = parser.parse_args()
    traces = sorted((args.run / "traces").glob(f"{args.strategy}__*.json"))
    if not traces:
        raise SystemExit(f"error: no {args.strategy} traces in {args.run / 'traces'}")
    out = args.out or args.run / "sources.jsonl"
    write_atomically(out, "".join(json.dumps(extract(t), ensure_ascii=False) + "\n" for t in traces))
    print(f"{len(traces)} question(s) -> {out}")


if __name__ == "__main__":
    main()
