"""The review desk's idle timeout: a browser session left unused ends, one in use slides on, API tokens do not
idle out, and a session's last use is written at most once a minute. Ended sessions are deleted by the desk
after sign-ins, at most once per purge interval (``tests/review/test_review_purge.py`` has the rest of the purging).

The desk's account store reads a test clock, so "31 minutes later" is a step of that clock, not a wait.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select
from typer.testing import CliRunner

from citelock import InputError
from citelock.cli import app as cli
from citelock.review import create_app
from citelock.review._purge import PURGE_INTERVAL
from citelock.store import AccountStore
from citelock.store._accounts import _sessions
from support.review_desk import BASE, Clock, Seeded, copy_seeded, digest, seed_desk, sign_in, stored

IDLE = timedelta(minutes=30)
SESSION = "citelock_review_session"


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
    with TestClient(create_app(seeded.desk, idle_timeout=IDLE), base_url=BASE) as c:
        yield c


def last_used(accounts: AccountStore, token: str) -> datetime | None:
    """The stored last use of the session whose secret is ``token`` (None: no such row)."""
    rows = [s for s in _session_rows(accounts) if s["token_sha256"] == digest(token)]
    if not rows:
        return None
    found: datetime = rows[0]["last_used_at"]
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _session_rows(accounts: AccountStore) -> list[dict[str, object]]:
    with accounts.engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(_sessions)).mappings()]


def test_a_session_in_use_slides_past_one_idle_window(client: TestClient, seeded: Seeded, clock: Clock) -> None:
    assert sign_in(client, "alice").status_code == 303
    token = client.cookies.get(SESSION)
    assert token
    for _ in range(4):  # 4 x 20 minutes: well past one 30-minute window, never 30 minutes unused
        clock.advance(minutes=20)
        assert client.get("/", follow_redirects=False).status_code == 200
        assert client.get("/api/v1/me").json()["username"] == "alice"
        assert last_used(seeded.desk.accounts, token) == clock.now
    clock.advance(minutes=29)
    assert client.get("/", follow_redirects=False).status_code == 200


def test_a_session_idle_past_the_timeout_is_sent_to_sign_in_and_ended(
    client: TestClient, seeded: Seeded, clock: Clock
) -> None:
    sign_in(client, "bob")
    token = client.cookies.get(SESSION)
    assert token and client.get("/", follow_redirects=False).status_code == 200
    entry = next(iter(seeded.ids.values()))
    clock.advance(minutes=31)
    page = client.get(f"/entries/{entry}", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == f"/login?next=%2Fentries%2F{entry}"
    assert last_used(seeded.desk.accounts, token) is None  # the row is gone: no later request revives it
    clock.advance(minutes=-30)  # even back inside the window (a clock step), the session stays ended
    assert client.get("/api/v1/me").status_code == 401
    assert sign_in(client, "bob").status_code == 303  # signing in again works
    assert client.get("/", follow_redirects=False).status_code == 200


def test_an_idle_session_is_refused_by_the_api_too(client: TestClient, clock: Clock) -> None:
    sign_in(client, "alice")
    assert client.get("/api/v1/me").status_code == 200
    clock.advance(minutes=30, seconds=1)
    assert client.get("/api/v1/me").status_code == 401


def test_api_tokens_have_no_idle_timeout(client: TestClient, seeded: Seeded, clock: Clock) -> None:
    token = seeded.desk.accounts.open("bob", kind="token", lifetime=timedelta(days=2))
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/me", headers=auth).json()["kind"] == "token"
    clock.advance(hours=10)
    assert client.get("/api/v1/me", headers=auth).json() == {"username": "bob", "role": "reviewer", "kind": "token"}
    clock.advance(days=2)  # its own expiry still holds
    assert client.get("/api/v1/me", headers=auth).status_code == 401
    with pytest.raises(InputError, match="browser sessions"):
        seeded.desk.accounts.credential(token, kind="token", idle=IDLE)


def test_without_an_idle_timeout_a_session_lasts_its_lifetime(seeded: Seeded, clock: Clock) -> None:
    with TestClient(create_app(seeded.desk, idle_timeout=None), base_url=BASE) as client:
        sign_in(client, "alice")
        clock.advance(hours=11)
        assert client.get("/", follow_redirects=False).status_code == 200
        clock.advance(hours=1)
        assert client.get("/", follow_redirects=False).status_code == 303


def test_last_use_is_written_at_most_once_a_minute(target: str) -> None:
    clock = Clock()
    accounts = AccountStore(target, clock=clock)
    accounts.add("alice", role="reviewer", password_hash="h")
    token = accounts.open("alice")
    opened = clock.now
    assert last_used(accounts, token) == opened
    updates: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("UPDATE"):
            updates.append(statement)

    event.listen(accounts.engine, "before_cursor_execute", count)
    for seconds in (1, 30, 59):
        assert accounts.credential(token, kind="session", idle=IDLE, now=opened + timedelta(seconds=seconds))
        assert last_used(accounts, token) == opened  # not written: less than a minute since the last write
    assert updates == []  # not even tried
    later = opened + timedelta(seconds=61)
    assert accounts.credential(token, kind="session", idle=IDLE, now=later)
    assert last_used(accounts, token) == later
    assert len(updates) == 1 and "citelock_review_sessions" in updates[0]
    event.remove(accounts.engine, "before_cursor_execute", count)
    assert accounts.credential(token, kind="session", now=later + timedelta(hours=1)) is not None  # no idle given
    assert last_used(accounts, token) == later  # ... and then nothing is written
    # the writes lag by under a minute, so an idle session may end up to a minute early, never late
    assert accounts.credential(token, kind="session", idle=IDLE, now=later + IDLE + timedelta(seconds=1)) is None


def test_purge_expired_with_idle_removes_idle_sessions_only(target: str) -> None:
    clock = Clock()
    accounts = AccountStore(target, clock=clock)
    accounts.add("alice", role="reviewer", password_hash="h")
    idle = accounts.open("alice")
    api = accounts.open("alice", kind="token", lifetime=None)
    clock.advance(minutes=20)
    busy = accounts.open("alice")
    clock.advance(minutes=20)
    assert accounts.purge_expired() == 0  # nothing has reached its expiry
    assert accounts.purge_expired(idle=IDLE) == 1
    assert accounts.credential(idle, kind="session") is None
    assert accounts.credential(busy, kind="session", idle=IDLE) is not None
    assert accounts.credential(api, kind="token") is not None


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(minutes=-5)])
def test_an_idle_timeout_must_be_positive(seeded: Seeded, bad: timedelta) -> None:
    with pytest.raises(InputError, match="idle timeout must be positive"):
        create_app(seeded.desk, idle_timeout=bad)
    with pytest.raises(InputError, match="idle timeout must be positive"):
        seeded.desk.accounts.credential("x", kind="session", idle=bad)


def test_serve_refuses_an_idle_timeout_under_a_minute(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["review", "serve", "--db", str(tmp_path / "d.db"), "--idle-timeout", "0.5"])
    assert result.exit_code == 2
    assert "--idle-timeout" in result.output


# --- the desk purges ended sessions after sign-ins ------------------------------------------------------------


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
    assert {digest(t) for t in (expired, idle, old_token)}.isdisjoint(left)
    assert left == {digest(t) for t in (kept_token, in_use, alice)}
    assert client.get("/api/v1/me").json()["username"] == "alice"  # the sign-in itself stands


@pytest.mark.slow
def test_the_desk_purges_at_most_once_per_interval(client: TestClient, seeded: Seeded, clock: Clock) -> None:
    assert timedelta(minutes=10) == PURGE_INTERVAL  # the desk's default, which `client` serves with
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
        assert digest(short) in stored(accounts)
        clock.advance(minutes=7)  # 10 minutes since the last purge: due again
        assert sign_in(client, "bob").status_code == 303
        assert deletes.count == 2
        assert digest(short) not in stored(accounts)
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
    assert digest(expired) in stored(accounts)  # a failed sign-in or a page view does not purge


def test_without_a_purge_interval_the_desk_never_purges(seeded: Seeded, clock: Clock) -> None:
    accounts = seeded.desk.accounts
    expired = accounts.open("bob", lifetime=timedelta(minutes=1))
    clock.advance(hours=1)
    with TestClient(create_app(seeded.desk, purge_interval=None), base_url=BASE) as c:
        assert sign_in(c, "alice").status_code == 303
    assert digest(expired) in stored(accounts)


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(minutes=-1)])
def test_a_purge_interval_must_be_positive(seeded: Seeded, bad: timedelta) -> None:
    with pytest.raises(InputError, match="purge interval must be positive"):
        create_app(seeded.desk, purge_interval=bad)
