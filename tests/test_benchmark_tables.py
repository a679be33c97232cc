"""The benchmark tables in docs/ are generated from the committed rows, never written by hand."""
from __future__ import annotations

import subprocess
import sys

from helpers.config import PROJECT_ROOT


def test_docs_benchmarks_is_what_the_committed_rows_give():
    run = subprocess.run([sys.executable, "bench/tables.py", "--check"], cwd=PROJECT_ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
