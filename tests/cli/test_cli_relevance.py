"""``--relevance free|judged|off`` on ``check``, ``answer`` and ``audit``: the ``OFF_QUESTION`` check from the
command line, its bad combinations refused before anything runs, and ``judged`` against the real local server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock.audit import AuditSettings
from citelock.cli import app
from citelock.store import ResultStore

runner = CliRunner()
CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-3", "text": "Harlow's city council voted 7 to 2 to raise the bridge toll to $3.50 in 2023."},
]
OPENED = "The Aurora Bridge opened to traffic in 1932."
OFF = "Who designed the toll?"  # the answer below says when it opened: off-question


def _files(tmp_path: Path, question: str) -> tuple[str, str]:
    context = "\n".join(f"[{c['id']}] {c['text']}" for c in CHUNKS)
    prompt = {
        "messages": [{"role": "user", "content": f"Context:\n{context}\nQuestion: {question}"}],
        "chunks": CHUNKS,
        "question": question,
    }
    p, a = tmp_path / "p.json", tmp_path / "a.json"
    p.write_text(json.dumps(prompt), encoding="utf-8")
    a.write_text(json.dumps({"claims": [{"text": OPENED, "citations": [{"chunk_id": "c-1", "span": OPENED}]}]}))
    return str(p), str(a)


def _reasons(stdout: str) -> list[str]:
    return [f["reason"] for f in json.loads(stdout)["findings"]]


def test_check_runs_the_free_relevance_check_unless_told_off(tmp_path: Path) -> None:
    prompt, answer = _files(tmp_path, OFF)
    default = runner.invoke(app, ["check", "--prompt", prompt, "--answer", answer, "--json"])
    assert default.exit_code == 1 and _reasons(default.stdout) == ["OFF_QUESTION"]
    free = runner.invoke(app, ["check", "--prompt", prompt, "--answer", answer, "--json", "--relevance", "free"])
    assert free.exit_code == 1 and _reasons(free.stdout) == ["OFF_QUESTION"]
    off = runner.invoke(app, ["check", "--prompt", prompt, "--answer", answer, "--json", "--relevance", "off"])
    assert off.exit_code == 0, off.output
    assert _reasons(off.stdout) == []


def test_a_surface_takes_relevance_off_too(tmp_path: Path) -> None:
    prompt, answer = _files(tmp_path, OFF)
    surface = ["--surface", "docs", "--stakes", "low", "--sample-rate", "0"]
    db = str(tmp_path / "c.db")
    on = runner.invoke(app, ["check", "--prompt", prompt, "--answer", answer, *surface, "--db", db, "--json"])
    assert "OFF_QUESTION" in _reasons(on.stdout)
    (stored,) = ResultStore(db).latest()
    assert stored.policy is not None and stored.policy.relevance == "free" and stored.relevance is not None
    off_args = ["check", "--prompt", prompt, "--answer", answer, *surface, "--relevance", "off", "--json"]
    off = runner.invoke(app, off_args)
    assert off.exit_code == 0, off.output
    assert "OFF_QUESTION" not in _reasons(off.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--relevance", "sometimes"], "--relevance must be free, judged or off"),
        (["--relevance", "judged", "--surface", "docs"], "give --relevance-base-url"),
        (["--relevance-base-url", "http://127.0.0.1:9/v1"], "give --relevance judged too"),
        (["--relevance", "judged", "--relevance-base-url", "http://127.0.0.1:9/v1"], "needs a surface policy"),
        (
            ["--relevance", "judged", "--relevance-base-url", "127.0.0.1:9", "--surface", "docs"],
            "--relevance-base-url '127.0.0.1:9': expected an http(s) URL",
        ),
    ],
)
def test_bad_relevance_options_exit_2_naming_what_was_expected(tmp_path: Path, args: list[str], message: str) -> None:
    prompt, answer = _files(tmp_path, OFF)
    db = tmp_path / "never.db"
    done = runner.invoke(app, ["check", "--prompt", prompt, "--answer", answer, "--db", str(db), *args])
    assert done.exit_code == 2, done.output
    assert message in done.output
    assert not db.exists()  # refused before any database was opened


def test_an_audit_keeps_relevance_in_its_settings_only_when_it_is_not_the_default() -> None:
    assert "relevance" not in AuditSettings().describe()  # an audit begun before the option resumes unchanged
    off = AuditSettings(relevance="off")
    assert off.describe()["relevance"] == "off"
    assert off.build_guard().relevance == "off" and AuditSettings().build_guard().relevance == "free"
    surface = AuditSettings(surface="docs", stakes="low", sample_rate=0.0, relevance="off").build_guard()
    assert surface.policy is not None and surface.policy.relevance == "off"


@pytest.mark.server
def test_judged_relevance_asks_the_real_server_about_an_answer_the_free_check_did_not_pass(
    llama_server: Any, tmp_path: Path
) -> None:
    prompt, answer = _files(tmp_path, OFF)
    db = str(tmp_path / "j.db")
    args = ["--surface", "docs", "--stakes", "low", "--sample-rate", "0", "--db", db, "--json"]
    judged = ["--relevance", "judged", "--relevance-base-url", llama_server.base_url]
    done = runner.invoke(app, ["check", "--prompt", prompt, "--answer", answer, *args, *judged])
    assert done.exit_code in (0, 1), done.output
    (stored,) = ResultStore(db).latest()
    assert stored.policy is not None and stored.policy.relevance == "judged"
    assert stored.relevance is not None and stored.relevance.judge_label in ("yes", "partial", "no")  # it was asked
    if stored.relevance.judge_label == "no":
        assert "OFF_QUESTION" in _reasons(done.stdout)
