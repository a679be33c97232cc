"""llama.cpp's own OpenAI-compatible server (``python -m llama_cpp.server``) on one of our GGUF
files, for as long as a block runs.  The comparison with deepsearcher serves our model to it this
way, and the tests check our OpenAI-compatible backend against it."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from helpers.errors import BackendUnreachableError

if TYPE_CHECKING:
    from helpers.config import LLMConfig


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_url(url: str, seconds: float, proc: subprocess.Popen | None = None, log: Path | None = None) -> None:
    """Return once ``url`` answers; ``BackendUnreachableError`` when ``proc`` exits first or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            exited = proc is not None and proc.poll() is not None
            if exited or time.monotonic() > deadline:
                why = "exited during start-up" if exited else f"did not answer within {seconds:.0f} s"
                tail = log.read_text()[-1500:] if log is not None and log.exists() else ""
                raise BackendUnreachableError(f"the server behind {url} {why}"
                                              + (f" (its log, {log}):\n{tail}" if log is not None else ""))
            time.sleep(0.5)


@contextmanager
def llama_server(gguf: Path, alias: str, *, context_size: int, threads: int, seed: int | None = None,
                 log: Path | None = None, seconds: float = 300) -> Iterator[str]:
    """Serve ``gguf`` as model ``alias`` on a free local port; yields the base URL (``http://127.0.0.1:PORT/v1``).
    The server's output goes to ``log`` (or nowhere); it is stopped when the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(context_size), "--n_threads", str(threads),
               "--n_threads_batch", str(threads), "--model_alias", alias]
    if seed is not None:
        command += ["--seed", str(seed)]
    base = f"http://127.0.0.1:{port}/v1"
    with (log.open("w") if log is not None else open(os.devnull, "w")) as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_url(f"{base}/models", seconds, proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def serve_until_stopped(config: LLMConfig, threads: int) -> None:
    """Serve the GGUF file of ``config.model`` under that name until Ctrl-C, printing how to point runs at it."""
    from helpers.models.model_files import resolve_gguf
    gguf = resolve_gguf(config.model)
    with llama_server(gguf, config.model, context_size=config.context_size, threads=threads, seed=config.seed) as url:
        print(f"serving {config.model} ({gguf.name}) at {url}; in another shell:\n"
              f"  DSL_PROVIDER=openai OPENAI_BASE_URL={url} DSL_MODEL={config.model} "
              f"python -m helpers eval --workers 2 ...\nCtrl-C stops it.", flush=True)
        while True:
            time.sleep(3600)
