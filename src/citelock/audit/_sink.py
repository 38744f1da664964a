"""Where an audit's outcomes go, exactly once: report part files in the out directory, the queue, the results.

The out directory holds:

- ``part-000001.jsonl`` (or ``.parquet``) ...: the report rows, one part per committed batch;
- ``_parts/part-000001.json`` ...: each part's keys and figures (written before its part);
- ``_manifest.json``: what is audited (inputs, settings, format, database), so a rerun continues the same audit;
- ``_summary.json``: the summary of the last run (written at its end, and when it is interrupted);
- ``_lock``: held while an audit writes here (a second audit of the same directory stops with an error).

Names starting with ``_`` are skipped by dataset readers (pyarrow, DuckDB, Spark), so ``out/`` reads as one
dataset of report rows.

A batch commits in this order: the database first (review-queue entries are idempotent by id, results by their
key: :meth:`~citelock.store.ResultStore.append_many`), then the part's keys and figures, then the part itself;
each file is written under a temporary name, flushed to disk (fsync) and renamed into place, so it is either
whole or absent. A part present means its batch is done; a crash anywhere before that leaves the batch undone,
and a rerun redoes it, which adds nothing to the database twice. So a crash, a kill -9 or Ctrl-C loses nothing,
and every key is reported exactly once.

In Parquet the scalar fields (``key``, ``source``, ``row``, ``error``, ``ok``, ``request_id``, ``prompt_sha256``,
``surface``, ``decision``, ``on_fail``) are columns and the nested ones (``findings``, ``counts``,
``citations``, ``claims``, ``outcomes``, ``routes``, ``accounting``) are JSON text, so every part has one
schema; :func:`read_report` turns both formats back into the same rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from citelock.audit._work import AuditOutcome
from citelock.errors import InputError, MissingExtraError

__all__ = [
    "DEFAULT_COMMIT_ROWS",
    "DEFAULT_COMMIT_SECONDS",
    "AuditSink",
    "AuditSummary",
    "OutputFormat",
    "PartCommitter",
    "PartFigures",
    "mask_password",
    "read_report",
]

OutputFormat = Literal["jsonl", "parquet"]

MANIFEST = "_manifest.json"
SUMMARY = "_summary.json"
PARTS = "_parts"
LOCK = "_lock"
_PART = re.compile(r"part-(\d{6,})\.(jsonl|parquet)")
_SCALARS = ("key", "source", "row", "error", "ok", "request_id", "prompt_sha256", "surface", "decision", "on_fail")
_NESTED = ("findings", "counts", "citations", "claims", "outcomes", "routes", "accounting")
_JUDGE_FIELDS = (
    "judge_calls",
    "diagnosis_calls",
    "cache_hits",
    "saved_by_ordering",
    "saved_by_sampling",
    "no_passage",
    "errors",
    "reviews",
    "escalations",
)
DEFAULT_COMMIT_ROWS = 2048
"""Answers per committed part (at least; the last part of a run may be smaller)."""

DEFAULT_COMMIT_SECONDS = 30.0
"""A part is committed at least this often while answers arrive, whatever its size."""

BAD_ROWS_KEPT = 20
"""Bad rows listed by source, row and reason in the summary (all of them are in the report rows)."""


@dataclass
class PartFigures:
    """The figures of some committed report rows (one part, or the whole audit): they add up.

    Attributes:
        answers: Answers audited (rows without an error).
        bad_rows: Rows that could not be audited (``error`` set).
        passed: Answers that passed (no findings; with a surface, decision ``pass``).
        citations: Citations in the audited answers.
        findings: Findings in all.
        findings_by_reason: Findings per reason code.
        decisions: Answers per decision (with a surface).
        judge: Judge accounting summed (calls, cache hits, citations saved by ordering and sampling ...).
        queued: Findings sent to the review queue (0 without a database; an entry already there is kept as it was).
        bad_examples: The first bad rows: ``[source, row, error]``.
    """

    answers: int = 0
    bad_rows: int = 0
    passed: int = 0
    citations: int = 0
    findings: int = 0
    findings_by_reason: dict[str, int] = field(default_factory=dict)
    decisions: dict[str, int] = field(default_factory=dict)
    judge: dict[str, int] = field(default_factory=dict)
    queued: int = 0
    bad_examples: list[list[Any]] = field(default_factory=list)

    def add_outcome(self, outcome: AuditOutcome, *, queued: bool = True) -> None:
        """Count one outcome (``queued``: its findings went to a review queue)."""
        report = outcome.report
        if report.get("error") is not None:
            self.bad_rows += 1
            if len(self.bad_examples) < BAD_ROWS_KEPT:
                self.bad_examples.append([outcome.source, outcome.row, report["error"]])
            return
        self.answers += 1
        result = outcome.result
        decision = report.get("decision")
        self.passed += bool(decision == "pass" if decision is not None else report.get("ok"))
        self.citations += len(report.get("citations") or ())
        for reason, count in (report.get("counts") or {}).items():
            self.findings += count
            self.findings_by_reason[reason] = self.findings_by_reason.get(reason, 0) + count
        if decision is not None:
            self.decisions[decision] = self.decisions.get(decision, 0) + 1
        if result is not None:
            self.queued += len(result.report.findings) if queued else 0
            accounting = result.accounting.model_dump()
            for name in _JUDGE_FIELDS:
                self.judge[name] = self.judge.get(name, 0) + int(accounting.get(name, 0))

    def merge(self, other: PartFigures) -> None:
        """Add ``other``'s figures to these."""
        self.answers += other.answers
        self.bad_rows += other.bad_rows
        self.passed += other.passed
        self.citations += other.citations
        self.findings += other.findings
        self.queued += other.queued
        for mine, theirs in (
            (self.findings_by_reason, other.findings_by_reason),
            (self.decisions, other.decisions),
            (self.judge, other.judge),
        ):
            for name, count in theirs.items():
                mine[name] = mine.get(name, 0) + count
        room = BAD_ROWS_KEPT - len(self.bad_examples)
        if room > 0:
            self.bad_examples.extend(other.bad_examples[:room])

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartFigures:
        """Figures written by :meth:`to_json`."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON data."""
        return asdict(self)


@dataclass
class AuditSummary:
    """What an audit found and what it cost: the whole audit (every committed part) and this run.

    Attributes:
        out: The out directory.
        format: ``jsonl`` or ``parquet``.
        figures: The whole audit's figures (all committed parts, across reruns).
        pass_rate: Passed answers / audited answers (None before any answer).
        parts: Committed part files.
        outside_window: Log answers skipped because their prompt was logged outside ``--since``/``--until``.
        run_rows: Rows committed by this run (answers and bad rows).
        run_answers: Answers audited by this run (bad rows not counted).
        run_seconds: This run's wall time (from the out directory's opening to the summary).
        answers_per_second: This run's throughput: answers audited per second of wall time.
        resumed: This run continued an audit that had committed parts.
        complete: Every input row is committed (False when the run was interrupted or failed).
        engine: The engine that ran (``local`` or ``ray``) and its workers.
        database: Where findings were queued and results stored (None: not stored).
    """

    out: str
    format: str
    figures: PartFigures
    pass_rate: float | None
    parts: int
    outside_window: int
    run_rows: int
    run_answers: int
    run_seconds: float
    answers_per_second: float | None
    resumed: bool
    complete: bool
    engine: dict[str, Any] = field(default_factory=dict)
    database: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON data (what ``citelock audit --json`` prints and ``_summary.json`` holds)."""
        figures = self.figures
        judge = dict(figures.judge)
        return {
            "out": self.out,
            "format": self.format,
            "complete": self.complete,
            "answers": figures.answers,
            "bad_rows": figures.bad_rows,
            "passed": figures.passed,
            "pass_rate": self.pass_rate,
            "citations": figures.citations,
            "findings": figures.findings,
            "findings_by_reason": dict(sorted(figures.findings_by_reason.items())),
            "decisions": dict(sorted(figures.decisions.items())),
            "queued": figures.queued,
            "judge": judge,
            "outside_window": self.outside_window,
            "bad_row_examples": figures.bad_examples,
            "parts": self.parts,
            "database": self.database,
            "engine": self.engine,
            "run": {
                "rows": self.run_rows,
                "answers": self.run_answers,
                "seconds": round(self.run_seconds, 3),
                "answers_per_second": None if self.answers_per_second is None else round(self.answers_per_second, 2),
                "resumed": self.resumed,
            },
        }


class AuditSink:
    """The out directory and the database of one audit; both engines run it on the driver process only.

    Args:
        out: The out directory (created if missing).
        manifest: What is audited (inputs, settings, format, database) as JSON data. A directory that already
            holds an audit must have the same manifest (a rerun continues it); else :class:`InputError`.
        fmt: ``jsonl`` or ``parquet``.
        db: The database (SQLite path or URL) for the review queue and the result store; None stores nothing.
        store: Queue findings and store results (a surface policy ran); without it the database is not touched.

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
    ) -> None:
        if fmt not in ("jsonl", "parquet"):
            raise InputError(f"the report format must be jsonl or parquet, got {fmt!r}")
        if fmt == "parquet":
            _pyarrow()
        self.out = Path(out).expanduser()
        if self.out.exists() and not self.out.is_dir():
            raise InputError(f"--out {self.out}: a file is there; expected a directory (created if missing)")
        self.format: OutputFormat = fmt
        self.db = db if store else None
        (self.out / PARTS).mkdir(parents=True, exist_ok=True)
        self._lock: IO[str] | None = _take_lock(self.out / LOCK)
        try:
            self._check_manifest({**manifest, "format": fmt})
            self._clean()
            self._figures = PartFigures()
            self._done: set[str] = set()
            self._next = 1
            for number, meta in self._committed():
                self._figures.merge(PartFigures.from_json(meta["figures"]))
                self._done.update(meta["keys"])
                self._next = max(self._next, number + 1)
            self.resumed = bool(self._done)
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

    # -- the contract ------------------------------------------------------------------------------------------

    def done_keys(self) -> set[str]:
        """Keys already committed (skip them: a rerun continues where the last one stopped)."""
        return set(self._done)

    def commit(self, outcomes: Sequence[AuditOutcome]) -> None:
        """Commit one batch exactly once: database first (idempotent), then the part file (atomic).

        Outcomes whose key is already committed (or repeated in the batch) are left out, so a key is never
        reported twice. Rows are written in (source, row) order.
        """
        fresh: dict[str, AuditOutcome] = {}
        for outcome in outcomes:
            if outcome.key not in self._done and outcome.key not in fresh:
                fresh[outcome.key] = outcome
        if not fresh:
            return
        batch = sorted(fresh.values(), key=lambda o: (o.source, o.row))
        if self._queue is not None and self._results is not None:
            stored = [o for o in batch if o.result is not None]
            if stored:
                self._queue.enqueue_results([o.result for o in stored])
                self._results.append_many([(o.result, o.result_key) for o in stored if o.result is not None])
        figures = PartFigures()
        for outcome in batch:
            figures.add_outcome(outcome, queued=self._queue is not None)
        number = self._next
        meta = {"part": number, "rows": len(batch), "keys": [o.key for o in batch], "figures": figures.to_json()}
        _write_atomic(self.out / PARTS / f"part-{number:06d}.json", lambda f: _dump_json(meta, f), binary=False)
        data = self.out / f"part-{number:06d}.{self.format}"
        if self.format == "jsonl":
            _write_atomic(data, lambda f: _write_jsonl(batch, f), binary=False)
        else:
            _write_atomic(data, lambda f: _write_parquet(batch, f), binary=True)
        _fsync_dir(self.out)
        self._next += 1
        self.parts = number
        self._done.update(fresh)
        self._figures.merge(figures)
        self._run_rows += len(batch)
        self._run_answers += figures.answers

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
        )

    def write_summary(self, summary: AuditSummary) -> None:
        """Write ``_summary.json`` (atomically)."""
        data = summary.to_json()
        _write_atomic(self.out / SUMMARY, lambda f: _dump_json(data, f, indent=2), binary=False)

    def close(self) -> None:
        """Release the out directory's lock."""
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

    def _committed(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for data in sorted(self.out.glob("part-*")):
            match = _PART.fullmatch(data.name)
            if match is None or match.group(2) != self.format:
                continue
            meta_path = self.out / PARTS / f"part-{match.group(1)}.json"
            if not meta_path.is_file():
                raise InputError(f"--out {self.out}: {data.name} has no {PARTS}/{meta_path.name}: not an audit part")
            yield int(match.group(1)), json.loads(meta_path.read_text(encoding="utf-8"))


class PartCommitter:
    """Outcomes gathered in arrival order and committed through a sink in parts of ``rows`` (or every ``seconds``).

    Both engines commit through one, on the driver, so their parts are cut the same way.
    """

    def __init__(self, sink: AuditSink, rows: int, seconds: float, on_progress: Callable[[int], None] | None) -> None:
        self.sink = sink
        self.rows = rows
        self.seconds = seconds
        self.on_progress = on_progress
        self.pending: list[AuditOutcome] = []
        self.last = time.monotonic()

    def add(self, outcomes: Sequence[AuditOutcome]) -> None:
        self.pending.extend(outcomes)
        if len(self.pending) >= self.rows or time.monotonic() - self.last >= self.seconds:
            self.flush()
        if self.on_progress is not None:
            self.on_progress(len(outcomes))

    def salvage(self) -> None:
        """On an interrupt or failure: commit the outcomes that arrived whole (a rerun redoes the rest).

        A failure of this commit (the database is what failed) is left to the exception already on its way.
        """
        with contextlib.suppress(Exception):
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.sink.commit(self.pending)
            self.pending = []
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


def _row_json(report: dict[str, Any]) -> str:
    return json.dumps(report, ensure_ascii=False, separators=(",", ":"))


def _write_jsonl(batch: Sequence[AuditOutcome], handle: IO[str]) -> None:
    for outcome in batch:
        handle.write(_row_json(outcome.report))
        handle.write("\n")


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise MissingExtraError("audit", "pyarrow") from None
    return pyarrow


def _parquet_schema(pa: Any) -> Any:
    types = {"row": pa.int64(), "ok": pa.bool_()}
    return pa.schema([(name, types.get(name, pa.string())) for name in (*_SCALARS, *_NESTED)])


def _write_parquet(batch: Sequence[AuditOutcome], handle: IO[bytes]) -> None:
    pa = _pyarrow()
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {name: [] for name in (*_SCALARS, *_NESTED)}
    for outcome in batch:
        report = outcome.report
        for name in _SCALARS:
            columns[name].append(report.get(name))
        for name in _NESTED:
            value = report.get(name)
            columns[name].append(None if name not in report else json.dumps(value, ensure_ascii=False))
    table = pa.Table.from_pydict(columns, schema=_parquet_schema(pa))
    pq.write_table(table, handle)


def read_report(out: str | Path) -> list[dict[str, Any]]:
    """Every report row of an audit's out directory, in (source, row) order, the same for JSONL and Parquet.

    Fields a run without a surface does not produce are left out of its rows, as in the JSONL. Every row is held
    in memory: for a large report, read the part files with a dataset reader instead.

    Raises:
        InputError: ``out`` is not an audit directory.
    """
    folder = Path(out).expanduser()
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{folder} is not an audit directory (no {MANIFEST})")
    fmt = json.loads(manifest.read_text(encoding="utf-8")).get("format", "jsonl")
    rows: list[dict[str, Any]] = []
    for data in sorted(folder.glob(f"part-*.{fmt}")):
        if _PART.fullmatch(data.name) is None:
            continue
        if fmt == "jsonl":
            with data.open(encoding="utf-8") as handle:
                rows.extend(json.loads(line) for line in handle if line.strip())
        else:
            rows.extend(_parquet_rows(data))
    rows.sort(key=lambda r: (r["source"], r["row"]))
    return rows


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    _pyarrow()
    import pyarrow.parquet as pq

    for values in pq.read_table(path).to_pylist():
        row = {name: values[name] for name in _SCALARS}
        policy = values.get("outcomes") is not None or values.get("decision") is not None
        for name in _NESTED:
            text = values.get(name)
            if text is None and name in ("outcomes", "routes", "accounting") and not policy:
                continue
            row[name] = json.loads(text) if text is not None else None
        if not policy:
            for name in ("surface", "decision", "on_fail"):
                row.pop(name, None)
        yield _ordered(row)


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    order = ("key", "source", "row", "error", "ok", "request_id", "prompt_sha256", "findings", "counts")
    rest = ("citations", "claims", "surface", "decision", "on_fail", "outcomes", "routes", "accounting")
    return {name: row[name] for name in (*order, *rest) if name in row}


def mask_password(db: str) -> str:
    """A database target as shown: a URL's password replaced by ``***``."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", db)
