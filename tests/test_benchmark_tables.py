"""The benchmark tables in docs/ are generated from the committed rows, never written by hand."""
from __future__ import annotations

import json
import subprocess
import sys

from helpers.config import PROJECT_ROOT
from helpers.results import Result, Source, TraceStep


def test_docs_benchmarks_is_what_the_committed_rows_give():
    run = subprocess.run([sys.executable, "bench/tables.py", "--check"], cwd=PROJECT_ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_sources_extract_is_written_from_a_runs_traces(tmp_path):
    hit = lambda title: {"id": title, "title": title}  # noqa: E731 - a hit as a trace step keeps it
    result = Result("q?", "deepsearch", trace=[TraceStep("search", kept=[hit("A"), hit("B")]),
                                               TraceStep("action"), TraceStep("search", 2, kept=[hit("C")])],
                    sources=[Source(1, "C", "c", "c.md", "", 0.9, "C0", cited=True),
                             Source(2, "A", "c", "a.md", "", 0.8, "A0")])
    (tmp_path / "traces").mkdir()
    result.save(tmp_path / "traces" / "deepsearch__q1.json")
    run = subprocess.run([sys.executable, "bench/extract_sources.py", str(tmp_path)], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    line = json.loads((tmp_path / "sources.jsonl").read_text())
    assert line == {"id": "q1", "question_hits": ["A", "B"], "search_hits": [["C"]],
                    "sources": [["C", True], ["A", False]]}
