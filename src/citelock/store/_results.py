"""The result store: every guarded answer's :class:`~citelock.guard.GuardResult`, appended; metrics read it.

Rows are appended, never updated: the database refuses UPDATE and DELETE (triggers). Guarding the same request
again (a replay with a newer judge) appends a new row; :meth:`ResultStore.latest` keeps the newest row per
(request id, surface), which is what metrics count.

A result may carry a *key* (``append(result, key=...)``, :meth:`ResultStore.append_many`): a result whose key is
already stored is not stored again, so a batch job that redoes work after a crash (``citelock audit``) stores
each result once. The key column is added (nullable, unique) when a database written before it is opened.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    func,
    insert,
    select,
    text,
)

from citelock.errors import UsageError
from citelock.store._engine import insert_skipping, make_engine
from citelock.store._tables import ensure_tables

if TYPE_CHECKING:
    from citelock.guard import GuardResult

__all__ = ["ResultStore"]

_metadata = MetaData()
_results = Table(
    "citelock_results",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("request_id", String(200), nullable=False, index=True),
    Column("surface", String(200), nullable=False, index=True),
    Column("week", String(10), nullable=False, index=True),
    Column("decision", String(32), nullable=False),  # pass | repaired | block (was String(8): widened on open)
    Column("result", Text, nullable=False),
    # Added after the first release: nullable (older rows have none); unique where set (idempotent appends).
    Column("result_key", String(64), nullable=True),
)
Index("citelock_results_result_key", _results.c.result_key, unique=True)


def _upgrade(conn: Connection) -> None:
    # create_all makes the index with a new table; a table from before the key column gets it here.
    conn.execute(text("CREATE UNIQUE INDEX IF NOT EXISTS citelock_results_result_key ON citelock_results (result_key)"))


class ResultStore:
    """Append-only store of guard results.

    Args:
        target: A SQLite file path (created if missing), a database URL (``postgresql://...``) or an engine.
    """

    def __init__(self, target: str | Path | Engine) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        ensure_tables(self.engine, _metadata, append_only=[_results.name], upgrade=_upgrade)

    def append(self, result: GuardResult, *, key: str | None = None) -> bool:
        """Append one result (one transaction).

        Args:
            result: The result.
            key: The result's identity (at most 64 characters): when a result with this key is already stored,
                nothing is appended. None always appends.

        Returns:
            True when the result was appended, False when its key was already stored.

        Raises:
            UsageError: the result has no surface (a free-checks-only ``Guard()`` result): metrics group by surface.
        """
        return self.append_many([(result, key)]) == 1

    def append_many(self, results: Iterable[tuple[GuardResult, str | None]], *, conn: Connection | None = None) -> int:
        """Append ``(result, key)`` pairs in one transaction; a pair whose key is already stored is skipped.

        ``conn``: a connection in an open transaction to append in (another store's writes commit with these);
        None opens one.

        Returns:
            How many results were appended.

        Raises:
            UsageError: a result has no surface, or a key is empty or longer than 64 characters.
        """
        rows = [_row(result, key) for result, key in results]
        if not rows:
            return 0
        if conn is not None:
            return self._insert(conn, rows)
        with self.engine.begin() as own:
            return self._insert(own, rows)

    def _insert(self, conn: Connection, rows: list[dict[str, Any]]) -> int:
        added = 0
        keyed, plain = insert_skipping(self.engine, _results, "result_key"), insert(_results)
        for row in rows:
            statement = keyed if row["result_key"] is not None else plain
            # RETURNING, not rowcount: PostgreSQL drivers report -1 for an INSERT ... ON CONFLICT
            added += len(conn.execute(statement.values(**row).returning(_results.c.id)).all())
        return added

    def __len__(self) -> int:
        """How many results are stored (every appended row, not only the latest per request)."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(_results)).scalar_one())

    def latest(self, *, surface: str | None = None, week: str | None = None) -> list[GuardResult]:
        """The newest result per (request id, surface), oldest first, optionally for one surface / week."""
        from citelock.guard import GuardResult

        newest = select(func.max(_results.c.id)).group_by(_results.c.request_id, _results.c.surface)
        query = select(_results.c.result).where(_results.c.id.in_(newest))
        if surface is not None:
            query = query.where(_results.c.surface == surface)
        if week is not None:
            query = query.where(_results.c.week == week)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(_results.c.id)).scalars().all()
        return [GuardResult.model_validate_json(text) for text in rows]

    def for_request(self, request_id: str, *, surface: str | None = None) -> GuardResult | None:
        """The newest result stored for ``request_id`` (on ``surface``, if given), or None."""
        from citelock.guard import GuardResult

        query = select(_results.c.result).where(_results.c.request_id == request_id)
        if surface is not None:
            query = query.where(_results.c.surface == surface)
        with self.engine.connect() as conn:
            text = conn.execute(query.order_by(_results.c.id.desc()).limit(1)).scalar_one_or_none()
        return None if text is None else GuardResult.model_validate_json(text)


def _row(result: GuardResult, key: str | None) -> dict[str, Any]:
    if result.surface is None:
        raise UsageError("the result store holds surface results: run Guard(SurfacePolicy(...)) to store one")
    if key is not None and not 0 < len(key) <= 64:
        raise UsageError(f"a result key must be 1 to 64 characters, got {len(key)}")
    return {
        "request_id": result.report.request_id,
        "surface": result.surface,
        "week": result.week,
        "decision": result.decision,
        "result": result.model_dump_json(),
        "result_key": key,
    }
