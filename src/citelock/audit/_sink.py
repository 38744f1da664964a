"""Where an audit's outcomes go, exactly once: report part files in the out directory, the queue, the results.

The out directory holds:

- ``part-000001.jsonl`` (or ``.parquet``) ...: the report rows, one part per committed batch;
- ``_parts/part-000001.json`` ...: each part's keys, the input row of each, the rows it supersedes and its
  figures (written before its part);
- ``_keys.sqlite``: an index of the committed keys (a cache of ``_parts/``, rebuilt from it when missing,
  damaged or out of step), so a rerun skips what is done without holding every key in memory;
- ``_manifest.json``: what is audited (inputs, settings, format, database), so a rerun continues the same audit;
- ``_summary.json``: the summary of the last run (written at its end, and when it is interrupted);
- ``_lock``: held while an audit writes here (a second audit of the same directory stops with an error).

Names starting with ``_`` are skipped by dataset readers (pyarrow, DuckDB, Spark), so ``out/`` reads as one
dataset of report rows.

A batch commits in this order: the database first (review-queue entries are idempotent by id, results by their
key: :meth:`~citelock.store.ResultStore.append_many`), then the part's keys and figures, then the part itself;
each file is written under a temporary name, flushed to disk (fsync) and renamed into place, so it is either
whole or absent. A part present means its batch is done; a crash anywhere before that leaves the batch undone,
and a rerun redoes it, which adds nothing to the database twice. The key index learns of a part after the part
is in place; a crash between the two is repaired when the directory is next opened. So a crash, a kill -9 or
Ctrl-C loses nothing, and every key is reported exactly once.

The report describes the input as it is now: rows are written in input order (the inputs as given, then row
number), and an input row is reported once. When an input row's content changed since it was committed (an
edited answer, a fixed bad row, a line inserted above it) it gets a new key and is audited again, and its old
report row is *superseded*: the new part lists it, :func:`read_report` leaves it out and the audit's figures
no longer count it (``superseded`` in the summary counts them). Rows a whole read of an input no longer finds
(deleted lines) are superseded the same way, by a part with no rows, when a run completes. What the old row
queued and stored stays in the database (its queue entries and results are about that old answer), and the
cost figures (``judge``, ``queued``) count the work done.

The part files' formats, and reading them back, are in :mod:`citelock.audit._report`; the figures, in
:mod:`citelock.audit._figures`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from citelock.audit._figures import AuditSummary, PartFigures
from citelock.audit._index import KeyIndex, Position
from citelock.audit._report import (
    MANIFEST,
    PART,
    PARTS,
    OutputFormat,
    part_rows,
    pyarrow_module,
    write_jsonl,
    write_parquet,
)
from citelock.audit._rows import AuditItem, input_path
from citelock.audit._work import AuditOutcome
from citelock.errors import InputError

__all__ = [
    "DEFAULT_COMMIT_ROWS",
    "DEFAULT_COMMIT_SECONDS",
    "AuditSink",
    "PartCommitter",
    "mask_password",
]

SUMMARY = "_summary.json"
LOCK = "_lock"
KEYS = "_keys.sqlite"
_TODO_CHUNK = 256
DEFAULT_COMMIT_ROWS = 2048
"""Answers per committed part (at least; the last part of a run may be smaller)."""

DEFAULT_COMMIT_SECONDS = 30.0
"""A part is committed at least this often while answers arrive, whatever its size."""


class AuditSink:
    """The out directory and the database of one audit; both engines run it on the driver process only.

    Args:
        out: The out directory (created if missing).
        manifest: What is audited (inputs, settings, format, database) as JSON data. A directory that already
            holds an audit must have the same manifest (a rerun continues it); else :class:`InputError`.
        fmt: ``jsonl`` or ``parquet``.
        db: The database (SQLite path or URL) for the review queue and the result store; None stores nothing.
        store: Queue findings and store results (a surface policy ran); without it the database is not touched.
        inputs: The inputs in the order given, as absolute paths (a prompt log audit: its answer files). Rows are
            written in this order, then by row number; a source not among them comes after them, in the order
            it is first committed.

    Raises:
        InputError: ``out`` is a file, holds another audit, or another audit is writing to it.
        MissingExtraError: Parquet without pyarrow.
    """

    def __init__(
        self,
        out: str | Path,
        *,
        manifest: dict[str, Any],
        fmt: OutputFormat = "jsonl",
        db: str | None = None,
        store: bool = False,
        inputs: Sequence[str] = (),
    ) -> None:
        if fmt not in ("jsonl", "parquet"):
            raise InputError(f"the report format must be jsonl or parquet, got {fmt!r}")
        if fmt == "parquet":
            pyarrow_module()
        self.out = Path(out).expanduser()
        if self.out.exists() and not self.out.is_dir():
            raise InputError(f"--out {self.out}: a file is there; expected a directory (created if missing)")
        self.format: OutputFormat = fmt
        self.db = db if store else None
        self._inputs: list[str] = []
        self._rank: dict[str, int] = {}
        for where in inputs:
            self._input_rank(where)
        (self.out / PARTS).mkdir(parents=True, exist_ok=True)
        self._lock: IO[str] | None = _take_lock(self.out / LOCK)
        self._index: KeyIndex | None = None
        try:
            self._check_manifest({**manifest, "format": fmt})
            self._clean()
            self._index = KeyIndex(self.out / KEYS)
            self._figures = PartFigures()
            self.superseded = 0
            self._next = 1
            self._open_parts(self._index)
            self.resumed = self._next > 1
            self.parts = self._next - 1
            self._queue: Any = None
            self._results: Any = None
            if self.db is not None:
                from citelock.store import ResultStore, ReviewQueue

                self._queue = ReviewQueue(self.db)
                self._results = ResultStore(self.db)
        except BaseException:
            self.close()
            raise
        self._started = time.monotonic()
        self._run_rows = 0
        self._run_answers = 0
        self.outside_window = 0
        self.engine: dict[str, Any] = {}

    def _open_parts(self, index: KeyIndex) -> None:
        """The committed parts' figures, and the index brought up to date with them (rebuilt if it does not match)."""
        numbers = self._part_numbers()
        ingested = index.ingested()
        if ingested != numbers[: len(ingested)]:
            index.reset()
            ingested = []
        done = set(ingested)
        for number in numbers:  # one part's metadata in memory at a time
            meta = self._meta(number)
            self._figures.merge(PartFigures.from_json(meta["figures"]))
            self._figures.subtract(PartFigures.from_json(meta.get("superseded_figures") or {}))
            self.superseded += len(meta.get("superseded") or ())
            for where in meta.get("inputs") or ():
                self._input_rank(where)
            if number not in done:
                index.ingest(number, meta["keys"], self._positions(number, meta), meta.get("superseded") or ())
            self._next = max(self._next, number + 1)

    # -- the contract ------------------------------------------------------------------------------------------

    @property
    def committed_rows(self) -> int:
        """How many report rows are committed and live (not superseded)."""
        return self._live_index().count()

    def done_keys(self) -> set[str]:
        """Keys already committed, all in memory (an engine filters its items with :meth:`todo` instead)."""
        return set(self._live_index().keys())

    def todo(self, items: Iterable[AuditItem]) -> Iterator[AuditItem]:
        """The items whose key is not committed (a rerun continues where the last one stopped), streamed.

        The keys are looked up in the on-disk index a few hundred at a time, so memory stays flat.
        """
        chunk: list[AuditItem] = []
        for item in items:
            chunk.append(item)
            if len(chunk) >= _TODO_CHUNK:
                yield from self._fresh(chunk)
                chunk = []
        yield from self._fresh(chunk)

    def _fresh(self, items: Sequence[AuditItem]) -> list[AuditItem]:
        if not items:
            return []
        done = self._live_index().live_keys(item.key for item in items)
        return [item for item in items if item.key not in done]

    def committed(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` are committed (and not superseded)."""
        return self._live_index().live_keys(keys)

    def replacing(self, outcomes: Sequence[AuditOutcome]) -> int:
        """How many of ``outcomes`` are new versions of an input row that already has a committed report row."""
        return len(self._live_index().holders({self._position(o) for o in outcomes}))

    def commit(self, outcomes: Sequence[AuditOutcome]) -> None:
        """Commit one batch exactly once: database first (idempotent), then the part file (atomic).

        Outcomes whose key is already committed (or repeated in the batch) are left out, so a key is never
        reported twice. Rows are written in input order (the inputs as given, then row number). An outcome for
        an input row that has a committed report row of other content supersedes that row.
        """
        index = self._live_index()
        fresh: dict[str, AuditOutcome] = {}
        for outcome in outcomes:
            fresh.setdefault(outcome.key, outcome)
        for key in index.live_keys(fresh):
            del fresh[key]
        if not fresh:
            return
        batch = sorted(fresh.values(), key=self._order)
        for outcome in batch:  # a source not among the inputs takes the next rank, in name order
            self._input_rank(input_path(outcome.source))
        positions = [self._position(o) for o in batch]
        old = [(key, part) for key, part in index.holders(positions).values()]
        if self._queue is not None and self._results is not None:
            stored = [o for o in batch if o.result is not None]
            if stored:
                self._queue.enqueue_results([o.result for o in stored])
                self._results.append_many([(o.result, o.result_key) for o in stored if o.result is not None])
        figures = PartFigures()
        for outcome in batch:
            figures.add_outcome(outcome, queued=self._queue is not None)
        self._write_part(batch, positions, figures, old)
        self._run_rows += len(batch)
        self._run_answers += figures.answers

    def retire(self, read: dict[str, tuple[list[tuple[int, int]], int]]) -> None:
        """After a whole read of the inputs: supersede committed rows of input rows that are no longer there.

        Args:
            read: Per input (absolute path): the gaps in the row numbers read (first, last) and the last row read
                (0: none). An input row in a gap or after the last was deleted, or is now blank, or (a log
                audit) falls outside the window.
        """
        index = self._live_index()
        old: list[tuple[str, int]] = []
        for where, (gaps, last) in read.items():
            old.extend((key, part) for key, part, _ in index.unread(where, gaps, last))
        if old:
            self._write_part([], [], PartFigures(), old)

    def _write_part(
        self,
        batch: Sequence[AuditOutcome],
        positions: Sequence[Position],
        figures: PartFigures,
        old: Sequence[tuple[str, int]],
    ) -> None:
        """Write one part (its metadata first), then index it: the rows of ``batch``, superseding ``old``."""
        index = self._live_index()
        gone = PartFigures()
        for report in part_rows(self.out, self.format, old):
            gone.add_report(report, every_example=True)
        number = self._next
        keys = [o.key for o in batch]
        superseded = [key for key, _ in old]
        meta = {
            "part": number,
            "rows": len(batch),
            "keys": keys,
            "inputs": list(self._inputs),
            "at": [[self._rank[where], row] for where, row in positions],
            "figures": figures.to_json(),
            "superseded": superseded,
            "superseded_figures": gone.to_json(),
        }
        _write_atomic(self.out / PARTS / f"part-{number:06d}.json", lambda f: _dump_json(meta, f), binary=False)
        data = self.out / f"part-{number:06d}.{self.format}"
        if self.format == "jsonl":
            _write_atomic(data, lambda f: write_jsonl(batch, f), binary=False)
        else:
            _write_atomic(data, lambda f: write_parquet(batch, f), binary=True)
        _fsync_dir(self.out)
        index.ingest(number, keys, positions, superseded)
        self._next += 1
        self.parts = number
        self._figures.merge(figures)
        self._figures.subtract(gone)
        self.superseded += len(old)

    def _positions(self, number: int, meta: dict[str, Any]) -> list[Position]:
        """The input row of each key of a part: from its metadata, or from its report rows' source and row.

        (Parts written before the metadata kept the positions have only the rows; a relative source is then
        taken from the current directory, as the engines take it.)
        """
        inputs, at = meta.get("inputs"), meta.get("at")
        if inputs and at is not None:
            return [(inputs[rank], row) for rank, row in at]
        rows = {r["key"]: r for r in part_rows(self.out, self.format, [(key, number) for key in meta["keys"]])}
        return [(input_path(rows[key]["source"]), rows[key]["row"]) for key in meta["keys"]]

    def _input_rank(self, where: str) -> int:
        rank = self._rank.get(where)
        if rank is None:
            rank = self._rank[where] = len(self._inputs)
            self._inputs.append(where)
        return rank

    def _position(self, outcome: AuditOutcome) -> Position:
        return (input_path(outcome.source), outcome.row)

    def _order(self, outcome: AuditOutcome) -> tuple[int, str, int]:
        where = input_path(outcome.source)
        rank = self._rank.get(where, len(self._inputs))
        return (rank, where if rank == len(self._inputs) else "", outcome.row)

    def _live_index(self) -> KeyIndex:
        if self._index is None:
            raise InputError(f"--out {self.out}: this audit sink is closed")
        return self._index

    def summary(self, *, complete: bool = False) -> AuditSummary:
        """The summary: the whole audit's figures and this run's throughput."""
        seconds = time.monotonic() - self._started
        figures = PartFigures()
        figures.merge(self._figures)
        return AuditSummary(
            out=str(self.out),
            format=self.format,
            figures=figures,
            pass_rate=round(figures.passed / figures.answers, 6) if figures.answers else None,
            parts=self.parts,
            outside_window=self.outside_window,
            run_rows=self._run_rows,
            run_answers=self._run_answers,
            run_seconds=seconds,
            answers_per_second=self._run_answers / seconds if seconds > 0 and self._run_answers else None,
            resumed=self.resumed,
            complete=complete,
            engine=dict(self.engine),
            database=mask_password(self.db) if self.db is not None else None,
            superseded=self.superseded,
        )

    def write_summary(self, summary: AuditSummary) -> None:
        """Write ``_summary.json`` (atomically)."""
        data = summary.to_json()
        _write_atomic(self.out / SUMMARY, lambda f: _dump_json(data, f, indent=2), binary=False)

    def close(self) -> None:
        """Close the key index and release the out directory's lock."""
        index, self._index = getattr(self, "_index", None), None
        if index is not None:
            index.close()
        lock, self._lock = getattr(self, "_lock", None), None
        if lock is not None:
            lock.close()

    def __enter__(self) -> AuditSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the directory -----------------------------------------------------------------------------------------

    def _check_manifest(self, manifest: dict[str, Any]) -> None:
        path = self.out / MANIFEST
        wanted = json.loads(json.dumps(manifest))
        if path.is_file():
            found = json.loads(path.read_text(encoding="utf-8"))
            if found != wanted:
                differ = sorted(k for k in {*found, *wanted} if found.get(k) != wanted.get(k))
                raise InputError(
                    f"--out {self.out} holds an audit of other inputs or settings ({', '.join(differ)} differ): "
                    "give the same inputs and options to continue it, or another --out"
                )
            return
        if any(self.out.glob("part-*")):
            raise InputError(f"--out {self.out} holds part files but no {MANIFEST}: not an audit directory")
        _write_atomic(path, lambda f: _dump_json(wanted, f, indent=2), binary=False)
        _fsync_dir(self.out)

    def _clean(self) -> None:
        """Remove what a crash left: temporary files, and keys files whose part never arrived."""
        for folder in (self.out, self.out / PARTS):
            for temp in folder.glob(".tmp-*"):
                temp.unlink(missing_ok=True)
        for meta in (self.out / PARTS).glob("part-*.json"):
            if not (self.out / f"{meta.stem}.{self.format}").is_file():
                meta.unlink()

    def _part_numbers(self) -> list[int]:
        """The committed parts' numbers, ascending (each checked to have its metadata)."""
        numbers = []
        for data in self.out.glob("part-*"):
            match = PART.fullmatch(data.name)
            if match is None or match.group(2) != self.format:
                continue
            if not (self.out / PARTS / f"part-{match.group(1)}.json").is_file():
                raise InputError(
                    f"--out {self.out}: {data.name} has no {PARTS}/part-{match.group(1)}.json: not an audit part"
                )
            numbers.append(int(match.group(1)))
        return sorted(numbers)

    def _meta(self, number: int) -> dict[str, Any]:
        meta: dict[str, Any] = json.loads((self.out / PARTS / f"part-{number:06d}.json").read_text(encoding="utf-8"))
        return meta


class PartCommitter:
    """Outcomes gathered in arrival order and committed through a sink in parts of ``rows`` (or every ``seconds``).

    Both engines commit through one, on the driver, so their parts are cut the same way. An outcome whose key is
    committed or already waiting (a block a cluster ran twice) is dropped on arrival, so it is neither committed
    nor counted twice.
    """

    def __init__(self, sink: AuditSink, rows: int, seconds: float, on_progress: Callable[[int], None] | None) -> None:
        self.sink = sink
        self.rows = rows
        self.seconds = seconds
        self.on_progress = on_progress
        self.pending: list[AuditOutcome] = []
        self._waiting: set[str] = set()
        self.last = time.monotonic()

    def add(self, outcomes: Sequence[AuditOutcome]) -> int:
        """Take outcomes that came back; returns how many were new.

        ``on_progress`` is told how many input rows are now done that were not before: a new version of a row
        with a committed report row was counted when the audit started (``committed_rows``), so it is not.
        """
        arrived: dict[str, AuditOutcome] = {}
        for outcome in outcomes:
            if outcome.key not in self._waiting:
                arrived.setdefault(outcome.key, outcome)
        for key in self.sink.committed(arrived):
            del arrived[key]
        fresh = list(arrived.values())
        newly_done = len(fresh) - self.sink.replacing(fresh) if fresh and self.on_progress is not None else 0
        self.pending.extend(fresh)
        self._waiting.update(arrived)
        if len(self.pending) >= self.rows or time.monotonic() - self.last >= self.seconds:
            self.flush()
        if self.on_progress is not None:
            self.on_progress(newly_done)
        return len(fresh)

    def salvage(self) -> None:
        """On an interrupt or failure: commit the outcomes that arrived whole (a rerun redoes the rest).

        A failure of this commit (the database is what failed) is left to the exception already on its way.
        """
        with contextlib.suppress(Exception):
            self.flush()

    def flush(self) -> None:
        """Commit what is waiting."""
        if self.pending:
            self.sink.commit(self.pending)
            self.pending = []
            self._waiting.clear()
        self.last = time.monotonic()


def _take_lock(path: Path) -> IO[str]:
    handle = path.open("a", encoding="utf-8")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock (one audit per directory is then on the user)
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise InputError(f"--out {path.parent}: another audit is writing to this directory") from None
    return handle


def _write_atomic(path: Path, write: Any, *, binary: bool) -> None:
    """Write ``path`` under a temporary name, fsync it, rename it into place."""
    temp = path.with_name(f".tmp-{path.name}")
    with temp.open("wb") if binary else temp.open("w", encoding="utf-8", newline="\n") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _dump_json(data: Any, handle: IO[str], *, indent: int | None = None) -> None:
    json.dump(data, handle, ensure_ascii=False, indent=indent)
    handle.write("\n")


def mask_password(db: str) -> str:
    """A database target as shown: a URL's password replaced by ``***``."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", db)
