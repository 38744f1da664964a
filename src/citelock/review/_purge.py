"""The desk deletes ended browser sessions and API tokens by itself: now and then, after a sign-in.

A session row is only ever added by a sign-in (or an API token by ``citelock review token``), so purging after
sign-ins keeps the sessions table at about the sign-ins of one session lifetime, with no timer thread and no
work while nobody signs in. The cost is bounded: at most one purge (one ``DELETE``) per :data:`PURGE_INTERVAL`
per process, run after the sign-in's response is sent (a Starlette background task), so signing in does not
wait for it. Several processes on one database each purge on their own schedule; the store makes concurrent
purges take turns, and a purge deletes only what the desk would refuse anyway (expired, or idle past the
desk's idle timeout). A purge that fails (the database busy or gone) is logged and tried again after the next
sign-in; the sign-in itself has succeeded by then. ``citelock review purge-sessions`` does the same from cron.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError

from citelock.errors import InputError
from citelock.store import AccountStore

__all__ = ["PURGE_INTERVAL", "SessionPurge"]

PURGE_INTERVAL = timedelta(minutes=10)
"""How often at most one desk process purges ended sessions (``create_app(purge_interval=...)``)."""

_log = logging.getLogger("citelock.review")


class SessionPurge:
    """Purges a desk's ended sessions and tokens, at most once per ``interval``, thread-safe.

    Args:
        accounts: The desk's account store (its clock decides when a purge is due).
        idle: The desk's idle timeout (None: only expired sessions and tokens are deleted).
        interval: The least time between two purges of this object.

    Raises:
        InputError: an interval that is not positive.
    """

    def __init__(self, accounts: AccountStore, *, idle: timedelta | None, interval: timedelta = PURGE_INTERVAL) -> None:
        if interval <= timedelta(0):
            raise InputError(f"the purge interval must be positive, got {interval}")
        self.accounts = accounts
        self.idle = idle
        self.interval = interval
        self._last: datetime | None = None
        self._lock = threading.Lock()

    def due(self, now: datetime) -> bool:
        """True when no purge has run in the ``interval`` before ``now`` (a clock set back counts as due)."""
        return self._last is None or not self._last <= now < self._last + self.interval

    def __call__(self) -> int | None:
        """Purge if due.

        Returns:
            How many sessions and tokens were deleted; None when no purge was due, or it failed (logged).
        """
        now = self.accounts.clock()
        with self._lock:  # claim the slot first: concurrent sign-ins start one purge, not one each
            if not self.due(now):
                return None
            self._last = now
        try:
            deleted = self.accounts.purge_expired(idle=self.idle)
        except SQLAlchemyError as exc:
            with self._lock:
                if self._last == now:
                    self._last = None  # retry after the next sign-in
            _log.warning("purging ended review-desk sessions failed (retried after the next sign-in): %s", exc)
            return None
        if deleted:
            _log.info("purged %d ended review-desk session(s) and token(s)", deleted)
        return deleted
