"""Run the shorter benchmarks in turn (``make bench``); each prints its own figures.  The long ones
(``bench_multihop``, ``bench_report``, ``bench_evaluation``, ``bench_reingest``, ``bench_vs_deepsearcher``)
and ``bench_source_orders`` (which reads kept rows) are run on their own, with the options their docstrings give."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["bench_model_layer.py", "bench_knowledge_base.py", "bench_pipeline.py", "bench_agent.py",
           "bench_prompt_cache.py"]


def main() -> None:
    for script in SCRIPTS:
        print(f"\n######## {script}\n", flush=True)
        subprocess.run([sys.executable, str(HERE / script)], check=False)


if __name__ == "__main__":
    main()
