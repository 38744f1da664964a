"""``citelock log verify``: walk the prompt log's hash chain and name the first broken record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from sqlalchemy.exc import DBAPIError, OperationalError

from citelock.cli._app import EXIT_INPUT, EXIT_INTEGRITY, EXIT_OK, EXIT_UNREACHABLE, app
from citelock.cli._config import ConfigOption
from citelock.cli._io import fail
from citelock.cli._queue import DbOption, resolve_db
from citelock.errors import CitelockError
from citelock.store import ChainReport, PromptLog
from citelock.store._chain import KEY_ENV

__all__ = ["log_app"]

log_app = typer.Typer(help="The prompt log: verify its hash chain.", no_args_is_help=True)
app.add_typer(log_app, name="log")


def _read_key(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        fail(f"key file {path}: cannot read it ({exc.strerror})")
    key = raw.rstrip(b"\r\n")
    if not key:
        fail(f"key file {path} is empty; expected the log's secret key")
    return key


def _exit(code: int, message: str) -> NoReturn:
    typer.echo(f"citelock: error: {message}", err=True)
    raise typer.Exit(code)


@log_app.command("verify")
def verify(
    db: DbOption = None,
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            help="a head hash printed by an earlier verify and kept elsewhere: the chain must still contain it "
            "(detects records removed from the end, and rewrites before it)",
        ),
    ] = None,
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", help=f"file holding the log's HMAC key (default: ${KEY_ENV}, if set)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    config: ConfigOption = None,
) -> None:
    """Walk the prompt log's hash chain, check every record, and name the first broken one.

    Prints the chain's head hash: keep it somewhere the database's writers cannot change, and pass it back
    with --anchor later. Without an anchor, records removed from the end of the log cannot be detected; without
    the key, a keyed chain's links are checked but not its MACs, and a plain chain rewritten consistently from
    some record on cannot be detected.

    Exit 0 when the chain is intact, 3 when a record is broken (integrity failure), 2 on bad options, a
    missing database, or a keyed log verified without its key, 4 when the database server is unreachable.
    """
    target = resolve_db(db, config)
    key = _read_key(key_file) if key_file is not None else None
    try:
        report = PromptLog(target, key=key).verify_chain(anchor=anchor)
    except CitelockError as exc:
        fail(str(exc))
    except OperationalError as exc:
        if "://" in target and not target.startswith("sqlite"):
            _exit(EXIT_UNREACHABLE, f"cannot reach the database {target}: {exc.orig}")
        fail(f"cannot read the prompt log at {target}: {exc.orig}")
    except DBAPIError as exc:
        fail(f"{target} is not a usable citelock database: {exc.orig}")
    if as_json:
        payload = {**report.model_dump(mode="json"), "ok": report.ok, "db": target}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        _print(report, target)
    if not report.ok:
        first = report.first_broken
        assert first is not None
        where = (
            f"record #{first.seq} (request {first.request_id!r})"
            if first.seq is not None
            else (f"legacy record {first.request_id!r}" if first.request_id is not None else "the log")
        )
        _exit(EXIT_INTEGRITY, f"the prompt log at {target} is broken: first at {where}: {first.problem}")
    if report.keyed and not report.macs_checked:
        _exit(
            EXIT_INPUT,
            f"the prompt log at {target} is keyed (HMAC-SHA256): its links and content are intact but its MACs "
            f"were not checked; give the key (${KEY_ENV} or --key-file) to verify it",
        )
    raise typer.Exit(EXIT_OK)


def _print(report: ChainReport, target: str) -> None:
    kind = "HMAC-SHA256 (keyed)" if report.keyed else "SHA-256 (not keyed)"
    legacy = f", {report.legacy} legacy (written before the chain, sealed into it)" if report.legacy else ""
    typer.echo(f"prompt log {target}: {report.records} records{legacy}; chain {kind}")
    if report.head_seq is None:
        typer.echo("chain head: none (no chained record yet)")
    else:
        typer.echo(f"chain head: #{report.head_seq} {report.head_hash}")
    if report.anchor is not None:
        typer.echo(f"anchor {report.anchor}: {'found' if report.anchor_found else 'NOT FOUND'}")
    if report.ok:
        typer.echo("intact" + ("" if report.macs_checked else " (links and content only: MACs not checked)"))
        return
    typer.echo(f"BROKEN: {report.problem_count} problem(s)")
    for problem in report.problems:
        where = f"#{problem.seq}" if problem.seq is not None else "legacy" if problem.request_id else "log"
        rid = f" {problem.request_id!r}" if problem.request_id is not None else ""
        typer.echo(f"  {where}{rid}: {problem.problem}")
    if report.problem_count > len(report.problems):
        typer.echo(f"  ... and {report.problem_count - len(report.problems)} more")
