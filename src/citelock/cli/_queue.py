"""``citelock queue``: list the review queue grouped by reason, show an entry and its history, resolve it.

An entry's first outcome is ``resolve``; a later change is ``rereview`` by a named reviewer: a new event that
supersedes the current outcome, never an overwrite (``show`` lists every event).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock.cli._app import EXIT_OK, app, using_database
from citelock.cli._config import ConfigOption, config_store, note_surface
from citelock.cli._io import fail
from citelock.cli._report import NARROW
from citelock.errors import UsageError
from citelock.reasons import REASONS, ReasonCode
from citelock.store import QueueEntry, Resolution, ReviewQueue

__all__ = ["open_queue", "queue_app", "resolve_db"]

queue_app = typer.Typer(
    help="The review queue: one entry per failing finding, grouped by reason.", no_args_is_help=True
)
app.add_typer(queue_app, name="queue")

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="SQLite path or PostgreSQL URL (default: $CITELOCK_DB or ./.citelock/citelock.db)"),
]
EntryIdArg = Annotated[str, typer.Argument(metavar="ID", help="entry id or a unique prefix (4+ characters)")]
OutcomeOption = Annotated[
    str, typer.Option("--outcome", help="accept | repair | escalate (an AUDIT_SAMPLE: accept | reject)")
]
CategoryOption = Annotated[
    str | None, typer.Option("--category", help="chunking | truncation | ranking (escalate only)")
]
ChunkOption = Annotated[str | None, typer.Option("--chunk", help="a better chunk id to cite (repair only)")]


def resolve_db(db: str | None, config: Path | None = None) -> str:
    """The database: ``--db``, else ``$CITELOCK_DB``, else the config's ``store``, else ``./.citelock/citelock.db``.

    The config file is ``--config`` or the discovered one. A SQLite path must exist (reading a queue never
    creates an empty database by accident).
    """
    target = db or os.environ.get("CITELOCK_DB") or config_store(config) or str(Path(".citelock") / "citelock.db")
    if "://" not in target and not Path(target).expanduser().is_file():
        fail(f"no citelock database at {target} (give --db PATH|URL or set CITELOCK_DB)")
    return target


def open_queue(db: str | None, config: Path | None = None) -> ReviewQueue:
    """Open the review queue, turning store errors into exit code 2."""
    target = resolve_db(db, config)
    try:
        with using_database(target):  # a database error names it, classified as in every command
            return ReviewQueue(target)
    except UsageError as exc:
        fail(f"cannot open the review queue at {target}: {exc}")


def _entry_json(entry: QueueEntry, history: list[Resolution]) -> dict[str, Any]:
    data = entry.model_dump(mode="json")
    data["resolution"] = history[-1].model_dump(mode="json") if history else None
    data["history"] = [event.model_dump(mode="json") for event in history]
    return data


def _event_line(event: Resolution) -> str:
    extra = [
        f"category={event.category}" if event.category else "",
        f"chunk={event.chunk_id}" if event.chunk_id else "",
        f"by {event.reviewer}" if event.reviewer else "",
    ]
    head = f"{event.outcome} at {event.resolved_at.isoformat()}"
    return " ".join([head, *(x for x in extra if x)])


def _short(text: str | None, width: int) -> str:
    if not text:
        return "-"
    return text if len(text) <= width else text[: width - 1] + "…"


@queue_app.command("list")
def list_entries(
    db: DbOption = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help=f"only this reason code ({', '.join(ReasonCode)})")
    ] = None,
    surface: Annotated[str | None, typer.Option("--surface", help="only this surface")] = None,
    status: Annotated[str, typer.Option("--status", help="open, resolved or all")] = "open",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    config: ConfigOption = None,
) -> None:
    """List queue entries grouped by reason code, largest group first, with counts."""
    note_surface(config, surface)
    queue = open_queue(db, config)
    try:
        groups = queue.grouped(reason=reason, surface=surface, status=status)  # type: ignore[arg-type]
    except UsageError as exc:
        fail(str(exc))
    if as_json:
        payload = {
            "counts": {r.value: len(es) for r, es in groups.items()},
            "total": sum(len(es) for es in groups.values()),
            "groups": {r.value: [e.model_dump(mode="json") for e in es] for r, es in groups.items()},
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        raise typer.Exit(EXIT_OK)

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    total = sum(len(es) for es in groups.values())
    console.print(f"{total} {status} entr{'y' if total == 1 else 'ies'} in {len(groups)} reason group(s)")
    for code, entries in groups.items():
        info = REASONS[code]
        if console.width < NARROW:  # too narrow for five columns: one plain line per entry, wrapped by the terminal
            typer.echo(f"{code.value} ({len(entries)}): {info.description}; what to do: {info.fix}")
            for e in entries:
                chunk = f" [{e.chunk_id}]" if e.chunk_id else ""
                typer.echo(f"  {e.id[:12]} {e.surface}{chunk} {e.created_at:%Y-%m-%d %H:%M}: {_short(e.claim, 60)!r}")
            continue
        table = Table(
            title=escape(f"{code.value} ({len(entries)})"),
            caption=escape(f"{info.description}; what to do: {info.fix}"),
        )
        # The id is what a reviewer types next (queue show ID): never cut. Surface and chunk fold rather than
        # lose their ends; the claim takes the width that is left.
        table.add_column("id", no_wrap=True, min_width=12)
        table.add_column("surface", overflow="fold")
        table.add_column("claim", ratio=1)
        table.add_column("chunk", overflow="fold")
        table.add_column("queued", overflow="fold")
        for e in entries:
            cells = (e.id[:12], e.surface, _short(e.claim, 60), e.chunk_id or "-", f"{e.created_at:%Y-%m-%d %H:%M}")
            table.add_row(*(escape(cell) for cell in cells))
        console.print(table)


@queue_app.command("show")
def show(
    entry_id: EntryIdArg,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Show everything about one entry: claim, passage, every layer's verdict, the prompt pointer, its outcomes."""
    queue = open_queue(db)
    try:
        entry = queue.get(entry_id)
        history = queue.history(entry.id)
    except KeyError:
        fail(f"no queue entry with id {entry_id!r}")
    except UsageError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(_entry_json(entry, history), ensure_ascii=False, indent=2))
        raise typer.Exit(EXIT_OK)
    lines = [
        ("id", entry.id),
        ("reason", f"{entry.reason.value} ({entry.layer.value})"),
        ("meaning", REASONS[entry.reason].description),
        ("what to do", REASONS[entry.reason].fix),
        ("surface", entry.surface),
        ("queued", f"{entry.created_at.isoformat()} (week {entry.week})"),
        ("prompt", f"request {entry.request_id}, sha256 {entry.prompt_sha256}"),
        ("claim", f"#{entry.claim_index}: {entry.claim}"),
        ("citation", f"#{entry.citation_index} -> {entry.chunk_id}" if entry.chunk_id else "-"),
        ("span", entry.span or "-"),
        ("passage", entry.passage or "-"),
        ("related chunk", entry.related_chunk_id or "-"),
        ("detail", entry.detail or "-"),
        ("verdicts", ", ".join(f"{k}={v}" for k, v in entry.verdicts.items()) or "-"),
        ("judge", f"{entry.judge_version or '-'}: {entry.judge_raw or '-'}"),
    ]
    if not history:
        lines.append(("resolution", "open"))
    else:
        current = history[-1]
        lines.append(("resolution", _event_line(current)))
        if current.note:
            lines.append(("note", current.note))
        for event in reversed(history[:-1]):  # superseded outcomes, newest first
            note = f" ({event.note})" if event.note else ""
            lines.append((f"superseded r{event.revision}", _event_line(event) + note))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        typer.echo(f"{key.rjust(width)}  {value}")


def _record(
    db: str | None,
    entry_id: str,
    outcome: str,
    *,
    note: str | None,
    category: str | None,
    chunk: str | None,
    reviewer: str | None,
    rereview: bool = False,
    revision: int | None = None,
) -> tuple[QueueEntry, Resolution]:
    """Record an entry's first outcome, or with ``rereview`` a new one: an unknown id or a refused event exits 2.

    The queue checks the values (outcome, category, a reviewer's name for a re-review) and names what it expected.
    """
    queue = open_queue(db)
    fields: dict[str, Any] = {"outcome": outcome, "note": note, "category": category, "chunk_id": chunk}
    try:
        entry = queue.get(entry_id)
        if rereview:
            return entry, queue.rereview(entry.id, reviewer=reviewer or "", revision=revision, **fields)
        return entry, queue.resolve(entry.id, reviewer=reviewer, **fields)
    except KeyError:
        fail(f"no queue entry with id {entry_id!r}")
    except UsageError as exc:
        fail(str(exc))


def _print_event(event: Resolution) -> None:
    typer.echo(json.dumps(event.model_dump(mode="json"), ensure_ascii=False, indent=2))


@queue_app.command("resolve")
def resolve(
    entry_id: EntryIdArg,
    outcome: OutcomeOption,
    note: Annotated[str | None, typer.Option("--note", help="what to change (required for repair)")] = None,
    category: CategoryOption = None,
    chunk: ChunkOption = None,
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="who resolved it")] = None,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the resolution as JSON")] = False,
) -> None:
    """Give an entry its first outcome: accept (finding was wrong), repair (answer must change), escalate.

    An entry that already has an outcome is refused (exit 2): changing it is `citelock queue rereview`.
    """
    entry, resolution = _record(db, entry_id, outcome, note=note, category=category, chunk=chunk, reviewer=reviewer)
    if as_json:
        _print_event(resolution)
    else:
        sample = " (stored as a calibration sample, label yes)" if outcome == "accept" and entry.calibratable else ""
        typer.echo(f"resolved {resolution.entry_id} as {resolution.outcome}{sample}")


@queue_app.command("rereview")
def rereview(
    entry_id: EntryIdArg,
    outcome: OutcomeOption,
    reviewer: Annotated[str, typer.Option("--reviewer", help="who re-reviewed it (required)")],
    note: Annotated[str | None, typer.Option("--note", help="why the outcome changes (required for repair)")] = None,
    category: CategoryOption = None,
    chunk: ChunkOption = None,
    revision: Annotated[
        int | None,
        typer.Option("--revision", min=0, help="the revision you reviewed (refused if someone re-reviewed since)"),
    ] = None,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the new event as JSON")] = False,
) -> None:
    """Record a new outcome for an entry that has one: an event that supersedes it (the old one stays in history)."""
    _, event = _record(
        db,
        entry_id,
        outcome,
        note=note,
        category=category,
        chunk=chunk,
        reviewer=reviewer,
        rereview=True,
        revision=revision,
    )
    if as_json:
        _print_event(event)
    else:
        typer.echo(
            f"re-reviewed {event.entry_id} as {event.outcome} by {event.reviewer} "
            f"(revision {event.revision}, supersedes revision {event.revision - 1})"
        )
