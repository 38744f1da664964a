import sqlite3

import pytest

from citelock import InputError, PromptLog, StoreIntegrityError, assemble, serialize


def _record(rid: str):
    return serialize(assemble("q?", [{"id": "c-1", "text": f"text for {rid}"}]), request_id=rid)


def test_append_get_roundtrip(tmp_path) -> None:
    log = PromptLog(tmp_path / "log.db")
    rec = _record("r1")
    log.append(rec)
    assert log.get("r1") == rec
    assert "r1" in log and "nope" not in log and len(log) == 1
    with pytest.raises(KeyError):
        log.get("nope")


def test_no_replacing_and_a_failing_call_loses_nothing(tmp_path) -> None:
    log = PromptLog(tmp_path / "log.db")
    log.append(_record("r1"))
    with pytest.raises(InputError, match="already in the prompt log"):
        log.append(_record("r1"))
    assert len(log) == 1 and log.get("r1").chunks[0].chunk.text == "text for r1"


def test_database_refuses_updates_and_deletes(tmp_path) -> None:
    path = tmp_path / "log.db"
    PromptLog(path).append(_record("r1"))
    con = sqlite3.connect(path)
    for statement in ("UPDATE citelock_prompt_log SET sha256='x'", "DELETE FROM citelock_prompt_log"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute(statement)
    con.close()
    assert len(PromptLog(path)) == 1


def test_tampering_is_reported_on_read(tmp_path) -> None:
    path = tmp_path / "log.db"
    log = PromptLog(path)
    log.append(_record("r1"))
    log.append(_record("r2"))
    con = sqlite3.connect(path)
    con.execute("DROP TRIGGER citelock_prompt_log_no_update")
    con.execute(
        "UPDATE citelock_prompt_log SET record = replace(record, 'text for r1', 'text for rX') WHERE request_id='r1'"
    )
    con.commit()
    con.close()
    with pytest.raises(StoreIntegrityError, match="r1"):
        log.get("r1")
    assert log.verify() == ["r1"]
    assert log.get("r2").request_id == "r2"


def test_append_only_on_every_backend(target) -> None:
    """SQLite and PostgreSQL alike: round trip, no replacing, UPDATE/DELETE refused by the database."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    log = PromptLog(target)
    rec = _record("r-pg")
    log.append(rec)
    assert log.get("r-pg") == rec and len(log) == 1
    with pytest.raises(InputError):
        log.append(_record("r-pg"))
    for statement in ("UPDATE citelock_prompt_log SET sha256 = 'x'", "DELETE FROM citelock_prompt_log"):
        with pytest.raises(DBAPIError, match="append-only"), log.engine.begin() as conn:
            conn.execute(text(statement))
    assert log.verify() == [] and len(PromptLog(target)) == 1
