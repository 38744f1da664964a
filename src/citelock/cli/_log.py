"""``citelock log verify``: walk the prompt log's hash chain and name the first broken record.

``citelock log migrate``: key and chain a log written before the chain (or without a key), once, recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from citelock.cli._app import EXIT_INPUT, EXIT_INTEGRITY, EXIT_OK, app, using_database
from citelock.cli._config import ConfigOption
from citelock.cli._io import fail
from citelock.cli._queue import DbOption, resolve_db
from citelock.errors import UsageError
from citelock.store import ChainReport, PromptLog
from citelock.store._chain import KEY_ENV
from citelock.store._log_migrate import migrate_to_key, migrations

__all__ = ["log_app"]

log_app = typer.Typer(help="The prompt log: verify its hash chain; migrate it to a key.", no_args_is_help=True)
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

    Exit 0 when the chain is intact, 3 when a record is broken (integrity failure; also a file that is not a
    database, and, with a key, an unkeyed or unchained record or a dropped trigger), 2 on bad options, a missing
    database, or a keyed log verified without its key, 4 when the database server is unreachable.
    """
    target = resolve_db(db, config)
    key = _read_key(key_file) if key_file is not None else None
    try:
        # A database error (a file that is not a database, an unreachable server) is classified where every
        # command's is (citelock.cli._app.classify), so it exits as it does in check or metrics.
        with using_database(target):
            report = PromptLog(target, key=key).verify_chain(anchor=anchor)
    except UsageError as exc:
        fail(str(exc))
    with using_database(target):
        done = migrations(target) if report.records else []
    if as_json:
        payload = {**report.model_dump(mode="json"), "ok": report.ok, "db": target}
        payload["migrations"] = [m.model_dump(mode="json") for m in done]
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        _print(report, target)
        for m in done:
            when = m.migrated_at.isoformat()
            typer.echo(
                f"keyed from its first record ({when})"
                if m.records == 0
                else f"keyed by `citelock log migrate` at {when}: {m.records} records ({m.unchained} unchained "
                f"before); head before it {m.previous_head}"
            )
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


KeyFile = Annotated[
    Path | None,
    typer.Option("--key-file", help=f"file holding the log's HMAC key (default: ${KEY_ENV}, if set)"),
]


@log_app.command("migrate")
def migrate(db: DbOption = None, key_file: KeyFile = None, config: ConfigOption = None) -> None:
    """Key and chain every record of a prompt log written before the chain, or chained without a key.

    Once the key is given (--key-file or $CITELOCK_LOG_KEY), the log must be keyed and chained throughout:
    `log verify`, `check --request-id` and every append refuse an unchained or unkeyed record (exit 3). This
    command is how a real older log gets there: it verifies the log as it stands (a broken one is not
    migrated), gives every record a link of a new HMAC chain in one transaction, and records the migration
    (when, how many records, the head before and after; `log verify` prints it). A log that holds a keyed
    chain and unchained records was stripped, not written before the chain: it is refused.

    Prints the new head hash: keep it elsewhere and pass it to `log verify --anchor` later. Exit 0 when the
    log was migrated or already keyed, 3 when it is broken, 2 without a key or on bad options.
    """
    target = resolve_db(db, config)
    key = _read_key(key_file) if key_file is not None else None
    if key is None and not os.environ.get(KEY_ENV):
        fail(f"log migrate needs the key: give --key-file or set ${KEY_ENV}")
    try:
        with using_database(target):
            done = migrate_to_key(target, key)
    except UsageError as exc:
        fail(str(exc))
    if done is None:
        typer.echo(f"prompt log {target}: already keyed and chained under this key (or empty); nothing to do")
        raise typer.Exit(EXIT_OK)
    typer.echo(
        f"prompt log {target}: {done.records} records keyed and chained ({done.unchained} were unchained); "
        f"head before {done.previous_head}"
    )
    typer.echo(f"chain head: #{done.records} {done.head_hash}")
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
