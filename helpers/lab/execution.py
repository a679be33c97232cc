"""Headless execution of the notebook series with nbclient: executed copies and HTML under
``outputs/notebooks/`` (used by ``python -m helpers notebooks`` and the tests), and the
rendered series a learner can read without running anything (``render_notebooks``)."""
from __future__ import annotations

import datetime
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from helpers.config import PROJECT_ROOT, load_config
from helpers.files import write_atomically
from helpers.lab.workspace import PROMPTS_ENV, notebook_paths, rendered_pages
from helpers.models.backend import available_cores, cpu_name

DEFAULT_OUT = PROJECT_ROOT / "outputs" / "notebooks"


COUNT_CELL = """# added by the headless run: the model calls of the notebook's own cells
from helpers.models.usage import calls_in_process
print(f"model calls by the notebook's cells: {calls_in_process()}")"""
PRESS_CELL = COUNT_CELL + """
# then every Run button pressed once (helpers.lab.display.press_all)
from helpers.lab.display import press_all
_errors = press_all()
print(f"pressed the Run buttons: {len(_errors)} error(s)")
assert not _errors, "\\n\\n".join(_errors)"""


@dataclass
class NotebookRun:
    name: str
    ok: bool
    seconds: float  # the notebook's own cells (without the button presses of ``press_buttons``)
    error: str | None = None
    calls: int | None = None  # model calls of its own cells (``press_buttons`` or ``count_calls`` runs)
    executed: Path | None = None
    html: Path | None = None


def venv_kernel_name(preferred: str = "python3") -> str:
    """A kernel that runs this interpreter: ``preferred`` when it already does, else a
    ``deepsearch-lab`` kernelspec installed into this environment's prefix."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    try:
        argv0 = manager.get_kernel_spec(preferred).argv[0]
        # jupyter_client replaces a bare "python"/"python3" with the launching interpreter
        if argv0 in ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}") or \
                Path(argv0).resolve() == Path(sys.executable).resolve():
            return preferred
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(kernel_name="deepsearch-lab", display_name="Python (deepsearch-lab)", prefix=sys.prefix)
    return "deepsearch-lab"


def kernel_env(fast: bool | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for notebook kernels: this one, offline, plus ``DSL_FAST`` when asked."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    if fast is True:
        env["DSL_FAST"] = "1"
    elif fast is False:
        env.pop("DSL_FAST", None)
    env.update(extra or {})
    return env


def execute_notebook(path: str | Path, out_dir: str | Path | None = DEFAULT_OUT, *, timeout: int = 600,
                     env: dict[str, str] | None = None, kernel_name: str | None = None,
                     html_export: bool = True, press_buttons: bool = False,
                     count_calls: bool = False) -> NotebookRun:
    """Run one notebook top to bottom (cwd = its folder); write the executed copy and HTML into ``out_dir``.

    With ``press_buttons`` a last cell presses every Run button of the notebook's widgets once and
    fails on any error they show; it and ``count_calls`` count the model calls of the notebook's own
    cells (``count_calls`` alone leaves no added cell in the written notebook).  A failing cell does not
    raise: the run says ``ok=False`` with the error, and the partly executed notebook is still written.
    SIGINT or SIGTERM (which nbclient answers by shutting the kernel down) raises ``KeyboardInterrupt``,
    so a series stops instead of going on.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    added = PRESS_CELL if press_buttons else COUNT_CELL if count_calls else None
    if added:
        nb.cells.append(nbformat.v4.new_code_cell(added))
    client = NotebookClient(nb, timeout=timeout, startup_timeout=180, kernel_name=kernel_name or venv_kernel_name(),
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.perf_counter()
    error = None
    try:
        client.execute(env=env if env is not None else kernel_env())
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        error = f"{type(exc).__name__}: {str(exc)[-3000:]}"
    except Exception:  # the kernel did not start, the connection broke, ...: report it like a failed cell
        error = "the notebook could not be run:\n" + traceback.format_exc()[-3000:]
    if getattr(client, "_async_cleanup_kernel_future", None) is not None:
        # nbclient's own SIGINT/SIGTERM handler shut the kernel down: the whole run stops, not only this notebook
        raise KeyboardInterrupt(f"stopped by a signal while running {path.name}")
    seconds = time.perf_counter() - started
    calls = None
    if added:
        seconds -= _cell_seconds(nb.cells[-1])
        printed = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []))
        counted = re.search(r"model calls by the notebook's cells: (\d+)", printed)
        calls = int(counted.group(1)) if counted else None
        if not press_buttons:
            nb.cells.pop()  # counted: the written notebook shows only its own cells
    run = NotebookRun(path.stem, error is None, seconds, error, calls=calls)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        run.executed = out / path.name
        nbformat.write(nb, run.executed)
        if html_export:
            from nbconvert import HTMLExporter

            body, _ = HTMLExporter().from_notebook_node(nb)
            run.html = out / f"{path.stem}.html"
            run.html.write_text(body, encoding="utf-8")
    return run


def _cell_seconds(cell) -> float:
    """How long an executed cell ran, from the timing nbclient records in its metadata (0 if it did not run)."""
    timing = cell.metadata.get("execution", {})
    try:
        start, end = (datetime.datetime.fromisoformat(timing[key].replace("Z", "+00:00"))
                      for key in ("iopub.execute_input", "shell.execute_reply"))
    except (KeyError, ValueError):
        return 0.0
    return (end - start).total_seconds()


def execute_notebooks(paths: Iterable[str | Path] | None = None, out_dir: str | Path = DEFAULT_OUT,
                      timeout: int = 600, *, fast: bool | None = None, html_export: bool = True,
                      verbose: bool = True, count_calls: bool = False) -> list[NotebookRun]:
    """Run notebooks one after another (all of the series by default); return one ``NotebookRun`` each.
    Their prompt file is ``out_dir/lab_prompts.json``: a headless run neither reads nor changes the
    prompts a learner saved."""
    kernel = venv_kernel_name()
    env = kernel_env(fast, extra={PROMPTS_ENV: str(Path(out_dir).resolve() / "lab_prompts.json")})
    runs = []
    for path in (list(paths) if paths is not None else notebook_paths()):
        run = execute_notebook(path, out_dir, timeout=timeout, env=env, kernel_name=kernel,
                               html_export=html_export, count_calls=count_calls)
        runs.append(run)
        if verbose:
            state = "ok" if run.ok else "FAILED"
            print(f"{run.name}: {state} in {run.seconds:.0f} s" + (f"\n{run.error}" if run.error else ""))
    return runs


def cells_hash(source: str | Path) -> str:
    """A short hash of a notebook's cells (their kinds and sources; outputs and metadata left
    out): a rendered page records it, so a page older than its notebook is found."""
    text = Path(source).read_text(encoding="utf-8") if isinstance(source, Path) else source
    cells = [(c["cell_type"], "".join(c["source"])) for c in json.loads(text)["cells"]]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()[:12]


def stale_pages(folder: str | Path) -> list[str]:
    """The pages of a rendered folder whose notebook has changed since they were rendered (or
    that record no hash of its cells), by notebook name."""
    current = {path.stem: cells_hash(path) for path in notebook_paths()}
    return [name for name, page in sorted(rendered_pages(folder).items()) if page.get("cells") != current.get(name)]


def _stamp(fast: bool) -> dict[str, str]:
    """What a rendering was made from: commit, date, model, mode and machine."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    model = load_config(environ=kernel_env(fast)).llm.model  # what the kernels load
    return {"commit": commit, "date": datetime.date.today().isoformat(), "model": model,
            "mode": "fast (DSL_FAST=1)" if fast else "full (the default model and budgets)",
            "machine": f"{cpu_name()}, {available_cores()} cores"}


def render_notebooks(out_dir: str | Path, *, fast: bool, timeout: int = 900,
                     paths: Iterable[str | Path] | None = None) -> list[NotebookRun]:
    """Execute the series (or ``paths``) and write each notebook as a plain HTML page (outputs
    included) as soon as it has run, with an ``index.html`` listing every page in the folder and
    the commit, date, model and machine each was made from and a hash of its notebook's cells
    (``cells_hash``; kept in ``index.json``).  So a slow
    machine can render the series in parts, and an interrupted render keeps the pages it finished.
    The stored notebooks stay without outputs; this folder is what a learner reads without running
    anything.  Each notebook first loses the rows an earlier run of it saved (``outputs/notebooks/NAME``,
    which notebooks 09 and 10 resume from), so a page shows one run of its stamped commit."""
    import nbformat
    from nbconvert import HTMLExporter

    out = Path(out_dir)
    index = out / "index.json"
    pages = rendered_pages(out)
    stamp = _stamp(fast)
    exporter = HTMLExporter(template_name="basic")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in list(paths) if paths is not None else notebook_paths():
            shutil.rmtree(DEFAULT_OUT / Path(path).stem, ignore_errors=True)
            run = execute_notebooks([path], out_dir=tmp, timeout=timeout, fast=fast, html_export=False,
                                    count_calls=True)[0]
            body, _ = exporter.from_notebook_node(nbformat.read(run.executed, as_version=4))
            run.html, run.executed = out / f"{run.name}.html", None
            cells = cells_hash(Path(path))
            write_atomically(run.html, f"<p><i>Rendered from commit {stamp['commit']} on {stamp['date']}, "
                                       f"{html.escape(stamp['mode'])}, model {stamp['model']}, "
                                       f"cells {cells}.</i></p>\n{body}")
            pages[run.name] = {**stamp, "cells": cells, "run": "ok" if run.ok else "FAILED",
                               "seconds": round(run.seconds), "calls": run.calls}
            write_atomically(index, json.dumps(dict(sorted(pages.items())), indent=1))
            write_atomically(out / "index.html", _index_page(pages))
            runs.append(run)
    return runs


def _index_page(pages: dict[str, dict]) -> str:
    """The rendered folder's index: one row per page, with what it was made from."""
    columns = ["run", "seconds", "commit", "cells", "date", "model", "mode", "machine"]
    head = "".join(f"<th>{c}</th>" for c in ["notebook", *columns])
    rows = "".join(f"<tr><td><a href='{name}.html'>{name}</a></td>"
                   + "".join(f"<td>{html.escape(str(page.get(c, '')))}</td>" for c in columns) + "</tr>"
                   for name, page in sorted(pages.items()))
    return f"<h1>DeepSearch Lab notebooks, executed</h1><table><tr>{head}</tr>{rows}</table>\n"
