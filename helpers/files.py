"""Writing files so that a crash never leaves half of one."""
from __future__ import annotations

from pathlib import Path


def write_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path``, then rename it to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path
