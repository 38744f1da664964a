"""A Ctrl-C is an interrupt (exit 130) even when it surfaces as another error.

When SIGINT lands inside a SQLite commit, the driver's rollback that follows fails ("cannot rollback - no
transaction is active") and that error, with the ``KeyboardInterrupt`` as its context, is what reaches the command.
The real-process test (``tests/audit/test_audit.py``, SIGINT to a running audit) hits it only when the signal
lands there; these tests raise exactly that shape of error, so the mapping is checked every time.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, NoReturn

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.cli._app import EXIT_INTERRUPTED, classify, interrupted

runner = CliRunner()


def _rollback_after_ctrl_c(*_args: Any, **_kwargs: Any) -> NoReturn:
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise sqlite3.OperationalError("cannot rollback - no transaction is active")  # noqa: B904 - as the driver does


def test_an_error_raised_while_handling_ctrl_c_is_an_interrupt() -> None:
    with pytest.raises(sqlite3.OperationalError) as caught:
        _rollback_after_ctrl_c()
    assert interrupted(caught.value) and interrupted(KeyboardInterrupt())
    assert not interrupted(sqlite3.OperationalError("database is locked"))
    assert classify(sqlite3.OperationalError("database is locked"))[0] != EXIT_INTERRUPTED
    looped = ValueError("a")
    other = ValueError("b")
    looped.__context__, other.__context__ = other, looped  # a cycle ends the walk
    assert not interrupted(looped)


def test_an_audit_interrupted_inside_a_commit_exits_130_and_says_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("", encoding="utf-8")
    monkeypatch.setattr("citelock.cli._audit.run_audit", _rollback_after_ctrl_c)
    done = runner.invoke(app, ["audit", str(rows), "--out", str(tmp_path / "out")])
    assert done.exit_code == EXIT_INTERRUPTED, done.output
    assert "interrupted; what was committed is kept" in done.output and "failed" not in done.output


def test_any_command_interrupted_inside_a_commit_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("citelock.cli._check._check_and_print", _rollback_after_ctrl_c)
    answer = tmp_path / "a.json"
    answer.write_text('{"claims": []}', encoding="utf-8")
    prompt = tmp_path / "p.json"
    prompt.write_text('{"messages": [{"role": "user", "content": "q"}], "chunks": []}', encoding="utf-8")
    done = runner.invoke(app, ["check", "--prompt", str(prompt), "--answer", str(answer)])
    assert done.exit_code == EXIT_INTERRUPTED, done.output
    assert "interrupted" in done.output and "database" not in done.output
