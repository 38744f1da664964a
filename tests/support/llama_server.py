"""pytest plugin: a real llama.cpp OpenAI-compatible server for ``@pytest.mark.server`` tests.

Imported from ``conftest.py``. One server per test session (the bundled SmolLM2-135M-Instruct), started on
127.0.0.1 at a free port, waited for, and stopped at the end.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from citelock.runtime import ManagedServer


@pytest.fixture(scope="session")
def llama_server() -> Iterator[ManagedServer]:
    missing = [m for m in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f'llama-cpp-python[server] is not installed (missing {missing}): pip install "citelock[server]"')
    server = ManagedServer(n_ctx=4096)  # room for the hostile corpus's 10,000-character chunk
    server.start()
    try:
        yield server
    finally:
        server.stop()
