"""The review desk's model: the stores it works on and the actions a signed-in account may take.

Pages and the JSON API both go through :class:`ReviewDesk`, so a rule (who may re-review what, what an outcome
needs) holds the same way in a browser, in a script and in a test. Every outcome is a queue event recorded
under the signed-in account's name, with the time; the queue's database constraint makes two reviewers
racing on one entry end with one event and one :class:`~citelock.errors.AlreadyResolvedError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine

from citelock.errors import AlreadyResolvedError, InputError, NotPermittedError, StoreIntegrityError
from citelock.metrics._compute import MetricsReport, metrics_from_store
from citelock.metrics._false_pass import SurfaceStatus, live_rates_from_store
from citelock.review._views import EntryView, PromptView, entry_view, prompt_view
from citelock.store import (
    AccountStore,
    Credential,
    PromptLog,
    QueueBrowser,
    QueueFacets,
    Resolution,
    ResultStore,
    ReviewQueue,
    make_engine,
)
from citelock.store._queue import EscalationCategory, Outcome
from citelock.telemetry import active, emit_review

__all__ = ["ReviewDesk"]

_T = TypeVar("_T")


class ReviewDesk:
    """The stores of one database, opened once for the desk.

    Args:
        target: A SQLite file path, a database URL or an engine (the database the pipeline writes).
        log_key: The prompt log's HMAC key, if the log is keyed (default: ``$CITELOCK_LOG_KEY``).

    Attributes:
        metrics_ttl: Seconds a computed metrics report is reused (60).
        facets_ttl: Seconds the filter values (surfaces, weeks, reviewers) are reused (30).
    """

    def __init__(self, target: str | Path | Engine, *, log_key: str | bytes | None = None) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        self.queue = ReviewQueue(self.engine)
        self.browser = QueueBrowser(self.queue)
        self.log = PromptLog(self.engine, key=log_key)
        self.results = ResultStore(self.engine)
        self.accounts = AccountStore(self.engine)
        self.metrics_ttl = 60.0
        self.facets_ttl = 30.0
        self._lock = threading.Lock()
        self._cache: dict[tuple[Any, ...], tuple[float, Any, datetime]] = {}

    def entry(self, entry_id: str) -> EntryView:
        """The entry page's view of one entry (id or unique prefix of 4+ characters).

        Raises:
            KeyError: no such entry.
            InputError: an ambiguous or too short prefix.
        """
        entry = self.queue.get(entry_id)
        return entry_view(entry, self.queue.history(entry.id), self.log, self.results)

    def prompt(self, request_id: str, *, entry_id: str | None = None) -> PromptView:
        """The whole logged prompt, with ``entry_id``'s span marked.

        Raises:
            KeyError: no such request in the log, or no such entry.
            StoreIntegrityError: the logged prompt fails its integrity check.
        """
        record = self.log.get(request_id)
        entry = self.queue.get(entry_id) if entry_id else None
        if entry is not None and entry.request_id != request_id:
            raise InputError(f"entry {entry.id} belongs to request {entry.request_id}, not {request_id}")
        return prompt_view(record, entry)

    def record_outcome(
        self,
        entry_id: str,
        user: Credential,
        outcome: Outcome,
        *,
        note: str | None = None,
        category: EscalationCategory | None = None,
        chunk_id: str | None = None,
        revision: int | None = None,
    ) -> Resolution:
        """Record an outcome for an entry, as ``user``, now.

        Args:
            entry_id: The entry's id.
            user: The signed-in account (its name is recorded as the reviewer).
            outcome: ``accept``, ``repair`` or ``escalate``.
            note: The reviewer's note (required for ``repair``).
            category: ``chunking``, ``truncation`` or ``ranking`` (``escalate`` only, required there).
            chunk_id: A better chunk to cite (``repair`` only).
            revision: The revision the reviewer saw: None for an open entry (its first outcome), else the
                current outcome's revision (a re-review that supersedes it).

        Returns:
            The recorded event.

        Raises:
            KeyError: no such entry.
            InputError: arguments that do not fit the outcome, or a revision for an open entry.
            AlreadyResolvedError: someone recorded an outcome since the reviewer looked (nothing is recorded).
            NotPermittedError: a reviewer re-reviewing an outcome someone else recorded (admins may).
        """
        note = note.strip() if note and note.strip() else None
        chunk_id = chunk_id.strip() if chunk_id and chunk_id.strip() else None
        if revision is None:
            try:
                return self._emitted(
                    self.queue.resolve(
                        entry_id, outcome, note=note, category=category, chunk_id=chunk_id, reviewer=user.username
                    )
                )
            except AlreadyResolvedError:
                winner = self.queue.resolution(entry_id)
                if winner is None:  # pragma: no cover - an event is never deleted
                    raise
                raise AlreadyResolvedError(
                    f"entry {winner.entry_id} was resolved by {winner.reviewer or 'an unnamed reviewer'} as "
                    f"{winner.outcome} at {winner.resolved_at:%Y-%m-%d %H:%M:%S} UTC before your outcome arrived: "
                    "yours was not recorded. Look at theirs; to change it, re-review the entry."
                ) from None
        current = self.queue.resolution(entry_id)
        if current is None:
            raise InputError(f"entry {entry_id} is open: its first outcome is recorded without a revision")
        if current.revision != revision:
            raise AlreadyResolvedError(
                f"entry {current.entry_id} is at revision {current.revision} ({current.outcome} by "
                f"{current.reviewer or 'an unnamed reviewer'}), not {revision}: someone re-reviewed it since you "
                "looked; nothing was recorded"
            )
        if user.role != "admin" and current.reviewer != user.username:
            owner = current.reviewer or "someone else"
            raise NotPermittedError(
                f"the current outcome of entry {current.entry_id} was recorded by {owner}: "
                "a reviewer re-reviews only their own outcomes (an admin may re-review any)"
            )
        return self._emitted(
            self.queue.rereview(
                entry_id,
                outcome,
                reviewer=user.username,
                note=note,
                category=category,
                chunk_id=chunk_id,
                revision=revision,
            )
        )

    def _emitted(self, resolution: Resolution) -> Resolution:
        """With the otel extra: the outcome as a HUMAN evaluation on the trace the logged prompt carries."""
        if active():
            entry = self.queue.get(resolution.entry_id)
            try:
                record = self.log.get(entry.request_id)
            except (KeyError, StoreIntegrityError):  # not logged here, or tampered: the event is not linked
                record = None
            emit_review(entry, resolution.outcome, reviewer=resolution.reviewer, note=resolution.note, record=record)
        return resolution

    def metrics(self, *, surface: str | None = None) -> tuple[MetricsReport, datetime]:
        """What ``citelock metrics`` computes on this database (the same function, the same numbers).

        It reads every stored result and queue entry (seconds on a queue of 100,000), so a report is reused for
        :attr:`metrics_ttl` seconds.

        Returns:
            The report and when it was computed (UTC).
        """
        return self._cached(
            ("metrics", surface), self.metrics_ttl, lambda: metrics_from_store(self.engine, surface=surface)
        )

    def judge_status(self, *, surface: str | None = None) -> tuple[list[SurfaceStatus], datetime]:
        """The judge's live false-pass / false-fail rates and alarms per surface (as ``citelock metrics``).

        Reused for :attr:`metrics_ttl` seconds, like :meth:`metrics`.
        """
        return self._cached(
            ("judge", surface), self.metrics_ttl, lambda: live_rates_from_store(self.engine, surface=surface)
        )

    def facets(self) -> QueueFacets:
        """The surfaces, weeks and reviewers to filter by (reused for :attr:`facets_ttl` seconds)."""
        return self._cached(("facets",), self.facets_ttl, self.browser.facets)[0]

    def _cached(self, key: tuple[Any, ...], ttl: float, compute: Callable[[], _T]) -> tuple[_T, datetime]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < ttl:
                return hit[1], hit[2]
        value = compute()
        made = datetime.now(UTC)
        with self._lock:
            self._cache[key] = (now, value, made)
        return value, made
