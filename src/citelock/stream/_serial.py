"""One stream's judge lane: its calls run one at a time, in order, on worker threads shared by every stream.

A stream's claims are judged in answer order by one call at a time (the judge memo and the findings then follow
the answer's order, as a whole-answer run does). Starting a thread per stream cost more than a short answer's
whole guard, so the lanes share a process-wide pool of worker threads: a lane holds its queued calls and has at
most one of them running on the pool at any time; a call queued while its lane is busy runs right after, on the
same worker, without another hand-off.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from threading import Lock
from typing import TypeVar

__all__ = ["SerialLane"]

T = TypeVar("T")

_MAX_WORKERS = 256
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = Lock()


def _shared_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            # threads start only when no idle one is left; the cap is high because a lane holds its worker while
            # a slow judge (an LLM over HTTP) answers, and concurrent streams must not wait for each other's
            _POOL = ThreadPoolExecutor(max_workers=_MAX_WORKERS, thread_name_prefix="citelock-judge")
        return _POOL


class SerialLane:
    """Calls run one at a time in the order submitted, on the shared worker pool (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Callable[[], object], Future[object]]] = deque()
        self._lock = Lock()
        self._running = False
        self._closed = False

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue ``fn``; its future has its result (or its exception) once it ran."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                future.cancel()
                future.set_running_or_notify_cancel()
                return future
            self._queue.append((fn, future))  # type: ignore[arg-type]
            start = not self._running
            self._running = True
        if start:
            _shared_pool().submit(self._drain)
        return future

    def close(self) -> None:
        """Cancel every call not started; a call running finishes (its result is dropped by the caller)."""
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
        for _, future in queued:
            future.cancel()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    return
                fn, future = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller through the future, as an executor does
                future.set_exception(exc)
            else:
                future.set_result(result)
