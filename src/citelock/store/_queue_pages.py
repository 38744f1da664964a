"""Reading a large review queue a page at a time: counts per reason, keyset pages, neighbours, facets, exports.

:meth:`ReviewQueue.items` reads and parses every entry, which is right for metrics and small queues and wrong
for a page a reviewer waits for on a queue of 100,000 entries. :class:`QueueBrowser` asks the database only for
what a page shows:

- :meth:`~QueueBrowser.counts`: entries per reason code (and the oldest one's age) under a filter, one
  ``GROUP BY``;
- :meth:`~QueueBrowser.page`: one page in the queue's order (reason, then age, then id), found by *keyset*
  (the entry before or after which the page starts), so page 2,000 costs what page 1 costs, and a page stays
  stable while other reviewers resolve entries;
- :meth:`~QueueBrowser.neighbours`: the entries before and after one entry in that order (next / previous);
- :meth:`~QueueBrowser.facets`: the surfaces, weeks and reviewers there are to filter by;
- :meth:`~QueueBrowser.reviewed`: the reviewed entries with their current outcomes, streamed (exports).

The first browser on a queue adds one index to it (reason, age, id, surface, week): counts and pages then read
that index, never the large entry rows they skip. An entry's status is derived from its events as everywhere
else: open while it has none, else its latest event's outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import field_validator
from sqlalchemy import and_, exists, func, inspect, select, text, tuple_

from citelock.errors import InputError
from citelock.reasons import ReasonCode
from citelock.records import _Record
from citelock.store._engine import serialized
from citelock.store._queue import QueueEntry, Resolution, ReviewQueue, _entries, _events
from citelock.store._utc import aware

__all__ = ["QueueBrowser", "QueueFacets", "QueueFilter", "QueuePage", "QueueRow", "QueueStatus", "ReasonCount"]

QueueStatus = Literal["open", "resolved", "accept", "repair", "escalate", "all"]
"""``open`` (no outcome yet), ``resolved`` (any outcome), one outcome, or ``all``."""

MAX_PAGE = 500


class QueueFilter(_Record):
    """Which entries a page, a count or an export covers.

    Attributes:
        reason: Only this reason code.
        surface: Only this surface.
        week: Only this ISO week (``2025-W07``).
        status: ``open``, ``resolved``, ``accept``, ``repair``, ``escalate`` or ``all``.
        reviewer: Only entries whose current outcome this reviewer recorded.
    """

    reason: ReasonCode | None = None
    surface: str | None = None
    week: str | None = None
    status: QueueStatus = "open"
    reviewer: str | None = None

    @field_validator("surface", "week", "reviewer", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @classmethod
    def parse(
        cls,
        *,
        reason: str | None = None,
        surface: str | None = None,
        week: str | None = None,
        status: str | None = None,
        reviewer: str | None = None,
    ) -> QueueFilter:
        """A filter from text (a query string, command-line options); empty values mean no filter.

        Raises:
            InputError: an unknown reason code or status.
        """
        code = None
        if reason:
            try:
                code = ReasonCode(reason)
            except ValueError:
                raise InputError(
                    f"unknown reason code {reason!r}; expected one of {', '.join(r.value for r in ReasonCode)}"
                ) from None
        state = status or "open"
        if state not in get_args(QueueStatus):
            raise InputError(f"status must be one of {', '.join(get_args(QueueStatus))}, got {state!r}")
        return cls.model_validate(
            {"reason": code, "surface": surface, "week": week, "status": state, "reviewer": reviewer}
        )

    def query(self) -> dict[str, str]:
        """The filter as query-string parameters (only those set)."""
        out: dict[str, str] = {"status": self.status}
        for name in ("surface", "week", "reviewer"):
            value = getattr(self, name)
            if value:
                out[name] = value
        if self.reason is not None:
            out["reason"] = self.reason.value
        return out


class QueueRow(_Record):
    """One entry of a page with its current outcome (None while open)."""

    entry: QueueEntry
    resolution: Resolution | None


class ReasonCount(_Record):
    """How many entries of one reason code a filter covers, and when the oldest was queued."""

    reason: ReasonCode
    count: int
    oldest: datetime


class QueuePage(_Record):
    """One page of the queue in its order.

    Attributes:
        rows: The page's entries.
        next_after: Give this as ``after`` for the next page (None: this is the last page).
        prev_before: Give this as ``before`` for the previous page (None: this is the first page).
    """

    rows: tuple[QueueRow, ...]
    next_after: str | None
    prev_before: str | None


class QueueFacets(_Record):
    """The values there are to filter by."""

    surfaces: tuple[str, ...]
    weeks: tuple[str, ...]
    reviewers: tuple[str, ...]


_EVENT_FIELDS = tuple(Resolution.model_fields)
_ORDER = (_entries.c.reason, _entries.c.created_at, _entries.c.id)
# The queue's order, then the columns filters test: counts and pages read this index alone, never the entry rows
# they skip (an entry row holds the whole finding as JSON).
_BROWSE_INDEX = "citelock_queue_browse"
_BROWSE_COLUMNS = ("reason", "created_at", "id", "surface", "week")


class QueueBrowser:
    """Paged, filtered reads of a :class:`ReviewQueue` for the review desk.

    Args:
        queue: The queue to read.
    """

    def __init__(self, queue: ReviewQueue) -> None:
        self.queue = queue
        self.engine = queue.engine
        self._ensure_index()

    def _ensure_index(self) -> None:
        """Create the browse index the first time a browser opens a queue (one process at a time)."""
        with self.engine.connect() as conn:
            if any(ix["name"] == _BROWSE_INDEX for ix in inspect(conn).get_indexes(_entries.name)):
                return
        with serialized(self.engine, "ddl") as conn:
            columns = ", ".join(_BROWSE_COLUMNS)
            conn.execute(text(f"CREATE INDEX IF NOT EXISTS {_BROWSE_INDEX} ON {_entries.name} ({columns})"))

    def _unindexed(self, column: Any) -> Any:
        """``column`` as a term SQLite will not look up by its own index.

        Without statistics SQLite takes the single-column surface or week index for a filter on it, then sorts
        every matching row (a third of the queue for a common surface) to find one page; scanning the browse
        index in page order and filtering on its surface and week columns reads only the page. Likewise an
        outcome test inside a per-entry ``EXISTS`` must find the entry's events by entry id, not every event
        with that outcome.
        """
        return column.concat("") if self.engine.dialect.name == "sqlite" else column

    def _conditions(self, where: QueueFilter, *, by_reason: bool = True) -> list[Any]:
        """The conditions of ``where`` on the entries table alone.

        The status is an ``EXISTS`` on the events (an anti-join for ``open``), never an outer join to each
        entry's current event: with the join, PostgreSQL misjudges how many rows survive and sorts the whole
        queue for one page, where the ``EXISTS`` lets both databases walk the browse index in page order.
        """
        conditions: list[Any] = []
        if by_reason and where.reason is not None:
            conditions.append(_entries.c.reason == where.reason.value)
        if where.surface is not None:
            conditions.append(self._unindexed(_entries.c.surface) == where.surface)
        if where.week is not None:
            conditions.append(self._unindexed(_entries.c.week) == where.week)
        any_event = exists().where(_events.c.entry_id == _entries.c.id)
        if where.status == "open":
            conditions.append(~any_event)
        elif where.status == "resolved" and where.reviewer is None:
            conditions.append(any_event)
        elif where.status != "all" or where.reviewer is not None:
            current = _events.alias("current_event")
            newer = _events.alias("newer_event")
            test = [
                current.c.entry_id == _entries.c.id,
                ~exists().where(newer.c.entry_id == current.c.entry_id, newer.c.revision > current.c.revision),
            ]
            if where.status not in ("all", "resolved"):
                # (SQLite would otherwise look the outcome up by its own index, for every entry)
                test.append(self._unindexed(current.c.outcome) == where.status)
            if where.reviewer is not None:
                test.append(current.c.reviewer == where.reviewer)
            conditions.append(exists().where(*test))
        return conditions

    def _current(self, entry_ids: list[str]) -> dict[str, Resolution]:
        """The current outcome of each of ``entry_ids`` that has one."""
        if not entry_ids:
            return {}
        query = select(*(_events.c[name] for name in _EVENT_FIELDS)).where(_events.c.entry_id.in_(entry_ids))
        out: dict[str, Resolution] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                event = _resolution(row)
                if event.entry_id not in out or out[event.entry_id].revision < event.revision:
                    out[event.entry_id] = event
        return out

    def counts(self, where: QueueFilter) -> list[ReasonCount]:
        """Entries per reason code under ``where`` (its ``reason`` is ignored), largest group first."""
        query = (
            select(_entries.c.reason, func.count().label("n"), func.min(_entries.c.created_at).label("oldest"))
            .where(*self._conditions(where, by_reason=False))
            .group_by(_entries.c.reason)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        out = [ReasonCount(reason=ReasonCode(r), count=int(n), oldest=aware(oldest)) for r, n, oldest in rows]
        return sorted(out, key=lambda c: (-c.count, c.reason.value))

    def _position(self, entry_id: str) -> tuple[Any, Any, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(*_ORDER).where(_entries.c.id == entry_id)).first()
        if row is None:
            raise KeyError(entry_id)
        return (row[0], row[1], row[2])

    def page(
        self, where: QueueFilter, *, after: str | None = None, before: str | None = None, limit: int = 50
    ) -> QueuePage:
        """One page of the entries under ``where``, in the queue's order (reason, age, id).

        Args:
            where: The filter.
            after: Start right after this entry (a page's ``next_after``).
            before: End right before this entry (a page's ``prev_before``).
            limit: Entries per page (1..500).

        Raises:
            KeyError: ``after`` or ``before`` is no entry's id.
            InputError: both ``after`` and ``before``, or a limit out of range.
        """
        if after is not None and before is not None:
            raise InputError("give after or before, not both")
        if not 1 <= limit <= MAX_PAGE:
            raise InputError(f"limit must be 1..{MAX_PAGE}, got {limit}")
        conditions = self._conditions(where)
        key = tuple_(*_ORDER)
        backwards = before is not None
        if after is not None:
            conditions.append(key > tuple_(*self._position(after)))
        if before is not None:
            conditions.append(key < tuple_(*self._position(before)))
        order = [c.desc() for c in _ORDER] if backwards else list(_ORDER)
        query = select(_entries.c.entry).where(*conditions).order_by(*order).limit(limit + 1)
        with self.engine.connect() as conn:
            found = [QueueEntry.model_validate_json(text) for text in conn.execute(query).scalars()]
        more = len(found) > limit
        found = found[:limit]
        if backwards:
            found.reverse()
        current = self._current([e.id for e in found])
        rows = tuple(QueueRow(entry=e, resolution=current.get(e.id)) for e in found)
        if not rows:
            return QueuePage(rows=(), next_after=None, prev_before=None)
        first, last = rows[0].entry.id, rows[-1].entry.id
        has_prev = more if backwards else (after is not None and self._beyond(where, first, backwards=True))
        has_next = (before is not None and self._beyond(where, last, backwards=False)) if backwards else more
        return QueuePage(rows=rows, next_after=last if has_next else None, prev_before=first if has_prev else None)

    def _beyond(self, where: QueueFilter, entry_id: str, *, backwards: bool) -> bool:
        """Whether any entry under ``where`` comes before (``backwards``) or after ``entry_id``."""
        return self._step(where, entry_id, backwards=backwards) is not None

    def _step(self, where: QueueFilter, entry_id: str, *, backwards: bool) -> str | None:
        conditions = self._conditions(where)
        key, position = tuple_(*_ORDER), tuple_(*self._position(entry_id))
        conditions.append(key < position if backwards else key > position)
        order = [c.desc() for c in _ORDER] if backwards else list(_ORDER)
        query = select(_entries.c.id).where(*conditions).order_by(*order).limit(1)
        with self.engine.connect() as conn:
            found = conn.execute(query).scalar_one_or_none()
        return None if found is None else str(found)

    def neighbours(self, entry_id: str, where: QueueFilter) -> tuple[str | None, str | None]:
        """The ids of the entries right before and right after ``entry_id`` under ``where`` (None at an end).

        ``entry_id`` itself need not match ``where`` (an entry just resolved has left the open queue, and its
        next open entry is still the one after it).

        Raises:
            KeyError: no such entry.
        """
        return (
            self._step(where, entry_id, backwards=True),
            self._step(where, entry_id, backwards=False),
        )

    def facets(self) -> QueueFacets:
        """The surfaces, weeks (newest first) and reviewers in the queue."""
        with self.engine.connect() as conn:
            surfaces = conn.execute(select(_entries.c.surface).distinct().order_by(_entries.c.surface)).scalars()
            surfaces_t = tuple(str(s) for s in surfaces)
            weeks = conn.execute(select(_entries.c.week).distinct().order_by(_entries.c.week.desc())).scalars()
            weeks_t = tuple(str(w) for w in weeks)
            reviewers = conn.execute(
                select(_events.c.reviewer)
                .where(_events.c.reviewer.is_not(None))
                .distinct()
                .order_by(_events.c.reviewer)
            ).scalars()
            reviewers_t = tuple(str(r) for r in reviewers)
        return QueueFacets(surfaces=surfaces_t, weeks=weeks_t, reviewers=reviewers_t)

    def outcome_counts(self, where: QueueFilter) -> dict[str, int]:
        """Entries per current outcome under ``where`` (its status is ignored), escalations also per category.

        Keys: ``open``, ``accept``, ``repair``, ``escalate`` and ``escalate:<category>``.
        """
        source, current = _with_current()
        query = (
            select(current.c.outcome, current.c.category, func.count())
            .select_from(source)
            .where(*self._conditions(where.model_copy(update={"status": "all"})))
            .group_by(current.c.outcome, current.c.category)
        )
        counts: dict[str, int] = {}
        with self.engine.connect() as conn:
            for outcome, category, n in conn.execute(query).all():
                key = outcome or "open"
                counts[key] = counts.get(key, 0) + int(n)
                if category:
                    counts[f"escalate:{category}"] = counts.get(f"escalate:{category}", 0) + int(n)
        return counts

    def reviewed(self, where: QueueFilter) -> Iterator[tuple[QueueEntry, Resolution]]:
        """The entries with an outcome under ``where``, oldest outcome first, streamed from the database.

        ``open`` and ``all`` in ``where.status`` both mean every reviewed entry here.
        """
        status = "resolved" if where.status in ("open", "all") else where.status
        source, current = _with_current()
        columns = [_entries.c.entry, *(current.c[name] for name in _EVENT_FIELDS)]
        conditions = [current.c.id.is_not(None), *self._conditions(where.model_copy(update={"status": status}))]
        query = select(*columns).select_from(source).where(*conditions).order_by(current.c.resolved_at, current.c.id)
        with self.engine.connect() as conn:
            for row in conn.execution_options(yield_per=500).execute(query).mappings():
                item = _row(row)
                assert item.resolution is not None
                yield item.entry, item.resolution


def _with_current() -> tuple[Any, Any]:
    """The entries outer-joined to their current event (the latest), and that event's alias."""
    current = _events.alias("current_event")
    newer = _events.alias("newer_event")
    is_latest = ~exists().where(newer.c.entry_id == current.c.entry_id, newer.c.revision > current.c.revision)
    return _entries.outerjoin(current, and_(current.c.entry_id == _entries.c.id, is_latest)), current


def _resolution(row: Any) -> Resolution:
    data = {name: row[name] for name in _EVENT_FIELDS}
    data["resolved_at"] = aware(data["resolved_at"])
    return Resolution.model_validate(data)


def _row(row: Any) -> QueueRow:
    entry = QueueEntry.model_validate_json(row["entry"])
    if row["entry_id"] is None:
        return QueueRow(entry=entry, resolution=None)
    return QueueRow(entry=entry, resolution=_resolution(row))
