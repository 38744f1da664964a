"""The gateway app served by a real uvicorn server on a free port of 127.0.0.1, in a thread of the test process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def served(app: Any) -> Iterator[str]:
    """Serve ``app``; yield its base URL (``http://127.0.0.1:PORT``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the gateway did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def gateway_process(
    *args: str, env: dict[str, str] | None = None, ready_s: float = 180, pids: list[int] | None = None
) -> Iterator[str]:
    """Run ``citelock gateway ARGS`` (a real process, uvicorn workers and all) until ``/readyz`` is 200.

    ``pids``, when given, receives the process id (its workers are its children).
    """
    import os
    import signal
    import subprocess
    import sys
    import tempfile

    import httpx

    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    process = subprocess.Popen(
        [sys.executable, "-m", "citelock", "gateway", "--port", str(port), *args],
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    if pids is not None:
        pids.append(process.pid)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ready_s
    try:
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"citelock gateway exited {process.returncode}: {log.read().decode()[-3000:]}")
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("citelock gateway did not become ready")
            time.sleep(0.25)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        log.close()


@contextmanager
def served_surface(surface: Any, upstream: str, db: str, name: str = "legal") -> Iterator[str]:
    """Serve a gateway with one surface (the default) before a llama.cpp-kind ``upstream``; yield its base URL."""
    from citelock.gateway import GatewaySettings, create_app

    settings = GatewaySettings(
        surfaces={name: surface}, default_surface=name, db=db, upstream=upstream, server="llama.cpp"
    )
    with served(create_app(settings)) as url:
        yield url
