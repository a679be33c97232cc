"""Small helpers for the notebook series (``notebooks/00_…`` to ``10_…``).

* ``notebook_config(name, ...)``: the project configuration with a Milvus Lite
  directory of the notebook's own (``outputs/milvus/<name>.db``), so two open
  kernels never fight over one database lock.  ``DSL_FAST=1`` (small model,
  small budgets) is applied by ``load_config`` itself.
* ``knowledge_base(config)``: ingest the manifest (idempotent) and return the
  store and the embedder.
* Display helpers: ``table_html``, ``usage_table``, ``format_step``.
* Widgets that never block headless execution: ``prompt_editor``, ``run_panel``,
  ``trace_viewer`` (they only do work when a button is pressed; the notebooks
  run the default values once in a plain cell).
* ``execute_notebooks(...)``: run notebooks top to bottom with nbclient and write
  executed copies and HTML under ``outputs/notebooks/``.
"""
from __future__ import annotations

import hashlib
import html
import json
import os
import platform
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

from helpers.config import PROJECT_ROOT, Config, fast_mode, is_server_uri, load_config
from helpers.results import CITATION

NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
DEFAULT_OUT = PROJECT_ROOT / "outputs" / "notebooks"
DB_DIR_ENV = "DSL_NOTEBOOK_DB_DIR"  # where per-notebook Milvus Lite directories go (default outputs/milvus)


# -- configuration ------------------------------------------------------------------
def notebook_paths() -> list[Path]:
    """The series, in order."""
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def milvus_path(name: str) -> Path:
    """The Milvus Lite directory of notebook ``name``."""
    base = os.environ.get(DB_DIR_ENV)
    folder = Path(base) if base else PROJECT_ROOT / "outputs" / "milvus"
    if not folder.is_absolute():
        folder = PROJECT_ROOT / folder
    return folder / f"{name}.db"


def notebook_config(name: str, overrides: dict[str, Any] | None = None, **fields: Any) -> Config:
    """``load_config`` with this notebook's own Milvus Lite directory.

    Overrides use dotted keys (``{"llm.model": "qwen2.5-coder-0.5b"}``); as keyword
    arguments write a double underscore for the dot (``llm__temperature=0.0``).
    A vector database chosen in the environment (``MILVUS_URI`` for a server,
    ``DSL_MILVUS_URI``) or in ``overrides`` wins over the per-notebook directory.
    """
    layered: dict[str, Any] = {}
    if not (os.environ.get("MILVUS_URI") or os.environ.get("DSL_MILVUS_URI")):
        layered["vector_db.uri"] = str(milvus_path(name))
    layered.update(overrides or {})
    layered.update({key.replace("__", "."): value for key, value in fields.items()})
    return load_config(overrides=layered)


def _kb_fingerprint(config: Config) -> str:
    """A hash of what the knowledge base is built from: manifest, files, embedding and chunking settings."""
    from helpers.knowledge.ingest import MANIFEST, read_manifest
    from helpers.knowledge.loaders import expand_sources

    digest = hashlib.sha256(MANIFEST.read_bytes())
    for entry in read_manifest():
        for path in expand_sources([str(MANIFEST.parent / entry["path"])]):
            digest.update(str(Path(path).relative_to(MANIFEST.parent)).encode())
            digest.update(Path(path).read_bytes())
    settings = [config.embedding.model_dump(), config.chunking.model_dump()]
    digest.update(json.dumps(settings, sort_keys=True).encode())
    knowledge = PROJECT_ROOT / "helpers" / "knowledge"
    for module in ("loaders", "chunking", "embeddings", "ingest", "vectorstore"):  # the code that builds it
        digest.update((knowledge / f"{module}.py").read_bytes())
    return digest.hexdigest()[:12]


def _seed_from_template(config: Config, target: Path, progress: bool) -> str:
    """Fill a new per-notebook database by copying a shared, closed copy of the knowledge base.

    The shared copy (``_template_<hash>.db`` beside the notebook databases) is built
    once, by whichever notebook needs it first, under a file lock; later notebooks
    copy it (about a megabyte) instead of embedding every chunk again.
    """
    from helpers.knowledge.ingest import ingest_manifest
    from helpers.knowledge.vectorstore import close_store

    folder = target.parent
    folder.mkdir(parents=True, exist_ok=True)
    key = _kb_fingerprint(config)
    template, ready = folder / f"_template_{key}.db", folder / f"_template_{key}.ready"
    how = "copied the prepared knowledge base"
    with open(folder / "_template.lock", "w") as lock:
        try:
            import fcntl
            fcntl.flock(lock, fcntl.LOCK_EX)  # another kernel may be building it right now
        except ImportError:  # not on Unix: no lock, builds are rare anyway
            pass
        if not ready.exists():
            shutil.rmtree(template, ignore_errors=True)
            template_config = config.model_copy(deep=True)
            template_config.vector_db.uri = str(template)
            reports = ingest_manifest(template_config, progress=progress)
            close_store(template_config)
            ready.write_text(f"{sum(r.chunks_added for r in reports)} chunks\n")
            how = f"built the knowledge base ({sum(r.chunks_added for r in reports)} chunks embedded) and copied it"
        shutil.copytree(template, target)
    return how


def _refresh_notebook_db(config: Config, target: Path, progress: bool) -> str | None:
    """Seed a missing per-notebook database; rebuild one made from other files, settings or code."""
    from helpers.knowledge.vectorstore import lock_holders, close_store

    stamp = target.with_suffix(".fingerprint")
    key = _kb_fingerprint(config)
    if target.exists():
        if not stamp.exists() or stamp.read_text().strip() == key:
            return None
        holders = lock_holders(target.resolve())
        if holders:
            print(f"note: {_short(str(target))} was built from older data or code, but {', '.join(holders)} "
                  "has it open; close that kernel and rerun to rebuild it.")
            return None
        close_store(config)
        shutil.rmtree(target)
    how = _seed_from_template(config, target, progress)
    stamp.write_text(key + "\n")
    return how


def knowledge_base(config: Config, progress: bool = True, quiet: bool = False):
    """Make sure the notebook's database holds the manifest's collections; return ``(store, embedder)``.

    A notebook's first run copies a prepared knowledge base when one exists for the
    same files and settings (built once, see ``_seed_from_template``); then
    ``ingest_manifest`` adds whatever is still missing (usually nothing).
    """
    from helpers.knowledge.embeddings import get_embedder
    from helpers.knowledge.ingest import ingest_manifest
    from helpers.knowledge.vectorstore import open_store

    started = time.perf_counter()
    uri = config.vector_db.uri
    target = config.resolve_path(uri)
    how = "already present"
    if not is_server_uri(uri) \
            and target.parent.resolve() == milvus_path("x").parent.resolve():
        how = _refresh_notebook_db(config, target, progress) or how
    reports = ingest_manifest(config, progress=progress)
    if not quiet:
        added = sum(r.chunks_added for r in reports)
        total = sum(r.chunks_total for r in reports)
        print(f"knowledge base in {_short(str(target))}: {len(reports)} collections, {total} chunks; {how}"
              f"{f', {added} added now' if added else ''} ({time.perf_counter() - started:.0f} s)")
    return open_store(config), get_embedder(config.embedding)


def collection_vectors(store, name: str) -> tuple[list[dict], "Any"]:
    """Every row of collection ``name`` with its stored dense vector: ``(rows, matrix)``."""
    import numpy as np

    rows = list(store.rows(name, ["vector", "title", "section", "source"]))
    return rows, np.asarray([row["vector"] for row in rows], dtype=np.float32)


def config_summary(config: Config) -> str:
    """One line: backend, model, database, and whether fast mode is on."""
    mode = "DSL_FAST (small model, small budgets)" if fast_mode() else "full"
    return (f"backend={config.llm.provider} model={config.llm.model} context={config.llm.context_size} "
            f"temperature={config.llm.temperature} | vector_db={_short(config.vector_db.uri)} | mode: {mode}")


def _short(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return path


def environment_rows(config: Config) -> list[dict]:
    """What a notebook needs: Python, key packages, cores, model files."""
    from helpers.models.llm import available_cores
    from helpers.models.model_files import CATALOGUE, cache_dir

    rows = [{"item": "python", "value": f"{platform.python_version()} ({_short(sys.executable)})"},
            {"item": "CPU cores available", "value": str(available_cores())}]
    for package in ("llama-cpp-python", "pymilvus", "milvus-lite", "sentence-transformers", "langchain-core",
                    "ipywidgets", "matplotlib"):
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "not installed"
        rows.append({"item": package, "value": version})
    for name, model in CATALOGUE.items():
        path = cache_dir() / model.filename
        state = f"ready ({path.stat().st_size / 1e9:.2f} GB)" if path.exists() else "assembled on first use"
        rows.append({"item": f"model {name}", "value": state})
    rows.append({"item": "configured model", "value": f"{config.llm.model} via {config.llm.provider}"})
    return rows


# -- tables -------------------------------------------------------------------------------
def _cell(value: Any, digits: int) -> str:
    if isinstance(value, float):
        value = f"{value:.{digits}f}"
    elif isinstance(value, (list, tuple, set)):
        value = ", ".join(map(str, value))
    return html.escape(str(value)).replace("\n", "<br>")


def table_html(rows: Iterable[dict], columns: list[str] | None = None, digits: int = 2, title: str | None = None):
    """A list of dicts as an HTML table (no pandas needed)."""
    from IPython.display import HTML

    rows = list(rows)
    columns = columns or list(dict.fromkeys(key for row in rows for key in row))
    head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left;vertical-align:top'>{_cell(row.get(c, ''), digits)}</td>"
                                    for c in columns) + "</tr>" for row in rows)
    caption = f"<caption style='text-align:left'><b>{html.escape(title)}</b></caption>" if title else ""
    return HTML(f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def usage_table(ledger, title: str | None = None):
    """The per-step usage of a ledger (calls, tokens, seconds) as an HTML table."""
    return table_html(ledger.by_step(), ["step", "calls", "prompt_tokens", "completion_tokens", "seconds"],
                      digits=1, title=title)


# -- small analysis glue ------------------------------------------------------------------
def project_2d(vectors) -> "Any":
    """PCA to two dimensions with numpy's SVD (rows are points)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float64)
    centred = matrix - matrix.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def confusion_matrix(pairs: Iterable[tuple[str, str]], labels: list[str]):
    """Counts of (true, predicted) pairs as a len(labels) x len(labels) array."""
    import numpy as np

    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=int)
    for true, predicted in pairs:
        matrix[index[true], index[predicted]] += 1
    return matrix


def check_citations(answer: str, sources: list) -> dict:
    """Which ``[n]`` in ``answer`` point to one of ``sources`` (numbered from 1), which point nowhere,
    and which sources were never cited."""
    numbers = [int(n) for n in CITATION.findall(answer)]
    valid = sorted({n for n in numbers if 1 <= n <= len(sources)})
    return {"citations": len(numbers), "valid": valid,
            "dangling": sorted({n for n in numbers if not 1 <= n <= len(sources)}),
            "uncited": [n for n in range(1, len(sources) + 1) if n not in valid]}


def renumber_citations(text: str, offset: int) -> str:
    """Shift every ``[n]`` by ``offset`` (to concatenate answers that each numbered from 1)."""
    return CITATION.sub(lambda m: f"[{int(m.group(1)) + offset}]", text)


# -- trace display --------------------------------------------------------------------------
def _pre(text: str, limit: int = 4000) -> str:
    text = text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"
    return f"<pre style='white-space:pre-wrap;max-height:22em;overflow:auto'>{html.escape(text)}</pre>"


def format_step(step, number: int | None = None, total: int | None = None) -> str:
    """One ``TraceStep`` as HTML: step, inputs, prompt, raw reply, parsed output, kept/dropped, notes."""
    import json

    position = f"{number} / {total}: " if number is not None else ""
    parts = [f"<h4>{position}{html.escape(step.step)} (iteration {step.iteration}) — {step.calls} call(s), "
             f"{step.prompt_tokens} prompt + {step.completion_tokens} completion tokens, {step.seconds:.1f} s</h4>"]
    if step.inputs:
        parts.append("<b>inputs</b>" + _pre(json.dumps(step.inputs, indent=1, ensure_ascii=False, default=str), 1500))
    if step.messages:
        prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in step.messages)
        parts.append("<b>prompt</b>" + _pre(prompt))
    if step.raw is not None:
        parts.append("<b>raw reply</b>" + _pre(step.raw or "(empty)"))
    if step.parsed is not None:
        parsed = step.parsed if isinstance(step.parsed, str) else json.dumps(step.parsed, indent=1,
                                                                                 ensure_ascii=False, default=str)
        parts.append("<b>parsed output</b>" + _pre(parsed, 2500))
    if step.kept or step.dropped:
        rows = [f"kept    {h.get('score', 0):.3f}  {h.get('collection', '')}  {h.get('section', '')}"
                for h in step.kept]
        rows += [f"dropped {h.get('score', 0):.3f}  {h.get('collection', '')}  {h.get('section', '')}"
                 for h in step.dropped]
        parts.append("<b>chunks</b>" + _pre("\n".join(rows), 2500))
    if step.notes:
        parts.append("<b>notes</b><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in step.notes) + "</ul>")
    return "\n".join(parts)


# -- widgets ----------------------------------------------------------------------------------
def _run_into(output, run: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    from IPython.display import display

    with output:
        output.clear_output()
        try:
            value = run(*args, **kwargs)
            if value is not None:
                display(value)
        except Exception:  # show the error where the reader looks, not in the kernel log
            print(traceback.format_exc())


def prompt_editor(template: str, run: Callable[[str], Any], *, label: str = "Run", rows: int = 14):
    """A text area holding a prompt, a Run button that calls ``run(text)``, a Reset button and an output area.

    Nothing runs until a button is pressed, so executing the notebook headless never waits on it.
    """
    import ipywidgets as widgets

    editor = widgets.Textarea(value=template, layout=widgets.Layout(width="100%", height=f"{rows * 1.4:.0f}em"))
    run_button = widgets.Button(description=label, button_style="primary", icon="play")
    reset_button = widgets.Button(description="Reset prompt", icon="undo")
    output = widgets.Output()
    run_button.on_click(lambda _: _run_into(output, run, editor.value))

    def reset(_):
        editor.value = template

    reset_button.on_click(reset)
    return widgets.VBox([editor, widgets.HBox([run_button, reset_button]), output])


def run_panel(run: Callable[..., Any], controls: dict[str, Any], *, label: str = "Run"):
    """Controls (sliders, dropdowns, ...) plus a Run button that calls ``run(**values)`` into an output area."""
    import ipywidgets as widgets

    button = widgets.Button(description=label, button_style="primary", icon="play")
    output = widgets.Output()
    button.on_click(lambda _: _run_into(output, run, **{name: w.value for name, w in controls.items()}))
    return widgets.VBox([*controls.values(), button, output])


def trace_viewer(trace: list):
    """Page through a run's trace one step at a time (slider or Previous/Next)."""
    import ipywidgets as widgets

    if not trace:
        return widgets.HTML("<i>empty trace</i>")
    slider = widgets.IntSlider(value=1, min=1, max=len(trace), description="step")
    back = widgets.Button(description="Previous", icon="arrow-left")
    forward = widgets.Button(description="Next", icon="arrow-right")
    view = widgets.HTML()

    def show(change=None):
        view.value = format_step(trace[slider.value - 1], slider.value, len(trace))

    slider.observe(show, names="value")
    back.on_click(lambda _: setattr(slider, "value", max(1, slider.value - 1)))
    forward.on_click(lambda _: setattr(slider, "value", min(len(trace), slider.value + 1)))
    show()
    return widgets.VBox([widgets.HBox([back, slider, forward]), view])


# -- headless execution -----------------------------------------------------------------------------
@dataclass
class NotebookRun:
    name: str
    ok: bool
    seconds: float
    error: str | None = None
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
                     html_export: bool = True) -> NotebookRun:
    """Run one notebook top to bottom (cwd = its folder); write the executed copy and HTML into ``out_dir``.

    A failing cell does not raise: the run says ``ok=False`` with the error, and the
    partly executed notebook is still written.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
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
    run = NotebookRun(path.stem, error is None, time.perf_counter() - started, error)
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


def execute_notebooks(paths: Iterable[str | Path] | None = None, out_dir: str | Path = DEFAULT_OUT,
                      timeout: int = 600, *, fast: bool | None = None, html_export: bool = True,
                      verbose: bool = True) -> list[NotebookRun]:
    """Run notebooks one after another (all of the series by default); return one ``NotebookRun`` each."""
    kernel = venv_kernel_name()
    env = kernel_env(fast)
    runs = []
    for path in (list(paths) if paths is not None else notebook_paths()):
        run = execute_notebook(path, out_dir, timeout=timeout, env=env, kernel_name=kernel,
                               html_export=html_export)
        runs.append(run)
        if verbose:
            state = "ok" if run.ok else "FAILED"
            print(f"{run.name}: {state} in {run.seconds:.0f} s" + (f"\n{run.error}" if run.error else ""))
    return runs
