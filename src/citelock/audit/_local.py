"""The local engine: a pool of processes on this machine, each with its own guard, fed batches by the driver.

The driver reads the items (skipping keys already committed), cuts them into batches of ``batch_size``, and
keeps at most two batches per worker in flight, so memory stays flat whatever the input's size. Each worker
process builds its :class:`~citelock.Guard` once (the judge is loaded once per process) and returns the batch's
outcomes; the driver commits them through the sink in submission order, in parts of at least ``commit_rows``
rows (or whatever arrived after ``commit_seconds``), so the report's parts follow the input's order.

Workers ignore Ctrl-C: the driver owns the interrupt, stops the workers and commits nothing half-done.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice

from citelock.audit._rows import AuditItem
from citelock.audit._sink import DEFAULT_COMMIT_ROWS, DEFAULT_COMMIT_SECONDS, AuditSink, PartCommitter
from citelock.audit._work import AuditOutcome, AuditSettings, audit_item
from citelock.errors import InputError
from citelock.guard import Guard

__all__ = ["DEFAULT_BATCH", "run_local"]

DEFAULT_BATCH = 32
"""Answers per task sent to a worker."""

_GUARD: Guard | None = None
_GUARD_ERROR: Exception | None = None


def run_local(
    items: Iterable[AuditItem],
    settings: AuditSettings,
    sink: AuditSink,
    *,
    processes: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_progress: Callable[[int], None] | None = None,
    commit_rows: int = DEFAULT_COMMIT_ROWS,
    commit_seconds: float = DEFAULT_COMMIT_SECONDS,
    guard: Guard | None = None,
) -> None:
    """Audit ``items`` on this machine and commit every outcome through ``sink``.

    Args:
        items: The input items (:func:`~citelock.audit.read_items`); keys ``sink`` already committed are skipped.
        settings: How each answer is guarded.
        sink: Where outcomes are committed (on this, the driver, process).
        processes: Worker processes (default: every core). 1 runs in this process, without a pool.
        batch_size: Answers per task sent to a worker.
        on_progress: Called with the number of answers done after each batch.
        commit_rows: Answers per committed part, at least (the last one may be smaller).
        commit_seconds: Commit what arrived at least this often.
        guard: With ``processes=1``: the guard to use (default: ``settings.build_guard()``).

    Raises:
        InputError: ``processes``, ``batch_size`` or ``commit_rows`` below 1.
        BackendConnectionError: a judge server could not be reached (what was committed stays; rerun).
    """
    workers = processes if processes is not None else (os.cpu_count() or 1)
    for name, value in (("processes", workers), ("batch_size", batch_size), ("commit_rows", commit_rows)):
        if value < 1:
            raise InputError(f"{name} must be at least 1, got {value}")
    batches = _batches(iter(sink.todo(items)), batch_size)
    committer = PartCommitter(sink, commit_rows, commit_seconds, on_progress)
    if workers == 1:
        in_process = guard if guard is not None else settings.build_guard()
        try:
            for batch in batches:
                committer.add([audit_item(item, in_process) for item in batch])
        except BaseException:
            committer.salvage()
            raise
        committer.flush()
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(settings,))
    try:
        inflight: deque[Future[list[AuditOutcome]]] = deque()
        for batch in batches:
            inflight.append(pool.submit(_work, batch))
            while len(inflight) >= 2 * workers:
                committer.add(inflight.popleft().result())
        while inflight:
            committer.add(inflight.popleft().result())
        committer.flush()
    except BaseException:
        _stop(pool)
        committer.salvage()
        raise
    pool.shutdown(wait=True)


def _batches(items: Iterator[AuditItem], size: int) -> Iterator[list[AuditItem]]:
    while batch := list(islice(items, size)):
        yield batch


def _init_worker(settings: AuditSettings) -> None:
    """Per worker process: ignore Ctrl-C (the driver handles it), build the guard once.

    A failure to build it (a judge server that cannot be reached) is kept and raised by the worker's first
    task, so the driver sees that error rather than a pool broken by a failed initializer.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _GUARD, _GUARD_ERROR
    try:
        _GUARD = settings.build_guard()
    except Exception as exc:
        _GUARD_ERROR = exc


def _work(batch: list[AuditItem]) -> list[AuditOutcome]:
    if _GUARD_ERROR is not None:
        raise _GUARD_ERROR
    assert _GUARD is not None, "the worker's guard is built by its initializer"
    return [audit_item(item, _GUARD) for item in batch]


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop the pool now: cancel what has not started, end the workers (their batches are not committed)."""
    # The executor has no public way to end running tasks; its worker processes are in ``_processes`` (which
    # shutdown() clears, so they are taken first).
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(timeout=5)
