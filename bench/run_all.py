"""Run every benchmark in turn (``make bench``).  Each prints its own figures."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["bench_model_layer.py", "bench_knowledge_base.py", "bench_pipeline.py", "bench_agent.py"]

for script in SCRIPTS:
    if (HERE / script).exists():
        print(f"\n######## {script}\n", flush=True)
        subprocess.run([sys.executable, str(HERE / script)], check=False)
