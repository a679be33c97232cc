"""A notebook's workspace: its configuration, its own Milvus Lite directory and knowledge base
(copied from a shared, fingerprinted template instead of embedding it again), and the
environment report shown at the top of notebook 00."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from helpers.config import PROJECT_ROOT, Config, fast_mode, is_server_uri, load_config, with_overrides
from helpers.errors import InputError
from helpers.prompts import PromptSet, prompt_version

NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
DB_DIR_ENV = "DSL_NOTEBOOK_DB_DIR"  # where per-notebook Milvus Lite directories go (default outputs/milvus)
PROMPTS_ENV = "DSL_LAB_PROMPTS"  # the lab's prompt file (default outputs/prompts/lab_prompts.json)


def prompts_file() -> Path:
    """The file where notebooks save edited prompts and load them back (notebook 07, ``--prompts``).
    Headless runs of the series point ``DSL_LAB_PROMPTS`` elsewhere, so they never read or change a
    learner's saved prompts."""
    chosen = os.environ.get(PROMPTS_ENV)
    path = Path(chosen) if chosen else PROJECT_ROOT / "outputs" / "prompts" / "lab_prompts.json"
    return path if path.is_absolute() else PROJECT_ROOT / path


def lab_prompts() -> PromptSet:
    """The saved prompt set (the shipped prompts where nothing was saved)."""
    path = prompts_file()
    return PromptSet.load(path) if path.exists() else PromptSet()


def forget_prompt(name: str) -> str:
    """Remove one saved edit from the lab's prompt file (the shipped text applies again); says what it did."""
    saved = lab_prompts().edited
    if name not in saved:
        return f"{name}: no saved edit; the shipped text applies"
    PromptSet({key: text for key, text in saved.items() if key != name}).save(prompts_file())
    return f"{name}: saved edit removed from {prompts_file()}; the shipped text applies again"


def save_prompt(name: str, text: str) -> str:
    """Add one edited prompt to the lab's prompt file, keeping the others saved there; says what it did."""
    path = PromptSet({**lab_prompts().edited, name: text}).save(prompts_file())
    return (f"saved {name} ({prompt_version(name, text)}) to {path}; notebook 07 loads it, and the command line "
            f"takes it with --prompts {path}")


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


def notebook_db_folder() -> Path:
    """Where the notebooks' Milvus Lite directories, and the prepared knowledge base, live."""
    return milvus_path("_").parent


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


def copy_prepared_knowledge_base(config: Config, target: Path, progress: bool = False) -> str:
    """Fill a new database at ``target`` by copying a shared, closed copy of the knowledge base.

    The shared copy (``_template_<hash>.db`` in the notebook databases' folder, the hash
    covering the files, settings and code it is built from) is built once, by whichever
    notebook or test session needs it first, under a file lock; later ones copy it (about
    a megabyte) instead of embedding every chunk again.
    """
    from helpers.knowledge.ingest import ingest_manifest
    from helpers.knowledge.vectorstore import close_store

    folder = notebook_db_folder()
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
            template_config = with_overrides(config, {"vector_db.uri": str(template)})
            reports = ingest_manifest(template_config, progress=progress)
            close_store(template_config)
            ready.write_text(f"{sum(r.chunks_added for r in reports)} chunks\n")
            how = f"built the knowledge base ({sum(r.chunks_added for r in reports)} chunks embedded) and copied it"
        shutil.copytree(template, target)
    return how


def _refresh_notebook_db(config: Config, target: Path, progress: bool) -> str | None:
    """Seed a missing per-notebook database; rebuild one made from other files, settings or code."""
    from helpers.knowledge.milvus_client import lock_holders
    from helpers.knowledge.vectorstore import close_store

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
    how = copy_prepared_knowledge_base(config, target, progress)
    stamp.write_text(key + "\n")
    return how


def knowledge_base(config: Config, progress: bool = True, quiet: bool = False):
    """Make sure the notebook's database holds the manifest's collections; return ``(store, embedder)``.

    A notebook's first run copies a prepared knowledge base when one exists for the
    same files and settings (built once, see ``copy_prepared_knowledge_base``); then
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
            and target.parent.resolve() == notebook_db_folder().resolve():
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


def rendered_pages(folder: str | Path) -> dict[str, dict]:
    """A rendered folder's ``index.json``: notebook name -> what its page was made from ({} if none)."""
    index = Path(folder) / "index.json"
    return json.loads(index.read_text(encoding="utf-8")) if index.exists() else {}


def choose_mode(notebook: str, mode: str | None = None) -> str:
    """Set this kernel's mode ("fast": the 0.5B model and small budgets; "full": the default model
    and budgets; None: as ``DSL_FAST`` says) and say what it is and how long this notebook took in
    its last rendering in that mode, on which machine."""
    if mode not in (None, "fast", "full"):
        raise InputError(f"MODE must be 'fast', 'full' or None, not {mode!r}")
    if mode is not None:
        os.environ["DSL_FAST"] = "1" if mode == "fast" else "0"
    folder = "fast" if fast_mode() else "full"
    page = rendered_pages(NOTEBOOK_DIR / "rendered" / folder).get(notebook)
    said = ("FAST mode: the 0.5B model, small budgets, few questions" if folder == "fast" else
            "FULL mode: the default model and budgets")
    if page is None:
        return f"{said}. (No rendering of this notebook in this mode yet: see 'What it costs' above.)"
    return (f"{said}. Its last rendering in this mode ran for {page['seconds'] / 60:.1f} min on "
            f"{page['machine']} ({page['date']}). Set MODE above to switch, then run from the top.")


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
    from helpers.models.backend import available_cores
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
