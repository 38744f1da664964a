"""One call for a whole audit: read the inputs, run an engine, commit through the sink, return the summary."""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from citelock.audit._figures import AuditSummary
from citelock.audit._local import DEFAULT_BATCH, run_local
from citelock.audit._report import OutputFormat
from citelock.audit._rows import AuditItem, ReadStats, check_inputs, input_path, read_items
from citelock.audit._sink import DEFAULT_COMMIT_ROWS, AuditSink, mask_password
from citelock.audit._work import AuditSettings
from citelock.errors import InputError, MissingExtraError, UsageError
from citelock.guard import Guard

__all__ = ["Engine", "ray_engine", "run_audit"]

Engine = Literal["local", "ray"]


def run_audit(
    inputs: Sequence[str],
    *,
    out: str | Path,
    fmt: OutputFormat = "jsonl",
    db: str | None = None,
    settings: AuditSettings | None = None,
    answers: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    engine: Engine = "local",
    processes: int | None = None,
    address: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    commit_rows: int = DEFAULT_COMMIT_ROWS,
    on_start: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    guard: Guard | None = None,
) -> AuditSummary:
    """Audit many answers: one report row per answer in ``out``, findings queued and results stored in ``db``.

    Resumable and exactly once: rerunning the same call after a crash, a kill or Ctrl-C continues where the
    last run stopped, and nothing is reported, queued or stored twice (see :class:`~citelock.audit.AuditSink`).

    Example:
        >>> from citelock import AuditSettings, run_audit
        >>> summary = run_audit(["traffic.jsonl"], out="audit-out", db="citelock.db",
        ...                     settings=AuditSettings(surface="support-bot"))  # doctest: +SKIP
        >>> summary.pass_rate  # doctest: +SKIP

    Args:
        inputs: JSONL / Parquet files of exported rows (``schemas/audit_row.v1.json``), or one prompt log.
        out: The out directory (report parts, manifest, summary).
        fmt: The report's format, ``jsonl`` or ``parquet``.
        db: Where findings are queued and results stored (a SQLite path or URL). Default: the prompt log's own
            database when ``inputs`` is a prompt log, else nowhere. Nothing is stored without a surface policy.
        settings: How each answer is guarded (default: the free checks only).
        answers: With a prompt log: the answers (``schemas/audit_answer.v1.json`` rows, JSONL or Parquet).
        since: With a prompt log: answers whose prompt was logged at or after this time (UTC if naive).
        until: With a prompt log: answers whose prompt was logged before this time.
        engine: ``local`` (a process pool on this machine) or ``ray`` (a Ray cluster; ``citelock[ray]``).
        processes: ``local``: worker processes (default: every core).
        address: ``ray``: the cluster's address (default: start or join a local one).
        batch_size: Answers per task sent to a worker.
        commit_rows: Answers per committed part (at least).
        on_start: Called once with the number of input rows already committed (0 on a fresh audit).
        on_progress: Called with the number of input rows done after each batch: audited, or (a prompt log)
            skipped because their prompt was logged outside ``since``/``until`` (skipped rows need no work, so
            they count as done; the summary counts them apart as ``outside_window``). With ``on_start``'s count
            these add up to the rows of the inputs (:func:`~citelock.audit._rows.count_rows`) when the run ends.
        guard: The guard built from ``settings`` in this process, if one was (``citelock audit`` builds one to
            check its options): ``local`` with one process uses it; the other engines take it as the proof that
            the settings build and do not build another here. Default: built from ``settings``.

    Returns:
        The summary (also written to ``out/_summary.json``).

    Raises:
        InputError: unusable inputs or options, or ``out`` holds an audit of other inputs or settings.
        MissingExtraError: Parquet without ``citelock[audit]``, the ray engine without ``citelock[ray]``.
        BackendConnectionError: a judge server could not be reached (what was committed stays: rerun).
    """
    settings = settings if settings is not None else AuditSettings()
    if engine not in ("local", "ray"):
        raise InputError(f"the engine must be local or ray, got {engine!r}")
    if engine == "local" and address is not None:
        raise InputError("address= is the Ray cluster's: it needs engine='ray'")
    if engine == "ray" and processes is not None:
        raise InputError("processes= sizes the local engine's pool; the Ray engine uses the cluster's workers")
    if processes is not None and processes < 1:
        raise InputError(f"processes must be at least 1, got {processes}")
    kinds = check_inputs(inputs, answers=answers, since=since, until=until)
    run_ray = ray_engine() if engine == "ray" else None
    if db is None and kinds == ["log"]:
        db = inputs[0]
    store = settings.runs_policy and db is not None
    manifest = {
        "inputs": [_where(target) for target in inputs],
        "answers": [_where(source) for source in answers],
        "since": since.isoformat() if since is not None else None,
        "until": until.isoformat() if until is not None else None,
        "settings": {
            **settings.describe(),
            "calibration": _where(settings.calibration) if settings.calibration is not None else None,
        },
        "database": _where(db) if store and db is not None else None,
    }
    stats = ReadStats()
    sources = [_where(source) for source in answers or inputs]
    with AuditSink(out, manifest=manifest, fmt=fmt, db=db, store=store, inputs=sources) as sink:
        workers = processes if processes is not None else (os.cpu_count() or 1)
        sink.engine = {"engine": engine, "processes": workers} if engine == "local" else {"engine": engine}
        if on_start is not None:
            on_start(sink.committed_rows)
        progress = _Progress(on_progress, stats) if on_progress is not None else None
        read = _ReadRows(read_items(inputs, since=since, until=until, answers=answers, stats=stats), sources)
        complete = False
        try:
            if run_ray is not None:
                run_ray(
                    read,
                    settings,
                    sink,
                    address=address,
                    batch_size=batch_size,
                    commit_rows=commit_rows,
                    on_progress=progress,
                    guard=guard,
                )
            else:
                run_local(
                    read,
                    settings,
                    sink,
                    processes=workers,
                    batch_size=batch_size,
                    commit_rows=commit_rows,
                    on_progress=progress,
                    guard=guard,
                )
            sink.retire(read.seen())  # every input read whole: its rows no longer there leave the report
            if progress is not None:
                progress(0)  # the last rows skipped, after the last batch
            complete = True
        finally:  # interrupted or failed too: the summary says how far the audit got
            sink.outside_window = stats.outside_window
            summary = sink.summary(complete=complete)
            sink.write_summary(summary)
    return summary


class _Progress:
    """``on_progress`` told of the rows read and skipped (outside the window) along with the rows audited."""

    def __init__(self, on_progress: Callable[[int], None], stats: ReadStats) -> None:
        self.on_progress = on_progress
        self.stats = stats
        self.skipped = 0

    def __call__(self, done: int) -> None:
        skipped = self.stats.outside_window - self.skipped  # read on the driver (a thread, with Ray) meanwhile
        self.skipped += skipped
        if done or skipped:
            self.on_progress(done + skipped)


class _ReadRows:
    """The items read, passed on, noting which rows of each input the read saw (for :meth:`AuditSink.retire`)."""

    def __init__(self, items: Iterable[AuditItem], sources: Sequence[str]) -> None:
        self.items = items
        self.gaps: dict[str, list[tuple[int, int]]] = {where: [] for where in sources}
        self.last: dict[str, int] = dict.fromkeys(sources, 0)

    def __iter__(self) -> Iterator[AuditItem]:
        for item in self.items:
            where = _where(item.source)
            last = self.last.setdefault(where, 0)
            if item.row > last:  # (a file given twice is read twice: its second pass adds nothing here)
                if item.row > last + 1:
                    self.gaps.setdefault(where, []).append((last + 1, item.row - 1))
                self.last[where] = item.row
            yield item

    def seen(self) -> dict[str, tuple[list[tuple[int, int]], int]]:
        """Per input: the gaps in the rows read (blank lines; log answers outside the window) and the last row."""
        return {where: (self.gaps.get(where, []), last) for where, last in self.last.items()}


def ray_engine() -> Callable[..., Any]:
    """The Ray engine's ``run_ray`` (imported only when asked for: Ray is an optional extra).

    Raises:
        MissingExtraError: Ray is not installed (``pip install "citelock[ray]"``).
    """
    if importlib.util.find_spec("ray") is None:
        raise MissingExtraError("ray", "ray")
    try:
        module = importlib.import_module("citelock.audit._ray")
    except ModuleNotFoundError as exc:
        if exc.name != "citelock.audit._ray":
            raise
        raise UsageError("this build of citelock has no Ray engine: use --engine local") from None
    run_ray: Callable[..., Any] = module.run_ray
    return run_ray


def _where(target: str) -> str:
    """An input or database as kept in the manifest: a URL without its password, a file as an absolute path."""
    return mask_password(target) if "://" in target else input_path(target)
