"""Test helper: a real Arize Phoenix server on 127.0.0.1 (its SQLite storage in a temp dir), started and stopped.

Phoenix pins many packages, so it lives in its own virtualenv (``.venv-phoenix`` at the repository root, made by
``scripts/test.sh``, which exports ``CITELOCK_PHOENIX`` with its ``phoenix`` executable).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from citelock.runtime._server import free_port

__all__ = ["phoenix_executable", "running_phoenix"]

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 300.0


def phoenix_executable() -> Path | None:
    """``$CITELOCK_PHOENIX``, else ``.venv-phoenix/bin/phoenix`` at the repository root, if it exists."""
    configured = os.environ.get("CITELOCK_PHOENIX")
    path = Path(configured) if configured else REPO / ".venv-phoenix" / "bin" / "phoenix"
    return path if path.is_file() else None


@contextmanager
def running_phoenix(executable: Path, workdir: Path) -> Iterator[str]:
    """Start ``phoenix serve`` on free 127.0.0.1 ports with its storage in ``workdir``; yield its base URL."""
    port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{workdir / 'phoenix.db'}",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    process = subprocess.Popen([str(executable), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"phoenix exited with {process.returncode}; see {workdir / 'phoenix.log'}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"phoenix did not answer /healthz within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
