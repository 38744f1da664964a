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

A handle holding the key never accepts less than a keyed chain: an unchained (legacy) record, a link that is not
HMAC, a dropped or disabled append-only trigger, or missing chain columns are integrity failures (reads raise
:class:`StoreIntegrityError`, :meth:`PromptLog.verify_chain` reports them), never a quiet fallback to the plain
checks. Otherwise stripping the chain (drop the triggers, NULL the chain columns, rewrite a record and its plain
hashes) would turn a keyed log into an "intact legacy" one. A real log from before the chain is keyed and
chained by an explicit, recorded migration (:func:`citelock.store._log_migrate.migrate_to_key`, ``citelock log
migrate``); a keyed handle does not repair the schema of such a log when it opens it.

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
    inspect,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError

from citelock.errors import InputError, StoreIntegrityError
from citelock.prompt import derived_problem, messages_sha256, verified_record
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
from citelock.store._payloads import PAYLOAD_TABLE, Split, joined, payload_table, split_record
from citelock.store._tables import disabled_triggers, ensure_tables, existing_triggers, trigger_names

__all__ = ["MIGRATIONS_TABLE", "PromptLog", "integrity_gaps", "migrations_table", "unkeyed"]

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
MIGRATIONS_TABLE = "citelock_prompt_log_migrations"
_migrations = Table(  # append-only: how the chain came to be keyed (see citelock.store._log_migrate)
    MIGRATIONS_TABLE,
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("migrated_at", DateTime(timezone=True), nullable=False),
    Column("records", Integer, nullable=False),  # 0: the chain was keyed from its first record (not migrated)
    Column("unchained", Integer, nullable=False),
    Column("previous_head", String(64), nullable=False),
    Column("head_hash", String(64), nullable=False),
    Column("alg", String(16), nullable=False),
)
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
_SELECT_UNCHAINED = select(_log.c.request_id).where(_log.c.seq.is_(None)).limit(1)

_UNCHAINED_IN_KEYED = (
    "this keyed prompt log holds unchained records (no chain link, or a link removed): written without the key "
    "or stripped of their chain; a real log from before the chain is keyed and chained with `citelock log "
    "migrate --key-file K`, and `citelock log verify` names the records"
)


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
        self._open(target if isinstance(target, Engine) else make_engine(target), log_key(key))

    def _open(self, engine: Engine, key: bytes | None) -> None:
        self._key = key
        self.engine = engine
        # Holding the key: what protects the log is checked before anything repairs it. A dropped trigger or a
        # missing chain column is reported (reads and appends raise), not silently restored.
        self._gaps = integrity_gaps(self.engine) if self._key is not None else ()
        if not self._gaps:
            ensure_tables(
                self.engine,
                _metadata,
                append_only=[_TABLE, PAYLOAD_TABLE, MIGRATIONS_TABLE],
                required={_TABLE: _CHAIN_COLUMNS},
                upgrade=_upgrade,
            )
        self._insert_payload = insert_skipping(self.engine, _payload, "sha256")
        self._stored_payloads: set[str] = set()  # payloads this handle saw committed (written once each)

    @property
    def keyed(self) -> bool:
        """True when this handle holds an HMAC key."""
        return self._key is not None

    def _refuse_gaps(self, request_id: str | None = None) -> None:
        if self._gaps:
            where = "" if request_id is None else f"prompt log record {request_id!r} cannot be trusted: "
            raise StoreIntegrityError(where + _gap_message(self._gaps))

    def append(self, record: PromptRecord) -> None:
        """Append a record as the chain's new head.

        Raises:
            InputError: a record with this request id is already logged (records are never replaced), or the
                log is keyed and this handle has no key (or the reverse); or the record's derived fields
                (normalized copy, offset maps, placements, sha256) disagree with its messages
                (:func:`citelock.prompt.derived_problem`): it is not logged.
            StoreIntegrityError: the current head does not verify under this handle's key (a wrong key, or a
                tampered head); nothing is appended after a broken head. With a key, also a log holding
                unchained records or missing its triggers.
        """
        self._append(record, existing_ok=False)

    def append_if_absent(self, record: PromptRecord) -> PromptRecord:
        """Append ``record`` unless the same record is already logged under its id; the record as logged.

        The membership test and the append are one transaction under the log's write lock, so any number of
        processes logging the same record at once log it once and all succeed. "The same" is every field but
        ``created_at`` (two processes reading one prompt file make the record at different instants).

        Raises:
            InputError: a *different* record is logged under this request id (records are never replaced), or
                the record's derived fields disagree with its messages; and as :meth:`append`.
            StoreIntegrityError: as :meth:`append`, or the logged record no longer verifies.
        """
        return self._append(record, existing_ok=True)

    def _append(self, record: PromptRecord, *, existing_ok: bool) -> PromptRecord:
        verified_record(record)  # a record every later read would refuse is never written
        self._refuse_gaps(record.request_id)
        split = split_record(record)
        try:
            with serialized(self.engine, _TABLE) as conn:
                if conn.execute(_SELECT_ID, {"request_id": record.request_id}).first():
                    if not existing_ok:
                        raise _duplicate(record.request_id)
                    row = conn.execute(_WITH_PAYLOAD.where(_log.c.request_id == record.request_id)).mappings().one()
                    return self._same_as_logged(row, record)
                self._insert(conn, record, split)
        except IntegrityError:  # the serialized check above makes this unreachable, barring other writers
            raise _duplicate(record.request_id) from None
        if split.payload_sha256 is not None:
            self._stored_payloads.add(split.payload_sha256)  # committed: later appends skip its insert
        return record

    def _same_as_logged(self, row: Any, record: PromptRecord) -> PromptRecord:
        logged = self._verified(row)
        problem = self._link_problem(row)
        if problem is not None:
            raise StoreIntegrityError(f"prompt log record {record.request_id!r}: {problem}")
        if logged.model_dump(exclude={"created_at"}) != record.model_dump(exclude={"created_at"}):
            raise InputError(
                f"request id {record.request_id!r} is already in the prompt log with a different record; "
                "records are never replaced"
            )
        return logged

    def _insert(self, conn: Connection, record: PromptRecord, split: Split) -> None:
        """Insert ``record`` as the new head, inside the caller's serialized transaction."""
        record_sha256 = split.record_sha256
        if self._key is not None and conn.execute(_SELECT_UNCHAINED).first() is not None:
            raise StoreIntegrityError(_UNCHAINED_IN_KEYED + "; nothing is appended to it")
        head = conn.execute(_SELECT_HEAD).mappings().first()
        if head is None:
            seq, prev = 1, self._seal(conn)
            if self._key is not None:  # remembered: a keyed log later found unchained was stripped
                conn.execute(
                    insert(_migrations).values(
                        migrated_at=record.created_at,
                        records=0,
                        unchained=0,
                        previous_head=prev,
                        head_hash=link_hash(self._key, 1, prev, record.request_id, record_sha256),
                        alg=ALG_HMAC,
                    )
                )
        else:
            self._check_head(head)
            seq, prev = int(head["seq"]) + 1, str(head["chain_hash"])
        if split.payload_sha256 is not None and split.payload_sha256 not in self._stored_payloads:
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
                "alg": ALG_HMAC if self._key is not None else ALG_PLAIN,
            },
        )

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
                this handle can compute it); with a key, also an unchained record or a log whose triggers or
                chain columns are gone.
        """
        self._refuse_gaps(request_id)
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
        self._refuse_gaps()
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
        if any(gap.startswith("the chain column") for gap in self._gaps):
            return walk.unwalkable(self.engine, self._gaps)  # a log from before the chain: nothing to walk
        c = _log.c
        with self.engine.connect() as conn:
            unchained = _WITH_PAYLOAD.where(c.seq.is_(None)).order_by(c.request_id)
            for row in conn.execute(unchained.execution_options(yield_per=500)).mappings():
                walk.legacy_record(row)
            walk.start_chain()
            chained = _WITH_PAYLOAD.where(c.seq.is_not(None)).order_by(c.seq, c.request_id)
            for row in conn.execute(chained.execution_options(yield_per=500)).mappings():
                walk.chained_record(row)
        for gap in self._gaps:
            walk.note(None, None, f"{gap}: {_GAP_HINT}")
        return walk.report()

    def _link_problem(self, row: Any) -> str | None:
        """What is wrong with the record's own link hash, if this handle can compute it."""
        if row["seq"] is None:
            return None if self._key is None else "it is not chained, in a keyed log (" + _UNCHAINED_IN_KEYED + ")"
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
        if self.key is not None:  # a keyed log is chained throughout: an unchained record is not "legacy" here
            self.note(
                None,
                row["request_id"],
                "an unchained record in a keyed log: written without the key, or its chain link was removed "
                "(a real log from before the chain is keyed and chained with `citelock log migrate`)",
            )

    def unwalkable(self, engine: Engine, gaps: tuple[str, ...]) -> ChainReport:
        """The report on a log whose chain columns are gone: its size and what is missing."""
        with engine.connect() as conn:
            count = int(conn.execute(select(func.count()).select_from(_log)).scalar_one())
        self.legacy = [("", "")] * count  # every record is unchained
        for gap in gaps:
            self.note(None, None, f"{gap}: {_GAP_HINT}")
        return self.report()

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


_GAP_HINT = (
    "a keyed log is not protected without it (dropped or disabled by someone with the schema owner's rights, or a "
    "log from before the chain: `citelock log migrate --key-file K` keys and chains one)"
)


def migrations_table() -> Table:
    """The table recording how the log's chain came to be keyed (from its first record, or by a migration)."""
    return _migrations


def unkeyed(engine: Engine) -> PromptLog:
    """A handle on the log without a key, whatever ``$CITELOCK_LOG_KEY`` says: the log read as it stands.

    For a migration to a key, which must first verify the log with the plain checks.
    """
    log = PromptLog.__new__(PromptLog)
    log._open(engine, None)
    return log


def integrity_gaps(engine: Engine) -> tuple[str, ...]:
    """What an existing prompt log lacks of its protection: chain columns, append-only and required triggers.

    Empty when there is no log table yet (nothing to protect) or nothing is missing. A disabled trigger
    (PostgreSQL) counts as missing.
    """
    with engine.connect() as conn:
        insp = inspect(conn)
        if not insp.has_table(_TABLE):
            return ()
        columns = {column["name"] for column in insp.get_columns(_TABLE)}
        gaps = [f"the chain column {name} is missing" for name in _CHAIN_COLUMNS if name not in columns]
        dialect = conn.dialect.name
        if dialect in ("sqlite", "postgresql"):
            tables = [_TABLE, *(t for t in (PAYLOAD_TABLE, MIGRATIONS_TABLE) if insp.has_table(t))]
            wanted = trigger_names(dialect, tables, {_TABLE: _CHAIN_COLUMNS})
            present = existing_triggers(conn) - disabled_triggers(conn)
            gaps += [f"the trigger {name} is missing or disabled" for name in sorted(wanted - present)]
    return tuple(gaps)


def _gap_message(gaps: tuple[str, ...]) -> str:
    return f"the keyed prompt log is not protected: {'; '.join(gaps)} ({_GAP_HINT}); run `citelock log verify`"


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
    derived = derived_problem(record)  # what a check relies on is recomputed from the messages as sent
    if derived is not None:
        return None, f"its derived fields disagree with its messages: {derived}"
    return record, None
