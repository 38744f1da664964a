"""The prompt log: append-only, immutable and hash-chained; the artifact every later check points at.

No method updates or deletes a record, and the database itself refuses UPDATE and DELETE (triggers), so a
mistake elsewhere cannot rewrite history. Every read re-hashes the stored record: a record whose content no
longer matches its hash raises :class:`StoreIntegrityError` naming the request.

Each record also carries a link of a hash chain (see :mod:`citelock.store._chain`): its position ``seq``, its
predecessor's chain hash and its own, computed over both, optionally as an HMAC under a secret key
(``key=`` or ``$CITELOCK_LOG_KEY``). :meth:`PromptLog.verify_chain` walks the chain and names the first broken
record; ``citelock log verify`` is the same walk on the command line. Appends are serialized (the database's
write lock on SQLite, an advisory lock on PostgreSQL), so concurrent writers extend one chain.

A log written by a version without the chain keeps its records as *legacy* records: they are not rewritten
(the log is append-only), each is still checked against its own hash, and the first chained record's
predecessor is a seal over all of them, so adding, removing or changing a legacy record later breaks the chain
at its first record. Once the chain columns exist, the database refuses inserts without them (an older writer).

A large constraint payload (a wrapped call's injected grammar) is stored once per distinct content in a table
of its own and referenced from its record's row (:mod:`citelock.store._payloads`); a record reads back as the
same JSON, byte for byte, and ``record_sha256`` is the hash of that whole JSON, as for a record stored whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError

from citelock.errors import InputError, StoreIntegrityError
from citelock.prompt import messages_sha256
from citelock.records import PromptRecord
from citelock.store._chain import (
    ALG_HMAC,
    ALG_PLAIN,
    GENESIS,
    KEY_ENV,
    ChainProblem,
    ChainReport,
    content_hash,
    legacy_seal,
    link_hash,
    log_key,
)
from citelock.store._engine import insert_skipping, make_engine, serialized
from citelock.store._payloads import PAYLOAD_TABLE, joined, payload_table, split_record
from citelock.store._tables import ensure_tables

__all__ = ["PromptLog"]

_TABLE = "citelock_prompt_log"
_CHAIN_COLUMNS = ("seq", "prev_hash", "chain_hash", "alg")
_MAX_PROBLEMS = 100
_HEX64 = re.compile(r"[0-9a-f]{64}")

_metadata = MetaData()
_log = Table(
    _TABLE,
    _metadata,
    Column("request_id", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("sha256", String(64), nullable=False),
    Column("record_sha256", String(64), nullable=False),
    Column("record", Text, nullable=False),
    # The chain. Nullable only because records written before the chain have none; inserts must set them.
    Column("seq", Integer, nullable=True),
    Column("prev_hash", String(64), nullable=True),
    Column("chain_hash", String(64), nullable=True),
    Column("alg", String(16), nullable=True),
    # A large constraint payload stored apart (see citelock.store._payloads); NULL: the record is stored whole.
    Column("payload_sha256", String(64), nullable=True),
)
Index(f"{_TABLE}_seq", _log.c.seq, unique=True)
_payload = payload_table(_metadata)
_WITH_PAYLOAD = select(_log, _payload.c.payload).select_from(
    _log.outerjoin(_payload, _log.c.payload_sha256 == _payload.c.sha256)
)

# Built once: an append runs the same three statements every time (SQLAlchemy caches their compiled forms).
_SELECT_ID = select(_log.c.request_id).where(_log.c.request_id == bindparam("request_id"))
_SELECT_HEAD = (
    select(_log.c.seq, _log.c.prev_hash, _log.c.chain_hash, _log.c.alg, _log.c.request_id, _log.c.record_sha256)
    .where(_log.c.seq.is_not(None))
    .order_by(_log.c.seq.desc())
    .limit(1)
)
_INSERT = insert(_log)


def _upgrade(conn: Connection) -> None:
    # create_all makes the index with a new table; a table from before the chain gets it here.
    conn.execute(text(f"CREATE UNIQUE INDEX IF NOT EXISTS {_TABLE}_seq ON {_TABLE} (seq)"))


class PromptLog:
    """Append-only, hash-chained log of :class:`PromptRecord` s, found by request id.

    Args:
        target: A SQLite file path (created if missing), a database URL (``postgresql://...``) or an engine.
        key: Secret key for the chain's HMAC (str or bytes). None: ``$CITELOCK_LOG_KEY`` if set, else the
            chain is plain SHA-256 (tamper-evident only against edits that do not recompute the chain). A log
            is keyed or not from its first record on; a writer with the wrong key, or none, cannot append to a
            keyed log.

    Raises:
        InputError: an empty key.
    """

    def __init__(self, target: str | Path | Engine, *, key: str | bytes | None = None) -> None:
        self._key = log_key(key)
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        ensure_tables(
            self.engine,
            _metadata,
            append_only=[_TABLE, PAYLOAD_TABLE],
            required={_TABLE: _CHAIN_COLUMNS},
            upgrade=_upgrade,
        )
        self._insert_payload = insert_skipping(self.engine, _payload, "sha256")
        self._stored_payloads: set[str] = set()  # payloads this handle saw committed (written once each)

    @property
    def keyed(self) -> bool:
        """True when this handle holds an HMAC key."""
        return self._key is not None

    def append(self, record: PromptRecord) -> None:
        """Append a record as the chain's new head.

        Raises:
            InputError: a record with this request id is already logged (records are never replaced), or the
                log is keyed and this handle has no key (or the reverse).
            StoreIntegrityError: the current head does not verify under this handle's key (a wrong key, or a
                tampered head); nothing is appended after a broken head.
        """
        split = split_record(record)
        record_sha256 = split.record_sha256
        alg = ALG_HMAC if self._key is not None else ALG_PLAIN
        try:
            with serialized(self.engine, _TABLE) as conn:
                if conn.execute(_SELECT_ID, {"request_id": record.request_id}).first():
                    raise _duplicate(record.request_id)
                head = conn.execute(_SELECT_HEAD).mappings().first()
                if head is None:
                    seq, prev = 1, self._seal(conn)
                else:
                    self._check_head(head)
                    seq, prev = int(head["seq"]) + 1, str(head["chain_hash"])
                new_payload = split.payload_sha256 is not None and split.payload_sha256 not in self._stored_payloads
                if new_payload:
                    payload = (split.payload or b"").decode("utf-8")
                    conn.execute(self._insert_payload, {"sha256": split.payload_sha256, "payload": payload})
                conn.execute(
                    _INSERT,
                    {
                        "request_id": record.request_id,
                        "created_at": record.created_at,
                        "sha256": record.sha256,
                        "record_sha256": record_sha256,
                        "record": split.stored,
                        "payload_sha256": split.payload_sha256,
                        "seq": seq,
                        "prev_hash": prev,
                        "chain_hash": link_hash(self._key, seq, prev, record.request_id, record_sha256),
                        "alg": alg,
                    },
                )
        except IntegrityError:  # the serialized check above makes this unreachable, barring other writers
            raise _duplicate(record.request_id) from None
        if split.payload_sha256 is not None:
            self._stored_payloads.add(split.payload_sha256)  # committed: later appends skip its insert

    def _check_head(self, head: Any) -> None:
        if head["alg"] == ALG_HMAC and self._key is None:
            raise InputError(f"this prompt log is keyed (HMAC-SHA256): give key= or set ${KEY_ENV} to append to it")
        if head["alg"] != ALG_HMAC and self._key is not None:
            raise InputError(
                "this prompt log's chain is not keyed; a key cannot be added to an existing chain "
                f"(unset ${KEY_ENV}, or start a new log to use a key)"
            )
        expected = link_hash(self._key, int(head["seq"]), head["prev_hash"], head["request_id"], head["record_sha256"])
        if expected != head["chain_hash"]:
            raise StoreIntegrityError(
                f"prompt log head record {head['request_id']!r} (#{head['seq']}) does not verify"
                + (" under this key: a wrong key, or a tampered head" if self._key else ": it was tampered with")
                + "; run `citelock log verify`"
            )

    @staticmethod
    def _seal(conn: Connection) -> str:
        """The first chained record's predecessor: GENESIS, or the seal over the legacy records."""
        c = _log.c
        rows = conn.execute(select(c.request_id, c.record_sha256).where(c.seq.is_(None))).all()
        return _seal_of([(str(rid), str(digest)) for rid, digest in rows])

    def get(self, request_id: str) -> PromptRecord:
        """The record logged under ``request_id``.

        Raises:
            KeyError: no such request id.
            StoreIntegrityError: the stored record no longer matches its hash (or its own chain link, when
                this handle can compute it).
        """
        with self.engine.connect() as conn:
            row = conn.execute(_WITH_PAYLOAD.where(_log.c.request_id == request_id)).mappings().first()
        if row is None:
            raise KeyError(request_id)
        record = self._verified(row)
        problem = self._link_problem(row)
        if problem is not None:
            raise StoreIntegrityError(f"prompt log record {request_id!r}: {problem}")
        return record

    def __contains__(self, request_id: object) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(_log.c.request_id).where(_log.c.request_id == request_id)).first() is not None

    def __len__(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(_log)).scalar_one())

    def __iter__(self) -> Iterator[PromptRecord]:
        """All records, legacy ones first (oldest first), then in chain order, each verified."""
        c = _log.c
        query = _WITH_PAYLOAD.order_by(c.seq.asc().nulls_first(), c.created_at, c.request_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        for row in rows:
            yield self._verified(row)

    def verify(self) -> list[str]:
        """Request ids of broken records: content that no longer matches its hash, or a broken chain link.

        Empty when the log is intact. :meth:`verify_chain` gives the full report.
        """
        seen: dict[str, None] = {}
        for problem in self.verify_chain().problems:
            if problem.request_id is not None:
                seen.setdefault(problem.request_id)
        return list(seen)

    def verify_chain(self, *, anchor: str | None = None) -> ChainReport:
        """Walk the whole log: every record's content, then every link of the chain in order.

        Args:
            anchor: A head hash printed by an earlier walk (kept outside the database). The chain must still
                contain it; if it does not, records were removed from the end or the chain was rewritten.

        Returns:
            The report; ``report.first_broken`` names the first broken record.

        Raises:
            InputError: ``anchor`` is not 64 lowercase hex characters.
        """
        if anchor is not None and not _HEX64.fullmatch(anchor):
            raise InputError(f"anchor must be a chain hash (64 lowercase hex characters), got {anchor!r}")
        walk = _Walk(self._key, anchor)
        c = _log.c
        with self.engine.connect() as conn:
            unchained = _WITH_PAYLOAD.where(c.seq.is_(None)).order_by(c.request_id)
            for row in conn.execute(unchained.execution_options(yield_per=500)).mappings():
                walk.legacy_record(row)
            walk.start_chain()
            chained = _WITH_PAYLOAD.where(c.seq.is_not(None)).order_by(c.seq, c.request_id)
            for row in conn.execute(chained.execution_options(yield_per=500)).mappings():
                walk.chained_record(row)
        return walk.report()

    def _link_problem(self, row: Any) -> str | None:
        """What is wrong with the record's own link hash, if this handle can compute it."""
        if row["seq"] is None:
            return None
        if self._key is not None and row["alg"] != ALG_HMAC:
            return f"it is {row['alg']}, not keyed: written or rewritten without the key"
        if row["alg"] == ALG_HMAC:
            if self._key is None:
                return None
            key: bytes | None = self._key
        elif row["alg"] == ALG_PLAIN:
            key = None
        else:
            return f"unknown chain algorithm {row['alg']!r}"
        expected = link_hash(key, int(row["seq"]), row["prev_hash"], row["request_id"], row["record_sha256"])
        if expected != row["chain_hash"]:
            return "its chain hash does not match its content: edited, or rewritten without the key"
        return None

    @staticmethod
    def _verified(row: Any) -> PromptRecord:
        record, problem = _checked(row)
        if problem is not None or record is None:
            raise StoreIntegrityError(f"prompt log record {row['request_id']!r}: {problem}")
        return record


class _Walk:
    """The state of one walk over the log: legacy records first, then the chain in order."""

    def __init__(self, key: bytes | None, anchor: str | None) -> None:
        self.key = key
        self.anchor = anchor
        self.anchor_found = False
        self.problems: list[ChainProblem] = []
        self.count = 0
        self.legacy: list[tuple[str, str]] = []
        self.chained = 0
        self.expected_seq = 1
        self.expected_prev = GENESIS
        self.first_alg: str | None = None
        self.chain_alg: str | None = ALG_HMAC if key is not None else None  # holding a key: expect a keyed chain
        self.macs_checked = True
        self.head: tuple[int, str] | None = None

    def note(self, seq: int | None, request_id: str | None, what: str) -> None:
        self.count += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(ChainProblem(seq=seq, request_id=request_id, problem=what))

    def legacy_record(self, row: Any) -> None:
        self.legacy.append((str(row["request_id"]), str(row["record_sha256"])))
        problem = _checked(row)[1]
        if problem is not None:
            self.note(None, row["request_id"], f"legacy record: {problem}")

    def start_chain(self) -> None:
        self.expected_prev = _seal_of(self.legacy)

    def chained_record(self, row: Any) -> None:
        seq, rid = int(row["seq"]), str(row["request_id"])
        self.chained += 1
        problem = _checked(row)[1]
        if problem is not None:
            self.note(seq, rid, problem)
        if seq != self.expected_seq:
            self.note(
                seq, rid, f"found at position {seq} where {self.expected_seq} was due: records removed or reordered"
            )
        if row["prev_hash"] != self.expected_prev:
            what = "the record before it"
            if seq == 1:
                what = "the legacy records' seal" if self.legacy else "the start of the chain"
            self.note(seq, rid, f"does not follow {what}: a record was removed, inserted or reordered")
        self.first_alg = self.first_alg or str(row["alg"])
        self.chain_alg = self.chain_alg or self.first_alg
        if row["alg"] != self.chain_alg:
            why = "written or rewritten without the key" if self.key is not None else "a mixed chain"
            self.note(seq, rid, f"is {row['alg']} in a {self.chain_alg} chain ({why})")
        elif row["alg"] == ALG_HMAC and self.key is None:
            self.macs_checked = False
        else:
            key = self.key if row["alg"] == ALG_HMAC else None
            if link_hash(key, seq, row["prev_hash"], rid, row["record_sha256"]) != row["chain_hash"]:
                self.note(seq, rid, "its chain hash does not match its content: edited, or rewritten without the key")
        # Continue from what is stored, so one break is reported once, not at every later record.
        self.expected_prev, self.expected_seq = str(row["chain_hash"]), seq + 1
        self.anchor_found = self.anchor_found or row["chain_hash"] == self.anchor
        self.head = (seq, str(row["chain_hash"]))

    def report(self) -> ChainReport:
        if self.anchor is not None and not self.anchor_found:
            self.note(
                None,
                None,
                f"the anchor {self.anchor[:16]}… is not in the chain: records after it were removed (truncated) "
                "or the chain was rewritten",
            )
        return ChainReport(
            records=len(self.legacy) + self.chained,
            legacy=len(self.legacy),
            keyed=self.first_alg == ALG_HMAC,
            macs_checked=self.macs_checked,
            head_seq=self.head[0] if self.head else None,
            head_hash=self.head[1] if self.head else None,
            anchor=self.anchor,
            anchor_found=None if self.anchor is None else self.anchor_found,
            problems=self.problems,
            problem_count=self.count,
        )


def _seal_of(legacy: list[tuple[str, str]]) -> str:
    # Sorted here, not by the database: collations differ between databases and settings, code points do not.
    return legacy_seal(sorted(legacy)) if legacy else GENESIS


def _duplicate(request_id: str) -> InputError:
    return InputError(f"request id {request_id!r} is already in the prompt log; records are never replaced")


def _checked(row: Any) -> tuple[PromptRecord | None, str | None]:
    """The stored record and None, or what is wrong with its content (it was altered after it was written)."""
    text, problem = joined(row["record"], row["payload_sha256"], row["payload"])
    if text is None:
        return None, problem
    if content_hash(text) != row["record_sha256"]:
        return None, "its content was altered: it no longer matches its hash"
    try:
        record = PromptRecord.model_validate_json(text)
    except ValidationError as exc:
        return None, f"the stored JSON is not a prompt record ({exc.errors()[0]['msg']})"
    if record.request_id != row["request_id"]:
        return None, f"the stored record is request {record.request_id!r}, not the row's"
    if messages_sha256(record.messages) != record.sha256 or record.sha256 != row["sha256"]:
        return None, "the messages no longer match the logged sha256"
    return record, None
