"""Large constraint payloads are stored once by content, apart from their records, and read back byte for byte.

A wrapped call's record carries the grammar it injected; the log keeps that grammar once per distinct content
(``citelock_prompt_payload``, keyed by sha256) and the record's row a reference to it. What is asserted: a record
reads back exactly as written (its JSON, byte for byte, and the hash the chain commits to), a repeated payload is
stored once, an altered or missing payload makes its records unreadable and breaks verification, and a log
written before the payload table opens, reads and extends as before.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, text

from citelock import StoreIntegrityError, assemble, serialize
from citelock.records import PromptRecord
from citelock.store import PromptLog, _payloads, make_engine
from citelock.store._chain import ALG_PLAIN, GENESIS, content_hash, link_hash
from citelock.store._payloads import MIN_PAYLOAD_BYTES

GRAMMAR = 'root ::= "{" ws claims ws "}"\n' + "".join(f'span{k} ::= "piece «{k}» \\"q\\"\\n"\n' for k in range(400))


def wrapped_record(rid: str, grammar: str = GRAMMAR, **metadata: object) -> PromptRecord:
    record = serialize(assemble("How long is it?", [{"id": "c-1", "text": f"text for {rid} é"}]), request_id=rid)
    wrap = {
        "delivery": "grammar",
        "server": "llama-cpp-python",
        "context_message": None,
        "constraint": {"grammar": grammar},
    }
    return record.model_copy(update={"metadata": {"surface": "t", "wrap": wrap, **metadata}})


def rows(log: PromptLog, table: str) -> list[tuple[object, ...]]:
    with log.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(text(f"SELECT * FROM {table}"))]


def stored(log: PromptLog, rid: str) -> tuple[str, str, str | None]:
    query = text("SELECT record, record_sha256, payload_sha256 FROM citelock_prompt_log WHERE request_id = :r")
    with log.engine.connect() as conn:
        row = conn.execute(query, {"r": rid}).one()
    return str(row[0]), str(row[1]), row[2]


def test_a_large_payload_is_stored_apart_and_read_back_byte_for_byte(target: str) -> None:
    log = PromptLog(target)
    assert len(GRAMMAR) > 10 * MIN_PAYLOAD_BYTES
    records = [wrapped_record(f"r{k}") for k in range(3)]
    for record in records:
        log.append(record)
    ((payload_sha, payload),) = rows(log, "citelock_prompt_payload")  # three records, one payload
    assert payload == '{"grammar":' + json.dumps(GRAMMAR, ensure_ascii=False) + "}"
    assert payload_sha == hashlib.sha256(payload.encode()).hexdigest()
    for record in records:
        text_, record_sha, ref = stored(log, record.request_id)
        assert ref == payload_sha and GRAMMAR not in text_ and len(text_) < len(GRAMMAR) / 4
        assert record_sha == content_hash(record.model_dump_json())  # the hash of the whole record, as before
        got = log.get(record.request_id)
        assert got.model_dump_json() == record.model_dump_json() and got == record
        assert got.metadata["wrap"]["constraint"]["grammar"] == GRAMMAR
    assert [r.request_id for r in log] == ["r0", "r1", "r2"]
    assert log.verify_chain().ok and log.verify() == []
    # another handle (another process) with an equal grammar, not the same object: still one payload row
    PromptLog(target).append(wrapped_record("r3", "".join(list(GRAMMAR))))
    assert len(rows(log, "citelock_prompt_payload")) == 1 and log.get("r3").metadata == records[0].metadata


def test_small_payloads_schemas_and_ambiguous_references_stay_in_the_record(tmp_path) -> None:
    log = PromptLog(tmp_path / "log.db")
    small = wrapped_record("small", 'root ::= "x"')
    log.append(small)
    assert stored(log, "small")[2] is None
    schema = wrapped_record("schema")
    schema.metadata["wrap"]["constraint"] = {"json_schema": {"type": "object", "big": ["x" * 40] * 100}}
    log.append(schema)
    assert stored(log, "schema")[2] is None and log.get("schema") == schema
    first = wrapped_record("first")
    log.append(first)
    ref_text = '{"$citelock_payload":"' + stored(log, "first")[2] + '"}'
    # the caller's own metadata holding the very reference: the splice would be ambiguous, so stored whole
    tricky = wrapped_record("tricky", extra={"$citelock_payload": stored(log, "first")[2]})
    assert ref_text in tricky.model_dump_json()
    log.append(tricky)
    assert stored(log, "tricky")[2] is None and log.get("tricky") == tricky
    assert log.verify_chain().ok


def _tamper(log: PromptLog, statement: str) -> None:
    with log.engine.begin() as conn:
        if log.engine.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_payload DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER IF EXISTS citelock_prompt_payload_no_update"))
            conn.execute(text("DROP TRIGGER IF EXISTS citelock_prompt_payload_no_delete"))
        conn.execute(text(statement))


def test_the_payload_table_is_append_only_and_tampering_is_reported(target: str) -> None:
    log = PromptLog(target)
    log.append(wrapped_record("a"))
    log.append(wrapped_record("b"))
    for statement in ("UPDATE citelock_prompt_payload SET payload = 'x'", "DELETE FROM citelock_prompt_payload"):
        with pytest.raises(Exception, match="append-only"), log.engine.begin() as conn:
            conn.execute(text(statement))
    _tamper(log, "UPDATE citelock_prompt_payload SET payload = replace(payload, 'piece', 'peace')")
    with pytest.raises(StoreIntegrityError, match="payload was altered"):
        log.get("a")
    assert log.verify() == ["a", "b"]
    _tamper(log, "DELETE FROM citelock_prompt_payload")
    with pytest.raises(StoreIntegrityError, match=r"payload .* is missing"):
        log.get("b")
    assert log.verify() == ["a", "b"]


def test_a_record_row_altered_around_its_reference_is_reported(tmp_path) -> None:
    log = PromptLog(tmp_path / "log.db")
    log.append(wrapped_record("a"))
    with log.engine.begin() as conn:
        conn.execute(text("DROP TRIGGER citelock_prompt_log_no_update"))
        conn.execute(text("UPDATE citelock_prompt_log SET record = replace(record, 'text for a', 'text for z')"))
    with pytest.raises(StoreIntegrityError, match="altered"):
        log.get("a")
    with log.engine.begin() as conn:
        conn.execute(text("UPDATE citelock_prompt_log SET record = replace(record, '$citelock_payload', '$other')"))
    with pytest.raises(StoreIntegrityError, match="reference to its constraint payload is gone"):
        log.get("a")


_chain_era = MetaData()
_chain_era_log = Table(
    "citelock_prompt_log",
    _chain_era,
    Column("request_id", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("sha256", String(64), nullable=False),
    Column("record_sha256", String(64), nullable=False),
    Column("record", Text, nullable=False),
    Column("seq", Integer, nullable=True),
    Column("prev_hash", String(64), nullable=True),
    Column("chain_hash", String(64), nullable=True),
    Column("alg", String(16), nullable=True),
)


def test_a_log_from_before_the_payload_table_opens_reads_and_extends(target: str) -> None:
    engine = make_engine(target)
    _chain_era.create_all(engine)
    old = [wrapped_record("old-1"), wrapped_record("old-2")]
    prev = GENESIS
    with engine.begin() as conn:  # written whole, as the previous version wrote every record
        for seq, record in enumerate(old, start=1):
            payload = record.model_dump_json()
            digest = content_hash(payload)
            chain = link_hash(None, seq, prev, record.request_id, digest)
            conn.execute(
                _chain_era_log.insert().values(
                    request_id=record.request_id,
                    created_at=record.created_at,
                    sha256=record.sha256,
                    record_sha256=digest,
                    record=payload,
                    seq=seq,
                    prev_hash=prev,
                    chain_hash=chain,
                    alg=ALG_PLAIN,
                )
            )
            prev = chain
    engine.dispose()
    log = PromptLog(target)
    assert [log.get(r.request_id) for r in old] == old
    log.append(wrapped_record("new-1"))
    assert stored(log, "old-1")[2] is None and stored(log, "new-1")[2] is not None
    report = log.verify_chain()
    assert report.ok and report.records == 3 and report.head_seq == 3
    assert [r.request_id for r in log] == ["old-1", "old-2", "new-1"]


def test_the_payload_cache_is_bounded_and_keyed_by_the_very_strings() -> None:
    cache = _payloads._Cache()
    big = [{"grammar": str(k) * 1_500_000} for k in range(4)]  # 1.5 MB each, held twice: 12 MB > the 8 MB bound
    entries = [cache.get(payload) for payload in big]
    assert len(cache._entries) == 2 and cache._bytes <= _payloads._CACHE_BYTES
    assert cache.get(big[3]) is entries[3]  # the same string objects: a hit
    equal = {"grammar": "".join([big[3]["grammar"][:1], big[3]["grammar"][1:]])}  # equal text, another object
    got = cache.get(equal)
    assert got is not entries[3] and got.sha256 == entries[3].sha256 and got.data == entries[3].data
