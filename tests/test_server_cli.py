"""The command line against a real server: ``citelock answer --backend openai`` and ``citelock serve``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.runtime._server import ManagedServer, free_port

pytestmark = pytest.mark.server


def test_answer_with_openai_backend_against_the_started_server(llama_server: ManagedServer, tmp_path: Path) -> None:
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(
        "\n".join(
            json.dumps(c)
            for c in [
                {"id": "b1", "text": "The Arden bridge opened in 1932. It is 400 meters long."},
                {"id": "b2", "text": "The Belmont library opened in 1901."},
            ]
        ),
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app,
        [
            "answer",
            "--backend", "openai",
            "--base-url", llama_server.base_url,
            "-q", "When did the Arden bridge open?",
            "--chunks", str(chunks),
            "--policy", "sentence",
            "--max-tokens", "400",
            "--db", str(tmp_path / "log.db"),
            "--json",
        ],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert data["backend"] == "openai" and data["span_policy"] == "sentence"
    assert data["generation"]["enforced"] is True
    reasons = {f["reason"] for f in data["findings"]}
    assert not reasons & {"ID_NOT_IN_PROMPT", "SPAN_NOT_IN_CHUNK", "FABRICATED_ID"}
    assert result.exit_code == (0 if data["ok"] else 1)


def test_serve_starts_answers_and_stops_on_sigterm() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", "from citelock.cli import main; main()", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in line, line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as response:
            models = json.load(response)
        assert models["data"] and models["data"][0]["id"].endswith(".gguf")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        time.sleep(0.5)
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
