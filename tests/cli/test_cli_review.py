"""``citelock review``: accounts and tokens from the command line, and ``serve`` as a real process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.review import authenticate
from citelock.store import AccountStore
from support.review_desk import seed_desk

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "desk.db")
    seed_desk(path, accounts=False)
    return path


def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["review", *args], input=stdin)
    return result.exit_code, result.output


def test_accounts_from_the_command_line(db: str) -> None:
    code, out = run("adduser", "erin", "--role", "admin", "--password-stdin", "--db", db, stdin="erin-password-1\n")
    assert code == 0 and "created admin erin" in out
    accounts = AccountStore(db)
    assert authenticate(accounts, "erin", "erin-password-1") is not None
    assert authenticate(accounts, "erin", "wrong-password") is None
    code, out = run("adduser", "erin", "--password-stdin", "--db", db, stdin="another-password\n")
    assert code == 2 and "already exists" in out
    code, out = run("adduser", "frank", "--password-stdin", "--db", db, stdin="short\n")
    assert code == 2 and "at least 10 characters" in out
    code, out = run("adduser", "frank", "--role", "owner", "--password-stdin", "--db", db, stdin="frank-password\n")
    assert code == 2 and "role must be reviewer or admin" in out
    assert run("passwd", "erin", "--password-stdin", "--db", db, stdin="new-password-22\n")[0] == 0
    assert authenticate(accounts, "erin", "new-password-22") is not None
    assert run("role", "erin", "reviewer", "--db", db)[0] == 0
    code, out = run("users", "--json", "--db", db)
    assert code == 0 and [(a["username"], a["role"], a["disabled"]) for a in json.loads(out)] == [
        ("erin", "reviewer", False)
    ]
    assert run("disable", "erin", "--db", db)[0] == 0
    assert authenticate(accounts, "erin", "new-password-22") is None
    assert run("enable", "erin", "--db", db)[0] == 0
    assert authenticate(accounts, "erin", "new-password-22") is not None
    code, out = run("passwd", "nobody", "--password-stdin", "--db", db, stdin="whatever-password\n")
    assert code == 2 and "no account named 'nobody'" in out


def test_api_tokens_from_the_command_line(db: str) -> None:
    run("adduser", "gina", "--password-stdin", "--db", db, stdin="gina-password-1\n")
    code, out = run("token", "gina", "--days", "1", "--label", "nightly export", "--db", db)
    assert code == 0
    token = out.strip().splitlines()[-1]
    cred = AccountStore(db).credential(token, kind="token")
    assert cred is not None and cred.username == "gina" and cred.expires_at is not None
    code, out = run("revoke", "gina", "--db", db)
    assert code == 0 and "revoked 1 token" in out
    assert AccountStore(db).credential(token, kind="token") is None
    assert run("token", "nobody", "--db", db)[0] == 2


def test_a_missing_database_is_an_input_error(tmp_path: Path) -> None:
    code, out = run("users", "--db", str(tmp_path / "none.db"))
    assert code == 2 and "no citelock database" in out


def test_serve_runs_the_desk_on_loopback(db: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "citelock", "review", "serve", "--db", db, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/login", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = proc.stdout.read() if proc.stdout else ""
                    raise AssertionError(f"citelock review serve did not come up: {log}") from None
                time.sleep(0.2)
        assert response.status_code == 200 and "Sign in" in response.text
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert httpx.get(f"http://127.0.0.1:{port}/api/v1/queue").status_code == 401
        assert "server" not in {k.lower() for k in response.headers}
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert f"citelock review desk on http://127.0.0.1:{port}" in out


@pytest.mark.parametrize("command", [["passwd", "--password-stdin"], ["role", "admin"], ["disable"], ["enable"]])
def test_account_commands_name_an_unknown_account(db: str, command: list[str]) -> None:
    name, rest = "nobody", command[1:]
    code, out = run(command[0], name, *rest, "--db", db, stdin="whatever-password\n")
    assert code == 2 and "no account named 'nobody'" in out
