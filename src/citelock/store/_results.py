"""The result store: every guarded answer's :class:`~citelock.guard.GuardResult`, appended; metrics read it.

Rows are appended, never updated: the database refuses UPDATE and DELETE (triggers). Guarding the same request
again (a replay with a newer judge) appends a new row; :meth:`ResultStore.latest` keeps the newest row per
(request id, surface), which is what metrics count.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Column, DateTime, Engine, Integer, MetaData, String, Table, Text, func, insert, select

from citelock.errors import UsageError
from citelock.store._engine import make_engine
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
)


class ResultStore:
    """Append-only store of guard results.

    Args:
        target: A SQLite file path (created if missing), a database URL (``postgresql://...``) or an engine.
    """

    def __init__(self, target: str | Path | Engine) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        ensure_tables(self.engine, _metadata, append_only=[_results.name])

    def append(self, result: GuardResult) -> None:
        """Append one result (one transaction).

        Raises:
            UsageError: the result has no surface (a free-checks-only ``Guard()`` result): metrics group by surface.
        """
        if result.surface is None:
            raise UsageError("the result store holds surface results: run Guard(SurfacePolicy(...)) to store one")
        with self.engine.begin() as conn:
            conn.execute(
                insert(_results).values(
                    request_id=result.report.request_id,
                    surface=result.surface,
                    week=result.week,
                    decision=result.decision,
                    result=result.model_dump_json(),
                )
            )

    def __len__(self) -> int:
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
