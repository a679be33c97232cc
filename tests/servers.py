"""Helpers for tests that start a local server (Milvus Lite, llama.cpp, JupyterLab) on 127.0.0.1."""
from __future__ import annotations

import socket
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, seconds: float = 30.0) -> bool:
    """True once something accepts connections on 127.0.0.1:``port``; False after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.5)
    return False
