"""An evaluation's runs, one or several at a time (``eval --workers N``).

Against a model server (``openai`` or ``ollama``) several questions can run at once; the embedded
backend answers one call at a time, so it runs one (``usable_workers``).  ``run_jobs`` keeps at most
``workers`` runs going and hands each row to the calling thread as its run ends, so one thread writes
the rows (``append_row``: a whole line each, on disk before the next).  A kill loses only the runs in
flight; on Ctrl-C no new run starts and the runs in flight end and are handed over first.
"""
from __future__ import annotations

import json
import os
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable

from helpers.config import Config
from helpers.errors import InputError


def usable_workers(config: Config, workers: int) -> int:
    """How many questions may run at once: ``workers`` against a model server, 1 with the embedded
    backend (one model in this process answers one call at a time; a warning says so)."""
    if workers < 1:
        raise InputError(f"--workers must be 1 or more (got {workers})")
    if workers > 1 and config.llm.provider == "llamacpp":
        warnings.warn(f"{workers} workers asked for, but the embedded model (llm.provider: llamacpp) answers one "
                      "call at a time: running 1; serve the model (python -m helpers serve, vLLM or Ollama) "
                      "and set llm.provider to openai or ollama to run questions in parallel")
        return 1
    return workers


def append_row(results_file: Path, row: dict) -> None:
    """One row as one line, written and flushed to disk before the next: a kill leaves whole lines."""
    with results_file.open("a") as handle:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def run_jobs(jobs: list[Callable[[], dict]], workers: int, on_row: Callable[[dict], None]) -> None:
    """Run ``jobs`` (each returns a row) in order, at most ``workers`` at once, calling ``on_row`` in this
    thread as each ends.  A job stopped by Ctrl-C (a ``KeyboardInterrupt`` in it or here) stops the rest:
    the rows of the jobs that ended are handed over first, then the interrupt is raised again."""
    pending = iter(jobs)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval") as pool:
        running: set = set()
        try:
            while True:
                for job in pending:  # keep ``workers`` runs going, no more: a kill loses only those
                    running.add(pool.submit(job))
                    if len(running) == workers:
                        break
                if not running:
                    return
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                stopped = [f for f in finished if f.exception() is not None]
                for future in (f for f in finished if f.exception() is None):
                    on_row(future.result())
                if stopped:
                    raise stopped[0].exception()
        except KeyboardInterrupt:
            for future in wait(running).done:
                if future.exception() is None:
                    on_row(future.result())
            raise
