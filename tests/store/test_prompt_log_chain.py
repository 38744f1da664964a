"""The prompt log's hash chain: every kind of tampering `log verify` must catch, what it cannot, and the key.

Tampering here goes around the append-only triggers the way an attacker with the schema owner's rights would
(dropping or disabling them), then edits rows with SQL.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
from collections.abc import Iterator
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
from citelock.store._chain import KEY_ENV, content_hash, link_hash

runner = CliRunner()
KEY = b"correct horse battery staple"


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


def _record(rid: str) -> PromptRecord:
    return serialize(assemble("q?", [{"id": "c-1", "text": f"text for {rid}"}]), request_id=rid)


def _log(target: str, n: int = 5, key: bytes | None = None) -> PromptLog:
    log = PromptLog(target, key=key)
    for i in range(1, n + 1):
        log.append(_record(f"r{i}"))
    return log


def _tamper(log: PromptLog, *statements: tuple[str, dict[str, Any]]) -> None:
    """Run SQL on the log with its append-only triggers out of the way (as the schema owner could)."""
    pg = log.engine.dialect.name == "postgresql"
    with log.engine.begin() as conn:
        if pg:
            conn.execute(text("ALTER TABLE citelock_prompt_log DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER IF EXISTS citelock_prompt_log_no_update"))
            conn.execute(text("DROP TRIGGER IF EXISTS citelock_prompt_log_no_delete"))
        for statement, params in statements:
            conn.execute(text(statement), params)
        if pg:
            conn.execute(text("ALTER TABLE citelock_prompt_log ENABLE TRIGGER USER"))


def _rows(log: PromptLog) -> list[dict[str, Any]]:
    with log.engine.connect() as conn:
        result = conn.execute(text("SELECT * FROM citelock_prompt_log ORDER BY seq"))
        return [dict(row) for row in result.mappings()]


def _forged(rid: str) -> tuple[str, str]:
    """A self-consistent record for ``rid`` whose chunk says something else: its JSON and messages sha256."""
    record = serialize(assemble("q?", [{"id": "c-1", "text": "a forged passage"}]), request_id=rid)
    return record.model_dump_json(), record.sha256


def _rewrite_from(log: PromptLog, rid: str, key: bytes | None, alg: str) -> None:
    """Replace record ``rid`` and recompute its hashes and every later link, as a consistent forger would."""
    rows = _rows(log)
    start = next(i for i, r in enumerate(rows) if r["request_id"] == rid)
    prev = rows[start]["prev_hash"]
    updates = []
    for row in rows[start:]:
        payload, sha = _forged(rid) if row["request_id"] == rid else (row["record"], row["sha256"])
        digest = content_hash(payload)
        chain = link_hash(key, row["seq"], prev, row["request_id"], digest)
        params = {"record": payload, "sha": sha, "digest": digest, "prev": prev, "chain": chain, "alg": alg}
        updates.append(
            (
                "UPDATE citelock_prompt_log SET record = :record, sha256 = :sha, record_sha256 = :digest, "
                "prev_hash = :prev, chain_hash = :chain, alg = :alg WHERE request_id = :rid",
                {**params, "rid": row["request_id"]},
            )
        )
        prev = chain
    _tamper(log, *updates)


def _first(log: PromptLog, **kwargs: Any) -> tuple[int | None, str | None, str]:
    report = PromptLog(log.engine, key=kwargs.pop("key", None)).verify_chain(**kwargs)
    assert not report.ok and report.first_broken is not None
    return report.first_broken.seq, report.first_broken.request_id, report.first_broken.problem


# --- an intact chain -----------------------------------------------------------------------------------------


def test_an_intact_chain_verifies_and_names_its_head(target: str) -> None:
    log = _log(target)
    report = log.verify_chain()
    assert (report.ok, report.records, report.legacy, report.head_seq, report.keyed) == (True, 5, 0, 5, False)
    rows = _rows(log)
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
    assert all(r["prev_hash"] == p["chain_hash"] for p, r in itertools.pairwise(rows))
    assert report.head_hash == rows[-1]["chain_hash"]
    assert log.verify_chain(anchor=rows[2]["chain_hash"]).ok  # an older anchor is still in the chain
    assert log.verify() == []


# --- tampering caught ----------------------------------------------------------------------------------------


def test_a_deleted_record_breaks_the_chain_at_its_successor(target: str) -> None:
    log = _log(target)
    _tamper(log, ("DELETE FROM citelock_prompt_log WHERE request_id = 'r3'", {}))
    seq, rid, problem = _first(log)
    assert (seq, rid) == (4, "r4") and "removed or reordered" in problem
    assert log.verify() == ["r4"]


def test_an_edited_record_with_its_content_hash_is_caught_at_that_record(target: str) -> None:
    log = _log(target)
    forged, sha = _forged("r2")
    _tamper(
        log,
        (
            "UPDATE citelock_prompt_log SET record = :r, sha256 = :s, record_sha256 = :h WHERE request_id = 'r2'",
            {"r": forged, "s": sha, "h": content_hash(forged)},
        ),
    )
    seq, rid, problem = _first(log)
    assert (seq, rid) == (2, "r2") and "chain hash does not match" in problem
    with pytest.raises(StoreIntegrityError, match="r2"):  # a read of that record refuses it too
        log.get("r2")


def test_an_edited_record_with_its_own_chain_hash_is_caught_at_the_next_record(target: str) -> None:
    log = _log(target)
    (row,) = [r for r in _rows(log) if r["request_id"] == "r2"]
    forged, sha = _forged("r2")
    digest = content_hash(forged)
    chain = link_hash(None, 2, row["prev_hash"], "r2", digest)
    _tamper(
        log,
        (
            "UPDATE citelock_prompt_log SET record = :r, sha256 = :s, record_sha256 = :h, chain_hash = :c "
            "WHERE request_id = 'r2'",
            {"r": forged, "s": sha, "h": digest, "c": chain},
        ),
    )
    seq, rid, problem = _first(log)
    assert (seq, rid) == (3, "r3") and "does not follow the record before it" in problem


def test_reordered_records_are_caught(target: str) -> None:
    log = _log(target)
    _tamper(
        log,
        ("UPDATE citelock_prompt_log SET seq = 1000 WHERE request_id = 'r2'", {}),
        ("UPDATE citelock_prompt_log SET seq = 2 WHERE request_id = 'r3'", {}),
        ("UPDATE citelock_prompt_log SET seq = 3 WHERE request_id = 'r2'", {}),
    )
    seq, rid, problem = _first(log)
    assert (seq, rid) == (2, "r3") and "does not follow" in problem


def test_a_truncated_chain_is_caught_only_against_an_anchor(target: str) -> None:
    log = _log(target)
    head = log.verify_chain().head_hash
    assert head is not None
    _tamper(log, ("DELETE FROM citelock_prompt_log WHERE request_id IN ('r4', 'r5')", {}))
    alone = log.verify_chain()
    assert alone.ok and alone.head_seq == 3  # a shorter chain is a valid chain: nothing in the log shows the cut
    seq, rid, problem = _first(log, anchor=head)
    assert (seq, rid) == (None, None) and "truncated" in problem


def test_a_consistent_rewrite_of_an_unkeyed_chain_needs_an_anchor(target: str) -> None:
    log = _log(target)
    head = log.verify_chain().head_hash
    assert head is not None
    _rewrite_from(log, "r2", key=None, alg="sha256")
    assert log.verify_chain().ok  # the threat model's limit: SHA-256 alone can be recomputed by anyone
    assert log.get("r2").chunks[0].chunk.text == "a forged passage"
    _, _, problem = _first(log, anchor=head)
    assert "not in the chain" in problem


# --- the key -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("forger_key", "alg"), [(None, "sha256"), (b"a guessed key", "hmac-sha256")])
def test_a_keyed_chain_catches_a_consistent_rewrite_without_the_key(
    target: str, forger_key: bytes | None, alg: str
) -> None:
    log = _log(target, key=KEY)
    assert log.verify_chain().keyed
    _rewrite_from(log, "r2", key=forger_key, alg=alg)
    seq, rid, problem = _first(log, key=KEY)
    assert (seq, rid) == (2, "r2")
    assert ("without the key" in problem) if alg == "sha256" else ("chain hash does not match" in problem)
    with pytest.raises(StoreIntegrityError, match="r2"):
        PromptLog(target, key=KEY).get("r2")


def test_only_a_writer_with_the_key_appends_to_a_keyed_log(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _log(target, n=2, key=KEY)
    with pytest.raises(InputError, match="keyed"):
        PromptLog(target).append(_record("no-key"))
    with pytest.raises(StoreIntegrityError, match="wrong key"):
        PromptLog(target, key=b"wrong").append(_record("wrong-key"))
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    PromptLog(target).append(_record("env-key"))  # the environment variable is the default key
    report = PromptLog(target).verify_chain()
    assert (report.ok, report.records, report.macs_checked) == (True, 3, True)
    monkeypatch.delenv(KEY_ENV)
    unkeyed = PromptLog(target).verify_chain()
    assert (unkeyed.ok, unkeyed.keyed, unkeyed.macs_checked) == (True, True, False)  # links only


def test_a_key_cannot_be_added_to_an_unkeyed_chain(target: str) -> None:
    _log(target, n=1)
    with pytest.raises(InputError, match="cannot be added"):
        PromptLog(target, key=KEY).append(_record("keyed-now"))
    report = PromptLog(target, key=KEY).verify_chain()  # a verifier holding a key expects a keyed chain
    assert not report.ok and report.first_broken is not None and "without the key" in report.first_broken.problem


def test_an_empty_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match="empty"):
        PromptLog(tmp_path / "log.db", key="")
    monkeypatch.setenv(KEY_ENV, "")
    with pytest.raises(InputError, match="CITELOCK_LOG_KEY"):
        PromptLog(tmp_path / "log.db")


# --- concurrent writers extend one chain ---------------------------------------------------------------------


def _appender(target: str, worker: int, count: int, key: bytes | None, barrier: Any) -> None:
    log = PromptLog(target, key=key)
    barrier.wait(timeout=60)
    for n in range(count):
        log.append(_record(f"w{worker}-{n}"))
    os._exit(0)


@pytest.mark.parametrize("key", [None, KEY], ids=["sha256", "hmac"])
def test_concurrent_appends_make_one_valid_chain(target: str, key: bytes | None) -> None:
    PromptLog(target, key=key)  # the tables exist; the race here is on the chain head
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_appender, args=(target, w, 25, key, barrier)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    log = PromptLog(target, key=key)
    report = log.verify_chain()
    assert (report.ok, report.records, report.head_seq, report.keyed) == (True, 100, 100, key is not None)
    assert [r["seq"] for r in _rows(log)] == list(range(1, 101))


# --- citelock log verify -------------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "citelock.db"
    _log(str(path))
    yield path


def test_cli_verify_intact_prints_the_head(db: Path) -> None:
    result = runner.invoke(app, ["log", "verify", "--db", str(db)])
    assert result.exit_code == 0, result.output
    head = PromptLog(db).verify_chain().head_hash
    assert f"chain head: #5 {head}" in result.stdout and "intact" in result.stdout
    as_json = json.loads(runner.invoke(app, ["log", "verify", "--db", str(db), "--json"]).stdout)
    assert (as_json["ok"], as_json["head_hash"], as_json["records"]) == (True, head, 5)


def test_cli_verify_names_the_first_broken_record_and_exits_3(db: Path) -> None:
    _tamper(PromptLog(db), ("DELETE FROM citelock_prompt_log WHERE request_id = 'r3'", {}))
    result = runner.invoke(app, ["log", "verify", "--db", str(db)])
    assert result.exit_code == 3
    assert "first at record #4 (request 'r4')" in result.stderr and "BROKEN" in result.stdout
    assert "Traceback" not in result.output


def test_cli_verify_anchor_catches_truncation(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    log = _log(str(path))
    head = log.verify_chain().head_hash
    assert head is not None
    _tamper(log, ("DELETE FROM citelock_prompt_log WHERE request_id = 'r5'", {}))
    assert runner.invoke(app, ["log", "verify", "--db", str(path)]).exit_code == 0
    cut = runner.invoke(app, ["log", "verify", "--db", str(path), "--anchor", head])
    assert cut.exit_code == 3 and "truncated" in cut.stderr


def test_cli_verify_usage_errors_exit_2(db: Path, tmp_path: Path) -> None:
    bad_anchor = runner.invoke(app, ["log", "verify", "--db", str(db), "--anchor", "xyz"])
    assert bad_anchor.exit_code == 2 and "64 lowercase hex" in bad_anchor.stderr
    missing = runner.invoke(app, ["log", "verify", "--db", str(tmp_path / "nope.db")])
    assert missing.exit_code == 2 and "no citelock database" in missing.stderr
    empty_key = tmp_path / "empty.key"
    empty_key.write_bytes(b"\n")
    no_key = runner.invoke(app, ["log", "verify", "--db", str(db), "--key-file", str(empty_key)])
    assert no_key.exit_code == 2 and "is empty" in no_key.stderr


def test_cli_verify_a_keyed_log_needs_its_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "keyed.db"
    _log(str(path), key=KEY)
    without = runner.invoke(app, ["log", "verify", "--db", str(path)])
    assert without.exit_code == 2 and "give the key" in without.stderr
    key_file = tmp_path / "log.key"
    key_file.write_bytes(KEY + b"\n")
    assert runner.invoke(app, ["log", "verify", "--db", str(path), "--key-file", str(key_file)]).exit_code == 0
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    assert runner.invoke(app, ["log", "verify", "--db", str(path)]).exit_code == 0
    _rewrite_from(PromptLog(path), "r3", key=None, alg="sha256")
    forged = runner.invoke(app, ["log", "verify", "--db", str(path)])
    assert forged.exit_code == 3 and "record #3 (request 'r3')" in forged.stderr
