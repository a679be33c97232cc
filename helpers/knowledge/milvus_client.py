"""Opening a Milvus database and telling its failures apart: a path that cannot hold Milvus Lite, a
directory another process holds, a server that does not answer, and a collection whose files are
damaged (named, with the command that rebuilds it, while the other collections stay usable)."""
from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.errors import DatabaseLockedError, VectorStoreError

_LOCAL_GRPC = {"grpc.keepalive_time_ms": 2**31 - 1, "grpc.keepalive_permit_without_calls": False}


def lock_holders(path: Path) -> list[str]:
    """PIDs (and command lines) of other processes with files open under ``path``."""
    holders = []
    for proc in Path("/proc").glob("[0-9]*"):
        if proc.name == str(os.getpid()):
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if str(os.readlink(fd)).startswith(str(path)):
                    cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                    holders.append(f"pid {proc.name} ({cmd[:80]})")
                    break
        except OSError:
            continue
    return holders



def check_local_path(path: Path) -> None:
    """Refuse a Milvus Lite path that cannot hold a database, saying what to do."""
    fix = "Set DSL_MILVUS_URI (or vector_db.uri) to a path such as data/milvus/deepsearch.db."
    if not path.name.endswith(".db"):
        raise VectorStoreError(f"the Milvus Lite path {path} must end in .db (Milvus Lite creates a directory "
                               f"of that name). {fix}")
    resolved = path.resolve()
    if len(resolved.parts) > 1 and resolved.parts[1] in ("proc", "sys", "dev"):
        raise VectorStoreError(f"the Milvus Lite path {path} is under /{resolved.parts[1]}, a system file system "
                               f"where no database can be stored. {fix}")
    if resolved.exists() and not resolved.is_dir():
        raise VectorStoreError(f"the Milvus Lite path {path} is an existing file, not a database directory: "
                               f"move that file away or choose another path. {fix}")


def connect(uri: str, token: str, is_local: bool):
    """A ``MilvusClient`` for ``uri`` (a Milvus Lite directory, created if needed, or a server); a
    locked or unreachable database says what to do."""
    from pymilvus import MilvusClient

    if is_local:
        check_local_path(Path(uri))
        try:
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VectorStoreError(f"cannot create the folder of the Milvus Lite database {uri}: {exc}. "
                                   "Choose a writable path with DSL_MILVUS_URI (or vector_db.uri).") from exc
    try:
        # the client pings every 10 s by default, which the embedded server refuses
        # ("too_many_pings" lines on stderr mid-run); a local server needs no keepalive
        options = {"grpc_options": _LOCAL_GRPC} if is_local else {}
        client = MilvusClient(uri=uri, token=token, **options)
    except Exception as exc:  # pymilvus wraps the cause in several exception types
        text = str(exc)
        holders = lock_holders(Path(uri).resolve()) if is_local else []
        if holders or "lock" in text.lower():
            holders = ", ".join(holders) or "another process"
            raise DatabaseLockedError(
                f"the Milvus Lite database {uri} is locked by {holders}. Milvus Lite allows one "
                "process per directory: close the other notebook kernel or program, use another "
                "path (vector_db.uri / MILVUS_URI), or share it through server mode "
                f"(`milvus-lite server --data-dir {uri} --port 19530`, then "
                "MILVUS_URI=http://127.0.0.1:19530).") from exc
        fix = ("Start the Milvus server at that address, or unset MILVUS_URI to use the Milvus Lite directory "
               "(vector_db.uri)" if not is_local else "Check the path, or choose another with DSL_MILVUS_URI")
        raise VectorStoreError(f"cannot open the vector database at {uri}: {text}. {fix}") from exc
    if is_local:  # a damaged collection's files: Milvus Lite logs tracebacks, and our errors name it
        for name in ("milvus_lite.adapter.grpc.servicer", "pymilvus.decorators"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    return client


def is_damage(is_local: bool, name: str, exc: Exception) -> bool:
    """Whether ``exc`` is a file of Milvus Lite collection ``name`` that cannot be read (truncated, damaged)."""
    return is_local and f"{os.sep}collections{os.sep}{name}{os.sep}" in str(exc)


def damaged_error(uri: str, name: str, exc: Exception) -> VectorStoreError:
    """The error for a damaged collection: which one, why, and the command that rebuilds it."""
    reason = str(getattr(exc, "message", "") or exc).split(": ", 1)[-1][:200]
    return VectorStoreError(
        f"collection '{name}' of the Milvus Lite database {uri} is damaged ({reason}); the other collections "
        f"stay usable. Rebuild it: `python -m helpers ingest --collection {name} --force` (a knowledge-base "
        f"collection) or `python -m helpers ingest SOURCES --collection {name} --force`.")


@contextmanager
def collection_errors(uri: str, is_local: bool, name: str, doing: str) -> Iterator[None]:
    """Library errors while ``doing`` something to collection ``name`` as ``VectorStoreError``, a damaged one named."""
    try:
        yield
    except VectorStoreError:
        raise
    except Exception as exc:  # pymilvus raises several types (MilvusException, ParamError, ...)
        if is_damage(is_local, name, exc):
            raise damaged_error(uri, name, exc) from exc
        raise VectorStoreError(f"cannot {doing} collection '{name}': {exc}") from exc


def readable_collections(client, uri: str) -> list[str]:
    """The collections of a Milvus Lite directory that open; each damaged one is left out with a warning."""
    names = []
    for folder in sorted((Path(uri) / "collections").iterdir()):
        try:
            client.has_collection(folder.name)
            names.append(folder.name)
        except Exception as exc:  # noqa: BLE001 - damaged: said, and the others are used
            warnings.warn(str(damaged_error(uri, folder.name, exc)), stacklevel=3)
    return names
