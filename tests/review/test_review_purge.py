"""Ended review-desk sessions are deleted without anyone asking: a failed purge is retried, ``citelock review
purge-sessions`` does it from cron, and several processes may purge one database at once. (The desk's purging
after sign-ins is tested with the idle timeout, in ``tests/review/test_review_idle.py``.)

The account stores read a test clock, so "an hour later" is a step of that clock, not a wait.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from citelock.cli import app as cli
from citelock.review._purge import SessionPurge
from citelock.store import AccountStore, make_engine
from support.review_desk import Clock, digest, stored

IDLE = timedelta(minutes=30)
EVERY = timedelta(minutes=10)


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
    assert digest(expired) in stored(writable)
    purge.accounts = writable  # the database writable again: the next sign-in's purge runs at once
    assert purge() == 1
    assert digest(expired) not in stored(writable)
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
            results.put(("opened", digest(accounts.open("alice"))))
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
        ended.add(digest(seeder.open("alice", kind=kind, lifetime=lifetime)))  # type: ignore[arg-type]
    kept = digest(seeder.open("alice", kind="token", lifetime=None))
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
    assert stored(accounts) == {digest(idle), digest(token)}
    code, out = run("--db", db, "--idle-timeout", "240", "--json")  # idle 3 hours: within 4 hours, kept
    assert code == 0 and json.loads(out) == {"deleted": 0, "idle_timeout_minutes": 240.0}
    code, out = run("--db", db, "--idle-timeout", "30", "--json")
    assert code == 0 and json.loads(out) == {"deleted": 1, "idle_timeout_minutes": 30.0}
    assert stored(accounts) == {digest(token)}
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
