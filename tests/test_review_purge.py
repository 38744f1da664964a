"""Ended review-desk sessions are deleted without anyone asking: after sign-ins (at most once per purge interval
per process), by ``citelock review purge-sessions`` from cron, and safely by several processes at once.

The desk's account store reads a test clock, so "two hours later" is a step of that clock, not a wait.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select
from typer.testing import CliRunner

from citelock import InputError
from citelock.cli import app as cli
from citelock.review import create_app
from citelock.review._purge import SessionPurge
from citelock.store import AccountStore, make_engine
from citelock.store._accounts import _sessions
from review_desk import Seeded, copy_seeded, seed_desk
from test_review_app import BASE, sign_in
from test_review_idle import Clock

IDLE = timedelta(minutes=30)
EVERY = timedelta(minutes=10)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed_desk(str(tmp_path_factory.mktemp("desk") / "desk.db"))


@pytest.fixture
def seeded(template: Seeded, tmp_path: Path) -> Seeded:
    return copy_seeded(template, str(tmp_path / "desk.db"))


@pytest.fixture
def clock(seeded: Seeded) -> Clock:
    made = Clock()
    seeded.desk.accounts.clock = made
    return made


@pytest.fixture
def client(seeded: Seeded, clock: Clock) -> Iterator[TestClient]:
    with TestClient(create_app(seeded.desk, idle_timeout=IDLE, purge_interval=EVERY), base_url=BASE) as c:
        yield c


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def stored(accounts: AccountStore) -> set[str]:
    """The digests of every stored session and token."""
    with accounts.engine.connect() as conn:
        return {str(d) for d in conn.execute(select(_sessions.c.token_sha256)).scalars()}


class Deletes:
    """Counts the DELETE statements an engine runs on the sessions table."""

    def __init__(self, accounts: AccountStore) -> None:
        self.count = 0
        self.engine = accounts.engine
        event.listen(self.engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("DELETE") and "citelock_review_sessions" in statement:
            self.count += 1

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


def test_a_sign_in_purges_ended_sessions_and_tokens_and_keeps_the_rest(
    client: TestClient, seeded: Seeded, clock: Clock
) -> None:
    accounts = seeded.desk.accounts
    expired = accounts.open("bob", lifetime=timedelta(hours=1))
    idle = accounts.open("bob", lifetime=timedelta(hours=12))  # valid for hours, but unused past the idle timeout
    old_token = accounts.open("bob", kind="token", lifetime=timedelta(hours=1))
    kept_token = accounts.open("bob", kind="token", lifetime=None)  # API tokens never idle out
    clock.advance(hours=2)
    in_use = accounts.open("root")
    assert sign_in(client, "alice").status_code == 303
    alice = client.cookies.get("citelock_review_session")
    assert alice
    left = stored(accounts)
    assert {_digest(t) for t in (expired, idle, old_token)}.isdisjoint(left)
    assert left == {_digest(t) for t in (kept_token, in_use, alice)}
    assert client.get("/api/v1/me").json()["username"] == "alice"  # the sign-in itself stands


def test_the_desk_purges_at_most_once_per_interval(client: TestClient, seeded: Seeded, clock: Clock) -> None:
    accounts = seeded.desk.accounts
    deletes = Deletes(accounts)
    try:
        assert sign_in(client, "alice").status_code == 303
        assert deletes.count == 1
        short = accounts.open("bob", lifetime=timedelta(minutes=2))
        clock.advance(minutes=3)  # `short` has expired, but the last purge was 3 minutes ago
        for name in ("bob", "root", "alice"):
            assert sign_in(client, name).status_code == 303
        assert deletes.count == 1
        assert _digest(short) in stored(accounts)
        clock.advance(minutes=7)  # 10 minutes since the last purge: due again
        assert sign_in(client, "bob").status_code == 303
        assert deletes.count == 2
        assert _digest(short) not in stored(accounts)
        clock.advance(minutes=-60)  # a clock set back does not postpone purging for an hour
        assert sign_in(client, "bob").status_code == 303
        assert deletes.count == 3
    finally:
        deletes.close()


def test_only_a_sign_in_purges(client: TestClient, seeded: Seeded, clock: Clock) -> None:
    accounts = seeded.desk.accounts
    assert sign_in(client, "alice").status_code == 303
    clock.advance(minutes=20)
    expired = accounts.open("bob", lifetime=timedelta(minutes=1))
    clock.advance(minutes=20)
    failed = sign_in(client, "bob", "wrong password")
    assert failed.status_code == 401
    assert client.get("/", follow_redirects=False).status_code == 303  # alice idled out (her row is ended)
    assert _digest(expired) in stored(accounts)  # a failed sign-in or a page view does not purge


def test_without_a_purge_interval_the_desk_never_purges(seeded: Seeded, clock: Clock) -> None:
    accounts = seeded.desk.accounts
    expired = accounts.open("bob", lifetime=timedelta(minutes=1))
    clock.advance(hours=1)
    with TestClient(create_app(seeded.desk, purge_interval=None), base_url=BASE) as c:
        assert sign_in(c, "alice").status_code == 303
    assert _digest(expired) in stored(accounts)


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(minutes=-1)])
def test_a_purge_interval_must_be_positive(seeded: Seeded, bad: timedelta) -> None:
    with pytest.raises(InputError, match="purge interval must be positive"):
        create_app(seeded.desk, purge_interval=bad)


def test_a_failed_purge_is_logged_and_retried_after_the_next_sign_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = str(tmp_path / "desk.db")
    clock = Clock()
    writable = AccountStore(db, clock=clock)
    writable.add("alice", role="reviewer", password_hash="h")
    expired = writable.open("alice", lifetime=timedelta(minutes=1))
    clock.advance(hours=1)
    read_only = make_engine(db)
    event.listen(read_only, "connect", lambda dbapi, _: dbapi.execute("PRAGMA query_only=ON"))
    purge = SessionPurge(AccountStore(read_only, clock=clock), idle=IDLE, interval=EVERY)
    with caplog.at_level(logging.WARNING, logger="citelock.review"):
        assert purge() is None  # the database refused the write
    assert "purging ended review-desk sessions failed" in caplog.text and "readonly" in caplog.text
    assert _digest(expired) in stored(writable)
    purge.accounts = writable  # the database writable again: the next sign-in's purge runs at once
    assert purge() == 1
    assert _digest(expired) not in stored(writable)
    assert purge() is None  # and then not before the interval has passed


# --- several processes on one database ------------------------------------------------------------------------

PURGERS = 4
OPENERS = 2
FRESH_PER_OPENER = 15
ENDED = 40


def _purger(target: str, barrier: Any, results: Any) -> None:
    try:
        accounts = AccountStore(target)
        barrier.wait(timeout=60)
        results.put(("purged", accounts.purge_expired(idle=IDLE)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _opener(target: str, barrier: Any, results: Any) -> None:
    try:
        accounts = AccountStore(target)
        barrier.wait(timeout=60)
        for _ in range(FRESH_PER_OPENER):
            results.put(("opened", _digest(accounts.open("alice"))))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def test_several_processes_purging_at_once_delete_each_ended_row_once(target: str) -> None:
    past = Clock()
    past.now = datetime.now(UTC) - timedelta(days=1)
    seeder = AccountStore(target, clock=past)
    seeder.add("alice", role="reviewer", password_hash="h")
    ended = set()
    for i in range(ENDED):  # expired, idle or expired tokens: what every purger would delete
        kind, lifetime = [
            ("session", timedelta(hours=1)),
            ("session", timedelta(days=2)),
            ("token", timedelta(hours=1)),
        ][i % 3]
        ended.add(_digest(seeder.open("alice", kind=kind, lifetime=lifetime)))  # type: ignore[arg-type]
    kept = _digest(seeder.open("alice", kind="token", lifetime=None))
    seeder.engine.dispose()
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(PURGERS + OPENERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_purger, args=(target, barrier, results)) for _ in range(PURGERS)]
    procs += [ctx.Process(target=_opener, args=(target, barrier, results)) for _ in range(OPENERS)]
    for p in procs:
        p.start()
    messages = [results.get(timeout=120) for _ in range(PURGERS + OPENERS * FRESH_PER_OPENER)]
    for p in procs:
        p.join(timeout=60)
    errors = [m[1] for m in messages if m[0] == "error"]
    assert errors == [] and [p.exitcode for p in procs] == [0] * len(procs)
    purged = [m[1] for m in messages if m[0] == "purged"]
    opened = {m[1] for m in messages if m[0] == "opened"}
    assert len(purged) == PURGERS and sum(purged) == ENDED  # each ended row deleted by exactly one purger
    assert len(opened) == OPENERS * FRESH_PER_OPENER
    assert stored(AccountStore(target)) == opened | {kept}  # sign-ins racing the purges all survive


# --- citelock review purge-sessions -----------------------------------------------------------------------------


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["review", "purge-sessions", *args])
    return result.exit_code, result.output


def test_purge_sessions_for_cron(tmp_path: Path) -> None:
    db = str(tmp_path / "desk.db")
    past = Clock()
    past.now = datetime.now(UTC) - timedelta(hours=3)
    accounts = AccountStore(db, clock=past)
    accounts.add("alice", role="reviewer", password_hash="h")
    expired = accounts.open("alice", lifetime=timedelta(hours=1))
    idle = accounts.open("alice", lifetime=timedelta(hours=12))
    token = accounts.open("alice", kind="token", lifetime=None)
    code, out = run("--db", db)
    assert code == 0 and out.strip() == "deleted 1 session(s) and token(s) (expired)"
    assert stored(accounts) == {_digest(idle), _digest(token)}
    code, out = run("--db", db, "--idle-timeout", "240", "--json")  # idle 3 hours: within 4 hours, kept
    assert code == 0 and json.loads(out) == {"deleted": 0, "idle_timeout_minutes": 240.0}
    code, out = run("--db", db, "--idle-timeout", "30", "--json")
    assert code == 0 and json.loads(out) == {"deleted": 1, "idle_timeout_minutes": 30.0}
    assert stored(accounts) == {_digest(token)}
    assert accounts.credential(expired, kind="session") is None


def test_purge_sessions_exit_codes(tmp_path: Path) -> None:
    db = str(tmp_path / "desk.db")
    AccountStore(db)
    code, out = run("--db", db, "--idle-timeout", "0")
    assert code == 2 and "--idle-timeout" in out
    code, out = run("--db", str(tmp_path / "none.db"))
    assert code == 2 and "no citelock database" in out
    code, out = run("--db", "postgresql://citelock@127.0.0.1:1/none")
    assert code == 4 and "cannot reach the database" in out


def test_serve_refuses_a_negative_purge_interval(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["review", "serve", "--db", str(tmp_path / "d.db"), "--purge-interval", "-1"])
    assert result.exit_code == 2 and "--purge-interval" in result.output
