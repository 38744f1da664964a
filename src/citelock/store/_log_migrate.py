"""Keying a prompt log: the explicit, recorded migration of a log written before the chain, or without a key.

A handle holding the key refuses anything less than a keyed chain (see :mod:`citelock.store._prompt_log`), so a
real log from before the chain, or one chained with plain SHA-256, has to be brought under the key once, on
purpose. :func:`migrate_to_key` does that in one transaction, holding the log's write lock:

1. the log is verified as it stands (every record against its own hash, the plain chain if there is one); a
   broken log is not migrated (a migration must not launder a rewrite);
2. every record is given a link of a new HMAC chain under the key: the unchained records first (oldest first,
   then by request id), then the chained ones in chain order; the append-only trigger is lifted for exactly
   these updates and restored before the commit;
3. a row in ``citelock_prompt_log_migrations`` (append-only) records when, how many records, how many were
   unchained, the head the log had before (its plain chain head, or the seal over its unchained records) and
   the new head.

A log whose chain is already keyed is left alone; one that holds a keyed chain *and* unchained records is not a
log from before the chain but a stripped one, and is refused. A stripped log whose every link was removed looks
exactly like a log from before the chain: only the migrations table (a keyed log that was never migrated was
keyed from its first record) and an anchor kept elsewhere tell them apart, which is why the migration is a
command someone runs and the record it leaves, never something a read does by itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    insert,
    select,
    text,
    update,
)

from citelock.errors import InputError, StoreIntegrityError
from citelock.store._chain import ALG_HMAC, GENESIS, legacy_seal, link_hash, log_key
from citelock.store._engine import make_engine, serialized
from citelock.store._prompt_log import MIGRATIONS_TABLE, PromptLog, migrations_table, unkeyed
from citelock.store._tables import append_only_triggers, existing_tables

__all__ = ["Migration", "migrate_to_key", "migrations"]

_LOG = "citelock_prompt_log"
_migrations = migrations_table()
_log_rows = Table(  # the columns of the prompt log this module reads and sets (the log's own table)
    _LOG,
    MetaData(),
    Column("request_id", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True)),
    Column("record_sha256", String(64)),
    Column("seq", Integer),
    Column("prev_hash", String(64)),
    Column("chain_hash", String(64)),
    Column("alg", String(16)),
)


class Migration(BaseModel):
    """How a prompt log's chain came to be keyed: a row of ``citelock_prompt_log_migrations``.

    Attributes:
        migrated_at: When it ran (UTC), or when the first record of a log keyed from the start was written.
        records: Records keyed and chained (0: the log was keyed from its first record, not migrated).
        unchained: Of them, records that had no chain link (written before the chain).
        previous_head: The log's head before: its plain chain's head hash, or the seal over its unchained records.
        head_hash: The new chain's head hash: keep it elsewhere and pass it to ``log verify --anchor``.
        alg: The new chain's algorithm (``hmac-sha256``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    migrated_at: datetime
    records: int
    unchained: int
    previous_head: str
    head_hash: str
    alg: str


def migrations(target: str | Path | Engine) -> list[Migration]:
    """Every recorded migration of the log at ``target``, oldest first (empty when there is none)."""
    engine = target if isinstance(target, Engine) else make_engine(target)
    with engine.connect() as conn:
        if MIGRATIONS_TABLE not in existing_tables(conn):
            return []
        rows = conn.execute(select(_migrations).order_by(_migrations.c.id)).mappings().all()
    return [Migration(**{k: v for k, v in row.items() if k != "id"}) for row in rows]


def migrate_to_key(target: str | Path | Engine, key: str | bytes | None) -> Migration | None:
    """Key and chain every record of the prompt log at ``target`` under ``key``, in one recorded transaction.

    Args:
        target: The database (a SQLite path, a URL or an engine) holding the prompt log.
        key: The HMAC key (None: ``$CITELOCK_LOG_KEY``).

    Returns:
        The migration recorded, or None when the log was already keyed and chained under this key (or empty).

    Raises:
        InputError: no key given (nor in the environment).
        StoreIntegrityError: the log is broken as it stands, holds a keyed chain with unchained records (a
            stripped log), or is keyed under another key.
    """
    raw_key = log_key(key)
    if raw_key is None:
        raise InputError("migrating the prompt log to a key needs the key (key=, --key-file or $CITELOCK_LOG_KEY)")
    engine = target if isinstance(target, Engine) else make_engine(target)
    as_stored = unkeyed(engine)  # opened first: the schema gets its chain columns and triggers (DDL, own lock)
    keyed = PromptLog(engine, key=raw_key)
    with serialized(engine, _LOG) as conn:  # appends wait: nothing is added while the chain is rebuilt
        report = as_stored.verify_chain()  # read on its own connection: what is committed, under this lock
        if report.keyed:
            if report.legacy:
                raise StoreIntegrityError(
                    f"the prompt log holds a keyed chain and {report.legacy} unchained records: they were stripped "
                    "of their links, they are not from before the chain; it is not migrated"
                )
            if not keyed.verify_chain().ok:
                raise StoreIntegrityError("the prompt log is keyed, and does not verify under this key")
            return None
        before = conn.execute(select(_migrations.c.migrated_at).order_by(_migrations.c.id).limit(1)).first()
        if before is not None:
            raise StoreIntegrityError(
                f"the prompt log was keyed (since {before[0]}, per {MIGRATIONS_TABLE}) and now holds no keyed "
                "chain: its links were stripped, its records are not from before the chain; it is not migrated"
            )
        if not report.ok:
            first = report.first_broken
            assert first is not None
            raise StoreIntegrityError(
                f"the prompt log is broken ({first.request_id or 'the log'}: {first.problem}); it is not migrated"
            )
        if report.records == 0:
            return None
        c = _log_rows.c
        unchained = conn.execute(
            select(c.request_id, c.record_sha256).where(c.seq.is_(None)).order_by(c.created_at, c.request_id)
        ).all()
        chained = conn.execute(select(c.request_id, c.record_sha256).where(c.seq.is_not(None)).order_by(c.seq)).all()
        previous = report.head_hash or legacy_seal(sorted((str(r), str(d)) for r, d in unchained))
        head = _rechain(conn, raw_key, [(str(r), str(d)) for r, d in [*unchained, *chained]])
        migration = Migration(
            migrated_at=datetime.now(UTC),
            records=len(unchained) + len(chained),
            unchained=len(unchained),
            previous_head=previous,
            head_hash=head,
            alg=ALG_HMAC,
        )
        conn.execute(insert(_migrations).values(**migration.model_dump()))
    return migration


def _rechain(conn: Connection, key: bytes, order: list[tuple[str, str]]) -> str:
    """Give the records, in ``order``, the links of a new HMAC chain; the new head hash."""
    dialect = conn.dialect.name
    guard = f"{_LOG}_no_update" if dialect == "sqlite" else f"{_LOG}_no_update_delete"
    if dialect == "sqlite":
        conn.execute(text(f"DROP TRIGGER IF EXISTS {guard}"))
    elif dialect == "postgresql":
        conn.execute(text(f"ALTER TABLE {_LOG} DISABLE TRIGGER {guard}"))
    c = _log_rows.c
    conn.execute(update(_log_rows).where(c.seq.is_not(None)).values(seq=None))  # no unique-seq clash below
    prev, links = GENESIS, []
    for seq, (request_id, digest) in enumerate(order, start=1):
        chain = link_hash(key, seq, prev, request_id, digest)
        links.append({"rid": request_id, "seq": seq, "prev": prev, "chain": chain, "alg": ALG_HMAC})
        prev = chain
    statement = (
        update(_log_rows)
        .where(c.request_id == bindparam("rid"))
        .values(seq=bindparam("seq"), prev_hash=bindparam("prev"), chain_hash=bindparam("chain"), alg=bindparam("alg"))
    )
    if links:
        conn.execute(statement, links)
    if dialect == "sqlite":
        conn.execute(text(append_only_triggers(dialect, _LOG)[guard]))
    elif dialect == "postgresql":
        conn.execute(text(f"ALTER TABLE {_LOG} ENABLE TRIGGER {guard}"))
    return prev
