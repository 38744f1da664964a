"""Telemetry work off the request thread: a bounded queue and one worker thread (no OpenTelemetry import here).

A guard run hands the building of its evaluation events (and the end of its span) to this queue as one job, with
everything that must be captured on the request thread (trace context, timestamps) already in the job. The
worker runs jobs in order. The queue is bounded: when it is full the job's ``on_drop`` runs on the caller's
thread instead (the span still ends, marked), the drop is counted (:func:`dropped`) and logged; the request is
never blocked. Pending jobs run on :func:`flush` and at interpreter exit; a forked child starts a fresh queue
(the parent's thread does not exist there, its jobs are the parent's).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_CAPACITY", "Job", "configure_capacity", "dropped", "flush", "submit"]

_log = logging.getLogger("citelock.telemetry")

DEFAULT_CAPACITY = 4096
"""Answers whose telemetry may wait for the worker at once (each holds its immutable guard result)."""

EXIT_TIMEOUT_S = 5.0
"""How long interpreter exit waits for pending jobs."""


@dataclass(frozen=True)
class Job:
    """One answer's deferred telemetry: ``run`` on the worker, or ``on_drop`` on the caller when the queue is full."""

    run: Callable[[], None]
    on_drop: Callable[[], None]


class _Queue:
    """A C ``SimpleQueue`` to the worker (one ``put`` on the request thread) and a counter of jobs not run yet."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.dropped = 0
        self._reset()

    def _reset(self) -> None:
        """Empty; no worker yet (at start, and in a forked child: the parent's thread and jobs are not there)."""
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job | threading.Event] = queue.SimpleQueue()
        self._pending = 0  # submitted and not yet run, under _lock
        self._thread: threading.Thread | None = None

    def submit(self, job: Job) -> bool:
        if self._jobs.qsize() >= self.capacity:
            with self._lock:
                self.dropped += 1
                count = self.dropped
            if count == 1 or count % 1000 == 0:
                _log.warning(
                    "citelock telemetry queue full (%d answers waiting): %d answer(s) sent without their evaluation "
                    "events so far (their guard spans carry citelock.telemetry.dropped); raise "
                    "telemetry.configure(queue_size=...) or check the exporter",
                    self.capacity,
                    count,
                )
            job.on_drop()
            return False
        with self._lock:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, args=(self._jobs,), name="citelock-telemetry")
                self._thread.daemon = True
                self._thread.start()
                _at_exit()
        self._jobs.put(job)
        return True

    def _work(self, jobs: queue.SimpleQueue[Job | threading.Event]) -> None:
        while True:
            item = jobs.get()
            if isinstance(item, threading.Event):  # a flush's marker: every job queued before it has run
                item.set()
                continue
            try:
                item.run()
            except Exception:  # a telemetry bug must never stop the worker; it is logged, not hidden
                _log.exception("citelock telemetry job failed")
            finally:
                with self._lock:
                    self._pending -= 1
            del item  # the last answer's result is not kept alive while the worker waits

    def flush(self, timeout_s: float | None) -> bool:
        with self._lock:
            if self._pending == 0:
                return True
        done = threading.Event()
        self._jobs.put(done)
        return done.wait(timeout_s)


_QUEUE = _Queue(DEFAULT_CAPACITY)
os.register_at_fork(after_in_child=_QUEUE._reset)
_registered: list[bool] = []


def _exit_flush() -> None:
    if not _QUEUE.flush(EXIT_TIMEOUT_S):
        _log.warning("citelock telemetry: pending evaluation events not written within %.0f s at exit", EXIT_TIMEOUT_S)


def _at_exit() -> None:
    """(Re-)register the exit flush last, so it runs before the exit hooks registered earlier (an SDK's shutdown)."""
    if _registered:
        atexit.unregister(_exit_flush)
    atexit.register(_exit_flush)
    _registered[:] = [True]


def submit(job: Job) -> bool:
    """Queue ``job`` for the worker (started on first use); False when the queue was full (``on_drop`` ran)."""
    return _QUEUE.submit(job)


def flush(timeout_s: float | None = None) -> bool:
    """Wait until every job queued before this call has run; False when ``timeout_s`` passed first."""
    return _QUEUE.flush(timeout_s)


def dropped() -> int:
    """Answers whose telemetry was dropped because the queue was full (since the process started)."""
    return _QUEUE.dropped


def configure_capacity(capacity: int) -> None:
    """Set the queue's bound (jobs already queued stay); re-register the exit flush after a new SDK's shutdown hook."""
    _QUEUE.capacity = capacity
    if _registered:
        _at_exit()
