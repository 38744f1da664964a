"""Failed sign-ins are throttled: password guessing against the desk gets a few tries, then waits.

A name that failed :data:`NAME_FAILURES` times within :data:`WINDOW`, or a client address that failed
:data:`ADDRESS_FAILURES` times, is refused (HTTP 429 with ``Retry-After``) until its oldest counted failure
leaves the window; the password is not even checked then, so a refused guess teaches nothing. A successful
sign-in clears the name's failures. The counts live in the desk process (one desk process per database is the
supported deployment); a restart forgets them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["ADDRESS_FAILURES", "NAME_FAILURES", "WINDOW", "SignInThrottle"]

NAME_FAILURES = 5
"""Failed sign-ins per account name within :data:`WINDOW` before that name must wait."""

ADDRESS_FAILURES = 20
"""Failed sign-ins per client address within :data:`WINDOW` before that address must wait."""

WINDOW = 15 * 60.0
"""Seconds a failed sign-in is remembered."""

_MAX_KEYS = 100_000
"""Keys remembered at most: beyond that the stalest are forgotten, so a flood cannot grow memory without bound."""


class SignInThrottle:
    """Counts failed sign-ins per account name and per client address, thread-safe.

    Args:
        name_failures: Failures allowed per name within the window.
        address_failures: Failures allowed per client address within the window.
        window: Seconds a failure is counted.
        clock: Monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        *,
        name_failures: int = NAME_FAILURES,
        address_failures: int = ADDRESS_FAILURES,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if name_failures < 1 or address_failures < 1 or window <= 0:
            raise ValueError("the throttle needs at least one allowed failure and a positive window")
        self._limits = {"name": name_failures, "address": address_failures}
        self._window = window
        self._clock = clock
        self._failures: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _keys(username: str, address: str | None) -> list[tuple[str, str]]:
        keys = [("name", username.strip().casefold())]
        if address:
            keys.append(("address", address))
        return keys

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key, deque())
        while times and times[0] <= now - self._window:
            times.popleft()
        if not times:
            self._failures.pop(key, None)
        return times

    def retry_after(self, username: str, address: str | None) -> int | None:
        """Seconds this sign-in must wait, or None when it may be tried now."""
        now = self._clock()
        with self._lock:
            waits = [
                times[0] + self._window - now
                for key in self._keys(username, address)
                if len(times := self._recent(key, now)) >= self._limits[key[0]]
            ]
        return max(1, math.ceil(max(waits))) if waits else None

    def failed(self, username: str, address: str | None) -> None:
        """Count one failed sign-in for the name and the address."""
        now = self._clock()
        with self._lock:
            for key in self._keys(username, address):
                times = self._recent(key, now)
                times.append(now)
                self._failures[key] = times
            while len(self._failures) > _MAX_KEYS:
                self._failures.pop(next(iter(self._failures)))

    def succeeded(self, username: str) -> None:
        """Forget the name's failures (the address's stay counted)."""
        with self._lock:
            self._failures.pop(("name", username.strip().casefold()), None)
