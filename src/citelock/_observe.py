"""Where an observer above the guard (telemetry) watches its runs, without the guard importing it.

:meth:`citelock.Guard.run` asks :func:`guard_observer` once per run. When one answers, the guard hands it the run
as a plain callable (:class:`GuardRun`) and the observer calls it once, inside whatever it records (a span, the
evaluation events after it), and returns its result unchanged. The guard knows this protocol only: who observes
is decided above it. The package facade (``citelock/__init__.py``) installs the telemetry integration's observer
with :func:`observe_guard`; nothing else does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from citelock.records import PromptRecord

__all__ = ["GuardObserver", "GuardRun", "ObserverSource", "guard_observer", "observe_guard"]


class GuardRun(Protocol):
    """One guard run, ready to call: ``run(guard, record, answer, known_ids=...)`` returns its result.

    ``guard`` is the guard to run with: the caller's, or a copy an observer made (its judges proxied).
    """

    def __call__(self, guard: Any, record: PromptRecord, answer: Any, *, known_ids: Collection[str] | None) -> Any: ...


class GuardObserver(Protocol):
    """What watches a guard run: calls ``run`` exactly once and returns what it returned (or lets it raise)."""

    def __call__(
        self, run: GuardRun, guard: Any, record: PromptRecord, answer: Any, known_ids: Collection[str] | None
    ) -> Any: ...


ObserverSource = Callable[[], GuardObserver | None]
"""Asked at every run: the observer watching now, or None (telemetry answers None when it is off or absent)."""

_source: ObserverSource | None = None


def observe_guard(source: ObserverSource | None) -> None:
    """Install ``source`` as what every guard run asks for its observer (None: runs are not observed)."""
    global _source
    _source = source


def guard_observer() -> GuardObserver | None:
    """The observer of the guard run about to start, or None."""
    return _source() if _source is not None else None
