"""Databases written by the previous layout (no hash chain, resolutions in place, narrow decision) open and upgrade.

The old tables are made here with their old definitions, filled as the old code filled them, then opened with
the current stores.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Column, DateTime, ForeignKey, Integer, MetaData, String, Table, Text, inspect, text
from sqlalchemy.exc import DBAPIError
from test_queue import finding

from citelock import serialize
from citelock.prompt import assemble
from citelock.records import PromptRecord
from citelock.store import AccountStore, PromptLog, QueueEntry, ResultStore, ReviewQueue, make_engine
from citelock.store._chain import GENESIS, content_hash, legacy_seal

_old = MetaData()
_old_log = Table(
    "citelock_prompt_log",
    _old,
    Column("request_id", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("sha256", String(64), nullable=False),
    Column("record_sha256", String(64), nullable=False),
    Column("record", Text, nullable=False),
)
_old_queue = Table(
    "citelock_queue",
    _old,
    Column("id", String(64), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("week", String(10), nullable=False, index=True),
    Column("surface", String(200), nullable=False, index=True),
    Column("reason", String(40), nullable=False, index=True),
    Column("request_id", String(200), nullable=False, index=True),
    Column("entry", Text, nullable=False),
)
_old_resolutions = Table(
    "citelock_queue_resolutions",
    _old,
    Column("entry_id", String(64), ForeignKey("citelock_queue.id"), primary_key=True),
    Column("outcome", String(16), nullable=False, index=True),
    Column("category", String(16), nullable=True),
    Column("note", Text, nullable=True),
    Column("chunk_id", String(200), nullable=True),
    Column("resolved_at", DateTime(timezone=True), nullable=False),
    Column("reviewer", String(200), nullable=True),
)
_old_samples = Table(
    "citelock_calibration_samples",
    _old,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("entry_id", String(64), ForeignKey("citelock_queue.id"), nullable=False, unique=True),
    Column("claim", Text, nullable=False),
    Column("passage", Text, nullable=False),
    Column("label", String(8), nullable=False),
    Column("judge_label", String(16), nullable=True),
    Column("judge_version", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
_old_results = Table(
    "citelock_results",
    _old,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("request_id", String(200), nullable=False, index=True),
    Column("surface", String(200), nullable=False, index=True),
    Column("week", String(10), nullable=False, index=True),
    Column("decision", String(8), nullable=False),
    Column("result", Text, nullable=False),
)


_old_accounts = Table(
    "citelock_review_accounts",
    _old,
    Column("username", String(64), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("password_hash", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("disabled_at", DateTime(timezone=True), nullable=True),
)
_old_sessions = Table(  # before the idle timeout: no last_used_at
    "citelock_review_sessions",
    _old,
    Column("token_sha256", String(64), primary_key=True),
    Column("username", String(64), ForeignKey("citelock_review_accounts.username"), nullable=False, index=True),
    Column("kind", String(8), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("label", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
)


def _record(rid: str) -> PromptRecord:
    return serialize(assemble("q?", [{"id": "c-1", "text": f"text for {rid}"}]), request_id=rid)


def _old_log_rows(target: str, rids: list[str]) -> None:
    engine = make_engine(target)
    _old.create_all(engine, tables=[_old_log])
    with engine.begin() as conn:
        for rid in rids:
            rec = _record(rid)
            payload = rec.model_dump_json()
            conn.execute(
                _old_log.insert().values(
                    request_id=rid,
                    created_at=rec.created_at,
                    sha256=rec.sha256,
                    record_sha256=content_hash(payload),
                    record=payload,
                )
            )
    engine.dispose()


def test_a_log_from_before_the_chain_is_sealed_into_it(target: str) -> None:
    _old_log_rows(target, ["old-b", "old-a"])
    log = PromptLog(target)
    before = log.verify_chain()
    assert (before.records, before.legacy, before.head_seq, before.ok) == (2, 2, None, True)
    log.append(_record("new-1"))
    log.append(_record("new-2"))
    after = log.verify_chain()
    assert (after.records, after.legacy, after.head_seq, after.ok) == (4, 2, 2, True)
    with log.engine.connect() as conn:
        first = conn.execute(text("SELECT prev_hash FROM citelock_prompt_log WHERE seq = 1")).scalar_one()
        legacy = conn.execute(
            text("SELECT request_id, record_sha256 FROM citelock_prompt_log WHERE seq IS NULL ORDER BY request_id")
        ).all()
    assert first == legacy_seal(sorted((r, h) for r, h in legacy)) != GENESIS
    assert [r.request_id for r in log] == ["old-b", "old-a", "new-1", "new-2"]  # legacy by age, then the chain
    # an old writer (no chain columns) is refused instead of leaving an unchained record in the chained log
    rec = _record("old-writer")
    payload = rec.model_dump_json()
    with pytest.raises(DBAPIError, match="required"), log.engine.begin() as conn:
        conn.execute(
            _old_log.insert().values(
                request_id="old-writer",
                created_at=rec.created_at,
                sha256=rec.sha256,
                record_sha256=content_hash(payload),
                record=payload,
            )
        )
    # a legacy record removed later breaks the chain at its first record, which carries their seal
    with log.engine.begin() as conn:
        if log.engine.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_log DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER citelock_prompt_log_no_delete"))
        conn.execute(text("DELETE FROM citelock_prompt_log WHERE request_id = 'old-a'"))
    broken = PromptLog(target).verify_chain()
    assert broken.first_broken is not None
    assert (broken.first_broken.seq, broken.first_broken.request_id) == (1, "new-1")
    assert "legacy records' seal" in broken.first_broken.problem


def test_a_queue_from_before_events_keeps_its_outcomes(target: str) -> None:
    engine = make_engine(target)
    _old.create_all(engine, tables=[_old_queue, _old_resolutions, _old_samples])
    entries = [QueueEntry.from_finding(finding(n), surface="chat") for n in range(3)]
    when = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    with engine.begin() as conn:
        for e in entries:
            conn.execute(
                _old_queue.insert().values(
                    id=e.id,
                    created_at=e.created_at,
                    week=e.week,
                    surface=e.surface,
                    reason=e.reason.value,
                    request_id=e.request_id,
                    entry=e.model_dump_json(),
                )
            )
        conn.execute(
            _old_resolutions.insert().values(entry_id=entries[0].id, outcome="accept", resolved_at=when, reviewer="ana")
        )
        conn.execute(
            _old_samples.insert().values(
                entry_id=entries[0].id, claim=entries[0].claim, passage="p", label="yes", created_at=when
            )
        )
        conn.execute(
            _old_resolutions.insert().values(
                entry_id=entries[1].id, outcome="escalate", category="ranking", resolved_at=when
            )
        )
    engine.dispose()

    queue = ReviewQueue(target)
    accepted = queue.resolution(entries[0].id)
    assert accepted is not None
    assert (accepted.outcome, accepted.reviewer, accepted.revision, accepted.resolved_at) == ("accept", "ana", 0, when)
    escalated = queue.resolution(entries[1].id)
    assert escalated is not None and (escalated.outcome, escalated.category) == ("escalate", "ranking")
    assert queue.resolution(entries[2].id) is None
    assert [s.entry_id for s in queue.calibration_samples()] == [entries[0].id]
    assert queue.outcome_counts() == {"accept": 1, "escalate": 1, "escalate:ranking": 1}
    # the old tables are retired: an older citelock writing there is refused, not silently ignored
    for statement in (
        f"INSERT INTO citelock_queue_resolutions (entry_id, outcome, resolved_at) VALUES ('{entries[2].id}', "
        "'accept', '2025-01-01')",
        "DELETE FROM citelock_calibration_samples",
    ):
        with pytest.raises(DBAPIError, match="retired"), queue.engine.begin() as conn:
            conn.execute(text(statement))
    ReviewQueue(target)  # opening again copies nothing twice
    assert len(queue.history(entries[0].id)) == 1


def test_results_decision_is_widened_and_results_are_append_only(target: str) -> None:
    engine = make_engine(target)
    _old.create_all(engine, tables=[_old_results])
    engine.dispose()
    store = ResultStore(target)
    (decision,) = [c for c in inspect(store.engine).get_columns("citelock_results") if c["name"] == "decision"]
    if store.engine.dialect.name == "postgresql":
        assert getattr(decision["type"], "length", None) == 32
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO citelock_results (created_at, request_id, surface, week, decision, result) "
                "VALUES (CURRENT_TIMESTAMP, 'r', 's', '2025-W01', 'a-decision-over-8-chars', '{}')"
            )
        )
    with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
        conn.execute(text("UPDATE citelock_results SET decision = 'pass'"))
    assert len(store) == 1


def test_sessions_from_before_the_idle_timeout_count_as_last_used_when_made(target: str) -> None:
    now = datetime.now(UTC)
    engine = make_engine(target)
    _old.create_all(engine, tables=[_old_accounts, _old_sessions])
    with engine.begin() as conn:
        conn.execute(_old_accounts.insert().values(username="ann", role="reviewer", password_hash="h", created_at=now))
        for secret, age in (("recent-session", 10), ("old-session", 40), ("old-token", 40)):
            conn.execute(
                _old_sessions.insert().values(
                    token_sha256=hashlib.sha256(secret.encode()).hexdigest(),
                    username="ann",
                    kind="token" if secret.endswith("token") else "session",
                    csrf="c",
                    created_at=now - timedelta(minutes=age),
                    expires_at=now + timedelta(hours=1),
                )
            )
    engine.dispose()
    accounts = AccountStore(target)
    assert "last_used_at" in {c["name"] for c in inspect(accounts.engine).get_columns("citelock_review_sessions")}
    idle = timedelta(minutes=30)
    assert accounts.credential("old-session", kind="session") is not None  # no idle timeout asked: as before
    assert accounts.credential("recent-session", kind="session", idle=idle, now=now) is not None
    assert accounts.credential("old-session", kind="session", idle=idle, now=now) is None  # made 40 minutes ago
    assert accounts.credential("old-session", kind="session") is None  # ... and ended
    assert accounts.credential("old-token", kind="token") is not None
    with accounts.engine.connect() as conn:
        used = conn.execute(text("SELECT last_used_at FROM citelock_review_sessions WHERE kind = 'session'")).scalar()
    assert used is not None  # the recent session's use was recorded in the new column
    fresh = accounts.open("ann")
    assert accounts.credential(fresh, kind="session", idle=idle) is not None
