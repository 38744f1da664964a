"""``citelock audit``: guard many logged answers at once, resumably, and summarize what was wrong."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock.audit._figures import AuditSummary
from citelock.audit._local import DEFAULT_BATCH
from citelock.audit._rows import check_inputs, count_rows
from citelock.audit._run import run_audit
from citelock.audit._sink import DEFAULT_COMMIT_ROWS, SUMMARY
from citelock.cli._app import EXIT_FINDINGS, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, app, interrupted
from citelock.cli._io import database_target, fail, shown, text_option
from citelock.cli._report import REASON_WIDTH
from citelock.cli._surface_options import NO_SURFACE, SurfaceOptions, surface_options, surface_setup
from citelock.errors import UsageError

__all__ = ["audit"]

BAD_ROWS_SHOWN = 20
"""Bad rows printed on standard error (all of them are in the report; the summary counts them)."""

_EPILOG = (
    "Exit codes of an audit: 0 every answer passed; 1 some answer has findings (blocked or repaired); 2 some "
    "rows could not be audited (bad rows: listed on stderr and in the report with their error), whatever the "
    "other answers found, or unusable options; 130 interrupted (what was committed stays: rerun to continue)."
)


@app.command(epilog=_EPILOG)
@surface_options
def audit(
    inputs: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT",
            help="JSONL or Parquet files of exported rows (schemas/audit_row.v1.json), or one prompt log "
            "(SQLite file or postgresql:// URL) with --answers",
            show_default=False,
        ),
    ],
    answers: Annotated[
        list[str] | None,
        typer.Option(
            "--answers",
            help="with a prompt log: JSONL or Parquet files of {request_id, answer} rows "
            "(schemas/audit_answer.v1.json); the log stores prompts, not answers",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="the out directory: report parts, _manifest.json, _summary.json")
    ] = Path("citelock-audit"),
    fmt: Annotated[str, typer.Option("--format", help="the report's format: jsonl or parquet")] = "jsonl",
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="with a surface: queue findings and store results here (SQLite path or URL); default: the "
            "prompt log's database when INPUT is one, else nothing is stored",
        ),
    ] = None,
    options: SurfaceOptions = NO_SURFACE,
    engine: Annotated[
        str, typer.Option("--engine", help="local: a process pool on this machine; ray: a Ray cluster")
    ] = "local",
    processes: Annotated[
        int | None, typer.Option("--processes", help="local engine: worker processes (default: every core)")
    ] = None,
    address: Annotated[
        str | None, typer.Option("--address", help="ray engine: the cluster's address (default: a local one)")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="prompt log: answers whose prompt was logged at or after this ISO time (UTC)"),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="prompt log: answers whose prompt was logged before this ISO time (UTC)"),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="answers per task sent to a worker")] = DEFAULT_BATCH,
    commit_every: Annotated[
        int, typer.Option("--commit-every", help="answers per committed part file (at least)")
    ] = DEFAULT_COMMIT_ROWS,
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress bar")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Audit many answers: the guard on each, one report row per answer, findings queued, a summary.

    Each report row has the fields of `citelock check --json` plus key, source, row and error. Without
    --surface/--judge/--on-fail/--calibration only the free deterministic checks run (provenance, coverage,
    numbers) and nothing is queued or stored; with them the surface policy runs as in `citelock check`, and
    with a database (--db, or the prompt log's own) every finding is queued for review and every result
    stored, each once.

    Resumable: a crash, kill or Ctrl-C loses nothing, and the same command again continues where it stopped;
    running it twice adds no duplicate report rows, queue entries or results. Rows that cannot be audited
    (bad JSON, a schema violation, an unparseable answer) are reported and skipped without stopping the run.
    """
    for value in (*inputs, *(answers or ())):
        text_option("INPUT", value)
    if fmt not in ("jsonl", "parquet"):
        fail(f"--format must be jsonl or parquet, got {fmt!r}")
    if engine not in ("local", "ray"):
        fail(f"--engine must be local or ray, got {engine!r}")
    if processes is not None and (engine != "local" or processes < 1):
        fail("--processes sizes the local engine's pool: a number of at least 1, with --engine local")
    if address is not None and engine != "ray":
        fail("--address is the Ray cluster's: it needs --engine ray")
    if batch_size < 1 or commit_every < 1:
        fail("--batch-size and --commit-every must be at least 1")
    if db is not None:
        database_target(db)
    window = (_time("--since", since), _time("--until", until))
    try:
        check_inputs(inputs, answers=answers or (), since=window[0], until=window[1])
    except UsageError as exc:
        fail(str(exc))
    setup = surface_setup(options)
    settings = setup.audit_settings(options) if setup is not None else options.audit_settings()
    if db is None and setup is not None and setup.config is not None and setup.config.store is not None:
        db = database_target(setup.config.store)  # the config's store (or $CITELOCK_DB) for its surfaces
    progress = _Progress(inputs, answers or (), enabled=not quiet and sys.stderr.isatty())
    try:
        with progress:
            summary = run_audit(
                inputs,
                out=out,
                fmt="parquet" if fmt == "parquet" else "jsonl",
                db=db,
                settings=settings,
                answers=answers or (),
                since=window[0],
                until=window[1],
                engine="ray" if engine == "ray" else "local",
                processes=processes,
                address=address,
                batch_size=batch_size,
                commit_rows=commit_every,
                on_start=progress.start,
                on_progress=progress.advance,
                # the guard the options built: no engine builds another on this process
                guard=setup.guard if setup is not None else None,
            )
    except (KeyboardInterrupt, Exception) as exc:  # a Ctrl-C inside a commit arrives as the rollback's error
        if not interrupted(exc):
            raise
        typer.echo(
            f"citelock: interrupted; what was committed is kept in {shown(out)}: "
            "run the same command again to continue",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    _print_bad_rows(summary)
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2, ensure_ascii=False))
    else:
        _print_summary(summary)
    figures = summary.figures
    if figures.bad_rows:
        raise typer.Exit(EXIT_INPUT)
    raise typer.Exit(EXIT_OK if figures.passed == figures.answers else EXIT_FINDINGS)


def _time(option: str, value: str | None) -> datetime | None:
    """An ISO 8601 date or time as UTC (one without a time zone is UTC); exit 2 when it is not one."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{option} {value!r}: expected an ISO 8601 date or time, e.g. 2025-03-01 or 2025-03-01T12:00:00Z")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class _Progress:
    """A rich progress bar on stderr (rows, rate, ETA), or nothing when stderr is not a terminal or --quiet."""

    def __init__(self, inputs: list[str], answers: list[str] | tuple[str, ...], *, enabled: bool) -> None:
        self.enabled = enabled
        self.inputs = inputs
        self.answers = answers
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("auditing"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)

    def start(self, done: int) -> None:
        if self.bar is not None:
            total = count_rows(self.inputs, answers=self.answers)
            self.task = self.bar.add_task("audit", total=max(total, done), completed=done, rate="")

    def advance(self, count: int) -> None:
        if self.bar is not None and self.task is not None:
            task = self.bar.tasks[0]
            speed = task.speed
            rate = f"{speed:,.1f} rows/s" if speed else ""  # log rows skipped by --since/--until count too
            self.bar.update(self.task, advance=count, rate=rate)


def _print_bad_rows(summary: AuditSummary) -> None:
    figures = summary.figures
    if not figures.bad_rows:
        return
    for source, row, error in figures.bad_examples[:BAD_ROWS_SHOWN]:
        typer.echo(f"citelock: bad row: {shown(source)} row {row}: {error}", err=True)
    more = figures.bad_rows - min(len(figures.bad_examples), BAD_ROWS_SHOWN)
    tail = f" ({more} more not shown here)" if more > 0 else ""
    rows = "bad row" if figures.bad_rows == 1 else "bad rows"
    typer.echo(f"citelock: {figures.bad_rows} {rows} skipped{tail}: each is in the report with its error", err=True)


def _print_summary(summary: AuditSummary) -> None:
    f = summary.figures
    data = summary.to_json()
    run = data["run"]
    rate = f"{run['answers_per_second']:,.1f} answers/s" if run["answers_per_second"] else "no answers"
    workers = summary.engine.get("processes")
    how = f"{summary.engine.get('engine', 'local')} engine" + (f", {workers} processes" if workers else "")
    resumed = " (continuing an earlier run)" if summary.resumed else ""
    state = "" if summary.complete else " — INCOMPLETE"
    answers, bad = ("answer" if f.answers == 1 else "answers"), ("bad row" if f.bad_rows == 1 else "bad rows")
    typer.echo(f"audited {f.answers:,} {answers}, {f.bad_rows:,} {bad}{state}{resumed}")
    typer.echo(f"this run: {run['rows']:,} rows in {run['seconds']:,.1f} s, {rate} ({how})")
    if summary.pass_rate is not None:
        typer.echo(f"passed: {f.passed:,} of {f.answers:,} ({summary.pass_rate:.1%}); citations: {f.citations:,}")
    typer.echo(f"findings: {f.findings:,}")
    for reason, count in sorted(f.findings_by_reason.items(), key=lambda kv: (-kv[1], kv[0])):
        typer.echo(f"  {reason:<{REASON_WIDTH}}  {count:,}")
    if f.decisions:
        typer.echo("decisions: " + ", ".join(f"{k} {v:,}" for k, v in sorted(f.decisions.items())))
    if f.judge:
        j = f.judge
        typer.echo(
            f"judge: {j.get('judge_calls', 0) + j.get('diagnosis_calls', 0):,} calls "
            f"({j.get('cache_hits', 0):,} served from cache); saved {j.get('saved_by_ordering', 0):,} by "
            f"ordering (already failed), {j.get('saved_by_sampling', 0):,} sampled out"
        )
    if summary.outside_window:
        typer.echo(f"skipped: {summary.outside_window:,} answers whose prompt was logged outside --since/--until")
    if summary.superseded:
        typer.echo(
            f"superseded: {summary.superseded:,} report rows replaced by a newer version of their input row "
            "(edited or deleted since); not counted above"
        )
    if summary.database is not None:
        typer.echo(f"queued {f.queued:,} findings for review and stored results in {summary.database}")
    typer.echo(f"report: {summary.out} ({summary.parts} {summary.format} parts); summary in {SUMMARY} there")
