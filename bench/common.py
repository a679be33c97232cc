"""Small helpers shared by the benchmark scripts (figures are printed, never asserted)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.config import FAST_OVERRIDES, PROJECT_ROOT, load_config  # noqa: E402

BENCH_OUT = PROJECT_ROOT / "outputs" / "bench"


def bench_config(fast: bool = False, **overrides):
    """The default config (or the fast profile, ``FAST_OVERRIDES``) with a bench-only Milvus Lite directory."""
    base = {"vector_db.uri": str(BENCH_OUT / "milvus.db")}
    if fast:
        base.update(FAST_OVERRIDES)
    base.update(overrides)
    return load_config(overrides=base)


def add_settings_argument(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable): settings for this run, validated like the config file's."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                        help="a setting for this run, e.g. agent.draft_every=2 (repeatable)")


def parsed_settings(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    """The ``--set`` items as overrides; a usage error for an item without '='."""
    bad = [item for item in items if "=" not in item]
    if bad:
        parser.error(f"--set takes KEY=VALUE, e.g. --set agent.draft_every=2 (got {bad[0]!r})")
    return dict(item.split("=", 1) for item in items)


def median_p95(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def search_latency_ms(store, collection: str, embedder, questions: list[str], mode: str) -> tuple[float, float]:
    """Median and p95 milliseconds of one top-5 search per question (query embedding included), after one
    warm-up search."""
    store.search(collection, questions[0], embedder, k=5, mode=mode)
    timings = []
    for question in questions:
        started = time.perf_counter()
        store.search(collection, question, embedder, k=5, mode=mode)
        timings.append(1000 * (time.perf_counter() - started))
    return median_p95(timings)


def table(rows: list[dict]) -> str:
    """Rows of dicts as an aligned text table."""
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    widths = {k: max(len(k), *(len(_fmt(r[k])) for r in rows)) for k in keys}
    lines = ["  ".join(k.ljust(widths[k]) for k in keys)]
    lines += ["  ".join(_fmt(r[k]).ljust(widths[k]) for k in keys) for r in rows]
    return "\n".join(lines)


def _fmt(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def paired(rows: list[dict], mine: str, other: str, key: str = "recall@5") -> list[tuple[dict, dict]]:
    """The rows of strategies ``mine`` and ``other`` on the questions both have ``key`` for, paired."""
    by_id = {label: {r["id"]: r for r in rows if r["strategy"] == label and r.get(key) is not None}
             for label in (mine, other)}
    return [(by_id[mine][q], by_id[other][q]) for q in sorted(set(by_id[mine]) & set(by_id[other]))]


def more_same_less(pairs: list[tuple[dict, dict]], key: str = "recall@5") -> str:
    """Per question, how often the first of each pair has more, as much or less of ``key``."""
    more = sum(a[key] > b[key] for a, b in pairs)
    less = sum(a[key] < b[key] for a, b in pairs)
    return f"more {more}, same {len(pairs) - more - less}, less {less}"

