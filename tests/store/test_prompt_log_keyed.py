"""A keyed prompt log never downgrades silently, and a real legacy log is keyed by an explicit, recorded migration.

The attack (issue 34, item 3): with the key set, write 3 records; drop the triggers, set the chain columns of every
row to NULL, rewrite one record (1932 -> 1999) and its plain hashes. Before the fix `log verify --key-file K`
printed "3 legacy ... intact" (exit 0) and `check --request-id` passed the forged span. With a key every
unchained row, dropped trigger or missing chain column is an integrity failure (exit 3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from citelock import InputError, StoreIntegrityError, serialize
from citelock.cli import app
from citelock.prompt import assemble
from citelock.records import PromptRecord
from citelock.store import PromptLog
from citelock.store._chain import KEY_ENV, content_hash
from citelock.store._log_migrate import migrate_to_key, migrations

runner = CliRunner()
KEY = b"k3y-for-the-log"
SAID = "The Aurora Bridge opened to traffic in 1932."
FORGED = "The Aurora Bridge opened to traffic in 1999."


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


def _record(rid: str, body: str = SAID) -> PromptRecord:
    return serialize(assemble("When did the Aurora Bridge open?", [{"id": "c-1", "text": body}]), request_id=rid)


def _keyed_log(target: str, n: int = 3) -> PromptLog:
    log = PromptLog(target, key=KEY)
    for i in range(1, n + 1):
        log.append(_record(f"r{i}"))
    return log


def _drop_triggers(conn: Any) -> None:
    if conn.dialect.name == "postgresql":
        for name in ("citelock_prompt_log_no_update_delete", "citelock_prompt_log_no_truncate"):
            conn.execute(text(f"DROP TRIGGER IF EXISTS {name} ON citelock_prompt_log"))
        conn.execute(text("DROP TRIGGER IF EXISTS citelock_prompt_log_required ON citelock_prompt_log"))
    else:
        for (name,) in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'")).all():
            conn.execute(text(f"DROP TRIGGER {name}"))


def _strip_and_rewrite(log: PromptLog, rid: str = "r2") -> None:
    """The attack: no triggers, no chain, one record rewritten with its plain hashes recomputed."""
    forged = _record(rid, FORGED)
    payload = forged.model_dump_json()
    with log.engine.begin() as conn:
        _drop_triggers(conn)
        conn.execute(text("UPDATE citelock_prompt_log SET seq = NULL, prev_hash = NULL, chain_hash = NULL, alg = NULL"))
        conn.execute(
            text("UPDATE citelock_prompt_log SET record = :r, sha256 = :s, record_sha256 = :d WHERE request_id = :id"),
            {"r": payload, "s": forged.sha256, "d": content_hash(payload), "id": rid},
        )


def _files(tmp_path: Path) -> tuple[Path, Path]:
    key_file = tmp_path / "log.key"
    key_file.write_bytes(KEY + b"\n")
    answer = tmp_path / "answer.json"
    claim = {"text": "The Aurora Bridge opened in 1999.", "citations": [{"chunk_id": "c-1", "span": "in 1999"}]}
    answer.write_text(json.dumps({"claims": [claim]}), encoding="utf-8")
    return key_file, answer


# --- the attack ----------------------------------------------------------------------------------------------


def test_a_stripped_and_rewritten_keyed_log_fails_verification_with_the_key(target: str) -> None:
    log = _keyed_log(target)
    _strip_and_rewrite(log)
    report = PromptLog(target, key=KEY).verify_chain()
    assert not report.ok
    assert report.first_broken is not None and "unchained record in a keyed log" in report.first_broken.problem
    assert {p.request_id for p in report.problems} >= {"r1", "r2", "r3"}
    assert any("trigger" in p.problem for p in report.problems if p.request_id is None)  # the dropped triggers
    with pytest.raises(StoreIntegrityError, match="r2"):
        PromptLog(target, key=KEY).get("r2")
    with pytest.raises(StoreIntegrityError):
        PromptLog(target, key=KEY).append(_record("r4"))
    # without the key, nothing tells a stripped log from one written before the chain (the documented limit)
    assert PromptLog(target).verify_chain().ok


def test_the_attack_through_the_cli_exits_3_in_verify_and_in_check(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _strip_and_rewrite(_keyed_log(target))
    key_file, answer = _files(tmp_path)
    verify = runner.invoke(app, ["log", "verify", "--db", target, "--key-file", str(key_file)])
    assert verify.exit_code == 3, verify.output
    assert "intact" not in verify.stdout
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    check = runner.invoke(app, ["check", "--request-id", "r2", "--db", target, "--answer", str(answer)])
    assert check.exit_code == 3, check.output
    assert "provenance" not in check.stdout  # no report was printed for the forged record


def test_unchained_rows_alone_are_an_integrity_failure_with_the_key(target: str) -> None:
    log = _keyed_log(target)
    with log.engine.begin() as conn:  # triggers kept out of the way only for this statement, then restored
        if conn.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_log DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER citelock_prompt_log_no_update"))
        conn.execute(
            text(
                "UPDATE citelock_prompt_log SET seq = NULL, prev_hash = NULL, chain_hash = NULL, alg = NULL "
                "WHERE request_id = 'r3'"
            )
        )
        if conn.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_log ENABLE TRIGGER USER"))
    PromptLog(target)  # an unkeyed open restores the dropped trigger (as any older writer would)
    report = PromptLog(target, key=KEY).verify_chain()
    assert not report.ok
    assert [(p.seq, p.request_id) for p in report.problems][:2] == [(None, "r3"), (1, "r1")]
    with pytest.raises(StoreIntegrityError, match="not chained"):
        PromptLog(target, key=KEY).get("r3")
    with pytest.raises(StoreIntegrityError, match="unchained"):
        PromptLog(target, key=KEY).append(_record("r4"))


def test_a_dropped_trigger_alone_is_reported_and_not_silently_restored_by_a_keyed_handle(target: str) -> None:
    log = _keyed_log(target)
    with log.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_log DISABLE TRIGGER citelock_prompt_log_no_update_delete"))
        else:
            conn.execute(text("DROP TRIGGER citelock_prompt_log_no_update"))
    for _ in range(2):  # the second keyed open still sees it: the first did not repair it
        report = PromptLog(target, key=KEY).verify_chain()
        assert not report.ok and report.first_broken is not None
        assert (report.first_broken.seq, report.first_broken.request_id) == (None, None)
        assert "trigger" in report.first_broken.problem and "missing or disabled" in report.first_broken.problem
    with pytest.raises(StoreIntegrityError, match="not protected"):
        PromptLog(target, key=KEY).get("r1")


def test_a_keyed_intact_log_is_untouched_by_the_new_checks(target: str) -> None:
    _keyed_log(target)
    report = PromptLog(target, key=KEY).verify_chain()
    assert (report.ok, report.records, report.legacy, report.keyed, report.macs_checked) == (True, 3, 0, True, True)
    assert PromptLog(target, key=KEY).get("r2").chunks[0].chunk.text == SAID
    (first,) = migrations(target)  # a log keyed from its first record says so
    assert (first.records, first.unchained) == (0, 0)


# --- the migration -------------------------------------------------------------------------------------------


def _legacy_log(target: str, rids: list[str]) -> None:
    """A log as a version before the chain wrote it: the table without chain columns, rows with their hashes."""
    log = PromptLog(target)
    with log.engine.begin() as conn:
        conn.execute(text("DROP TABLE citelock_prompt_log"))
        conn.execute(
            text(
                "CREATE TABLE citelock_prompt_log (request_id VARCHAR(200) PRIMARY KEY, created_at TIMESTAMP "
                "WITH TIME ZONE NOT NULL, sha256 VARCHAR(64) NOT NULL, record_sha256 VARCHAR(64) NOT NULL, "
                "record TEXT NOT NULL)"
            )
        )
        for rid in rids:
            rec = _record(rid)
            payload = rec.model_dump_json()
            conn.execute(
                text("INSERT INTO citelock_prompt_log VALUES (:id, :at, :s, :d, :r)"),
                {"id": rid, "at": rec.created_at, "s": rec.sha256, "d": content_hash(payload), "r": payload},
            )
    log.engine.dispose()


def test_a_real_legacy_log_needs_the_migration_and_is_keyed_by_it(target: str, tmp_path: Path) -> None:
    _legacy_log(target, ["old-b", "old-a"])
    before = PromptLog(target, key=KEY).verify_chain()
    assert not before.ok and before.first_broken is not None and "chain column" in before.first_broken.problem
    assert before.records == 2
    with pytest.raises(StoreIntegrityError, match="migrate"):
        PromptLog(target, key=KEY).get("old-a")
    key_file, _ = _files(tmp_path)
    result = runner.invoke(app, ["log", "migrate", "--db", target, "--key-file", str(key_file)])
    assert result.exit_code == 0, result.output
    assert "2 records keyed and chained (2 were unchained)" in result.stdout
    after = PromptLog(target, key=KEY).verify_chain()
    assert (after.ok, after.records, after.legacy, after.keyed, after.head_seq) == (True, 2, 0, True, 2)
    (done,) = migrations(target)
    assert (done.records, done.unchained, done.head_hash) == (2, 2, after.head_hash)
    assert PromptLog(target, key=KEY).get("old-a").request_id == "old-a"
    PromptLog(target, key=KEY).append(_record("new-1"))  # the keyed chain goes on
    assert PromptLog(target, key=KEY).verify_chain().ok
    again = runner.invoke(app, ["log", "migrate", "--db", target, "--key-file", str(key_file)])
    assert again.exit_code == 0 and "nothing to do" in again.stdout
    shown = runner.invoke(app, ["log", "verify", "--db", target, "--key-file", str(key_file)])
    assert shown.exit_code == 0 and "keyed by `citelock log migrate`" in shown.stdout


def test_a_plain_chain_is_migrated_and_the_update_guard_is_back_afterwards(target: str) -> None:
    plain = PromptLog(target)
    for rid in ("p1", "p2", "p3"):
        plain.append(_record(rid))
    done = migrate_to_key(target, KEY)
    assert done is not None and (done.records, done.unchained) == (3, 0)
    assert done.previous_head != done.head_hash
    assert PromptLog(target, key=KEY).verify_chain().ok
    with pytest.raises(Exception, match="append-only"), plain.engine.begin() as conn:
        conn.execute(text("UPDATE citelock_prompt_log SET record = 'x'"))


def test_a_stripped_keyed_log_is_not_migrated(target: str, tmp_path: Path) -> None:
    log = _keyed_log(target)
    _strip_and_rewrite(log)
    key_file, _ = _files(tmp_path)
    result = runner.invoke(app, ["log", "migrate", "--db", target, "--key-file", str(key_file)])
    assert result.exit_code == 3, result.output
    assert "stripped" in result.stderr
    assert not PromptLog(target, key=KEY).verify_chain().ok  # nothing was laundered


def test_a_broken_log_is_not_migrated(target: str) -> None:
    plain = PromptLog(target)
    plain.append(_record("p1"))
    with plain.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_log DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER citelock_prompt_log_no_update"))
        conn.execute(text("UPDATE citelock_prompt_log SET record = replace(record, '1932', '1999')"))
    with pytest.raises(StoreIntegrityError, match="not migrated"):
        migrate_to_key(target, KEY)


def test_migrate_needs_a_key(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    PromptLog(db).append(_record("p1"))
    result = runner.invoke(app, ["log", "migrate", "--db", str(db)])
    assert result.exit_code == 2 and "needs the key" in result.stderr
    with pytest.raises(InputError, match="needs the key"):
        migrate_to_key(db, None)
