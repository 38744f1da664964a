"""The prompt log: append-only and immutable; the artifact every later check points at.

No method updates or deletes a record, and the database itself refuses UPDATE and DELETE (triggers), so a
mistake elsewhere cannot rewrite history. Every read re-hashes the stored record: a record whose content no
longer matches its hash raises :class:`StoreIntegrityError` naming the request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Column, DateTime, Engine, MetaData, String, Table, Text, func, insert, select, text
from sqlalchemy.exc import IntegrityError

from citelock.errors import InputError, StoreIntegrityError
from citelock.prompt._serialize import messages_sha256
from citelock.records import PromptRecord
from citelock.store._engine import make_engine

__all__ = ["PromptLog"]

_metadata = MetaData()
_log = Table(
    "citelock_prompt_log",
    _metadata,
    Column("request_id", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("sha256", String(64), nullable=False),
    Column("record_sha256", String(64), nullable=False),
    Column("record", Text, nullable=False),
)

_SQLITE_GUARDS = [
    "CREATE TRIGGER IF NOT EXISTS citelock_prompt_log_no_update BEFORE UPDATE ON citelock_prompt_log "
    "BEGIN SELECT RAISE(ABORT, 'citelock prompt log is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS citelock_prompt_log_no_delete BEFORE DELETE ON citelock_prompt_log "
    "BEGIN SELECT RAISE(ABORT, 'citelock prompt log is append-only'); END",
]
_PG_GUARDS = [
    "CREATE OR REPLACE FUNCTION citelock_append_only() RETURNS trigger AS $$ BEGIN "
    "RAISE EXCEPTION 'citelock prompt log is append-only'; END; $$ LANGUAGE plpgsql",
    "DROP TRIGGER IF EXISTS citelock_prompt_log_append_only ON citelock_prompt_log",
    "CREATE TRIGGER citelock_prompt_log_append_only BEFORE UPDATE OR DELETE ON citelock_prompt_log "
    "FOR EACH ROW EXECUTE FUNCTION citelock_append_only()",
]


def _digest(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class PromptLog:
    """Append-only log of :class:`PromptRecord` s, found by request id.

    Args:
        target: A SQLite file path (created if missing) or a database URL (``postgresql://...``).
    """

    def __init__(self, target: str | Path | Engine) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        _metadata.create_all(self.engine, tables=[_log])
        guards = _PG_GUARDS if self.engine.dialect.name == "postgresql" else _SQLITE_GUARDS
        with self.engine.begin() as conn:
            for statement in guards:
                conn.execute(text(statement))

    def append(self, record: PromptRecord) -> None:
        """Append a record.

        Raises:
            InputError: a record with this request id is already logged (records are never replaced).
        """
        payload = record.model_dump_json()
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(_log).values(
                        request_id=record.request_id,
                        created_at=record.created_at,
                        sha256=record.sha256,
                        record_sha256=_digest(payload),
                        record=payload,
                    )
                )
        except IntegrityError:
            raise InputError(
                f"request id {record.request_id!r} is already in the prompt log; records are never replaced"
            ) from None

    def get(self, request_id: str) -> PromptRecord:
        """The record logged under ``request_id``.

        Raises:
            KeyError: no such request id.
            StoreIntegrityError: the stored record no longer matches its hash.
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(_log).where(_log.c.request_id == request_id)).mappings().first()
        if row is None:
            raise KeyError(request_id)
        return self._verified(row)

    def __contains__(self, request_id: object) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(_log.c.request_id).where(_log.c.request_id == request_id)).first() is not None

    def __len__(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(_log)).scalar_one())

    def __iter__(self) -> Iterator[PromptRecord]:
        """All records, oldest first, each verified."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(_log).order_by(_log.c.created_at, _log.c.request_id)).mappings().all()
        for row in rows:
            yield self._verified(row)

    def verify(self) -> list[str]:
        """Request ids whose stored content no longer matches its hash (empty when the log is intact)."""
        bad = []
        with self.engine.connect() as conn:
            for row in conn.execute(select(_log)).mappings():
                try:
                    self._verified(row)
                except StoreIntegrityError:
                    bad.append(row["request_id"])
        return bad

    @staticmethod
    def _verified(row: object) -> PromptRecord:
        data = dict(row)  # type: ignore[call-overload]
        if _digest(data["record"]) != data["record_sha256"]:
            raise StoreIntegrityError(
                f"prompt log record {data['request_id']!r} was altered: its content no longer matches its hash"
            )
        record = PromptRecord.model_validate_json(data["record"])
        if messages_sha256(record.messages) != record.sha256 or record.sha256 != data["sha256"]:
            raise StoreIntegrityError(
                f"prompt log record {data['request_id']!r}: the messages no longer match the logged sha256"
            )
        return record
