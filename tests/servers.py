"""Helpers for tests that start a local server (Milvus Lite, llama.cpp, JupyterLab) on 127.0.0.1."""
from __future__ import annotations

import socket
import time

from helpers.models.llama_server import free_port

__all__ = ["free_port", "wait_for_port"]


def wait_for_port(port: int, seconds: float = 30.0) -> bool:
    """True once something accepts connections on 127.0.0.1:``port``; False after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.5)
    return False
