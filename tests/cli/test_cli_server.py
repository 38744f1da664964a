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
from citelock.runtime import ManagedServer, free_port

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
    reasons = {f["reason"] for f in data["result"]["report"]["findings"]}
    assert not reasons & {"ID_NOT_IN_PROMPT", "SPAN_NOT_IN_CHUNK", "FABRICATED_ID"}
    assert result.exit_code == (0 if data["result"]["decision"] == "pass" else 1)


def _models(port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as response:
        data: dict[str, object] = json.load(response)
    return data


def test_serve_restarts_a_server_that_exits_and_stops_on_sigterm() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", "from citelock.cli import main; main()", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in line, line
        models = _models(port)
        assert models["data"] and models["data"][0]["id"].endswith(".gguf")  # type: ignore[index]
        # the server process dies (as a crash would kill it): serve restarts it on the same port
        child = int(line.split("(pid ")[1].split(",")[0])
        os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while True:
            try:
                assert _models(port)["data"]
                break
            except OSError:
                assert time.monotonic() < deadline, "the server was not restarted"
                time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert f"the server exited with code -9; restarting it on port {port}" in process.stderr.read()
        time.sleep(0.5)
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_eval_compare_on_the_server_names_server_and_model(llama_server: ManagedServer, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "compare"
    for backend, modes in (("openai", "naive,quote,substring,sentence,id"), ("instructor", "naive,sentence")):
        result = CliRunner().invoke(
            app,
            [
                "eval", "compare", "--backend", backend, "--base-url", llama_server.base_url,
                "--questions", str(root / "questions.jsonl"), "--chunks", str(root / "corpus.jsonl"),
                "--limit", "3", "--modes", modes, "--judge", "none", "--max-tokens", "96",
                "--out", str(out / backend), "--no-progress",
            ],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        report = (out / backend / "report.md").read_text(encoding="utf-8")
        assert f"| server | openai-compatible at {llama_server.base_url} |" in report  # it does not name itself
        assert f"| model | {llama_server.model_name} |" in report
        assert f"--backend {backend} --base-url {llama_server.base_url}" in report  # the reproducing command
        assert "ExpertQA's human support labels" not in report and "your questions" in report
        rows = [json.loads(line) for line in (out / backend / "answers.jsonl").read_text().splitlines()]
        answers = [r for r in rows if "_header" not in r]
        assert sorted({r["mode"] for r in answers}) == sorted(modes.split(","))
        assert len(answers) == 3 * len(modes.split(","))
        for row in answers:
            if row["mode"] != "naive" and row.get("ok"):
                assert row["fabricated"] == 0, row
                assert row["span_policy"] == row["mode"] or row["downgrade"], row  # weaker only with a reason
                if row["span_policy"] != "id":
                    assert row["non_verbatim"] == 0, row
        assert "naive marker rate:" in result.output
