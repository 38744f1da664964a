"""``citelock check``: guard an answer against the prompt it was generated from."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock.cli._app import EXIT_FINDINGS, EXIT_OK, app, using_database
from citelock.cli._io import (
    database_target,
    fail,
    load_prompt,
    load_store_ids,
    loads_checked,
    read_text,
    shown,
    single_stdin,
    text_option,
)
from citelock.cli._report import ReportView, print_table, windowed_check, write_report_json
from citelock.cli._surface_options import NO_SURFACE, SurfaceOptions, SurfaceSetup, surface_options, surface_setup
from citelock.errors import ParseError
from citelock.guard import GuardResult
from citelock.prompt import parse_answer, parse_for_record
from citelock.records import Answer, PromptRecord
from citelock.store import PromptLog, ResultStore, ReviewQueue

__all__ = ["bulk_allocation", "check", "load_answer", "parse_loaded", "read_answer"]


def load_answer(path: Path, record: PromptRecord | None = None) -> Answer:
    """Read and parse an answer file (or ``-``): JSON when it is ``.json`` or starts with ``{``/``[``, else text.

    With ``record``, the answer is parsed under the rule the record's call applied (a constrained call's record
    takes its schema's JSON only, never free text: :func:`citelock.prompt.parse_for_record`).
    Exit 2 with the file, the field and what was expected when it is unreadable or malformed.
    """
    return parse_loaded(read_answer(path), path, record)


def read_answer(path: Path) -> Any:
    """An answer file's content, not yet parsed: its JSON value when it is JSON, else its text (exit 2: unreadable)."""
    text = read_text(path, "answer")
    if path.suffix == ".json" or text.lstrip().startswith(("{", "[")):
        data = loads_checked(text, f"answer file {shown(path)}")
        del text  # the parsed answer keeps what it needs; drop the raw text before parsing
        return data
    return text


def parse_loaded(content: Any, path: Path, record: PromptRecord | None) -> Answer:
    """Parse what :func:`read_answer` read, for ``record`` when it is known (exit 2 naming the file if malformed)."""
    try:
        return parse_answer(content) if record is None else parse_for_record(content, record)
    except ParseError as exc:
        fail(f"answer file {shown(path)}: {exc}")


@app.command()
@surface_options
def check(
    answer: Annotated[
        Path,
        typer.Option("--answer", help='ANSWER.json: {"claims": [...]} or {"text": "..."}, or free text; - reads stdin'),
    ],
    prompt: Annotated[
        Path | None,
        typer.Option("--prompt", help="PROMPT.json: messages as sent + chunks, or a logged record; - reads stdin"),
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option("--store", help="CHUNKS.jsonl: the chunk store (stale vs fabricated ids); - reads stdin"),
    ] = None,
    request_id: Annotated[
        str | None,
        typer.Option("--request-id", help="replay a prompt from the log (with --db) instead of --prompt"),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="prompt log (SQLite path or URL): source for --request-id; with --prompt, "
            "the prompt is appended to it (once); with a surface, findings are queued and results stored there",
        ),
    ] = None,
    options: SurfaceOptions = NO_SURFACE,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Check an answer's citations against the prompt exactly as sent.

    Without --judge/--surface/--on-fail/--calibration only the free deterministic checks run (provenance,
    coverage, numbers). With any of them, the tiered surface policy runs: the support judge on citations that
    survived the free checks (all of them on a high-stakes surface, a deterministic sample on a low-stakes one),
    each routed to pass, review or fail; --on-fail decides whether a failing claim blocks the answer or is
    dropped or marked; with --db every finding is queued for review and the result stored for metrics.

    Every option and input file is checked before anything is written to --db. Time and memory grow linearly
    with the answer's size (see the docs' Measured page).
    """
    if (prompt is None) == (request_id is None):
        fail("give exactly one of --prompt PROMPT.json or --request-id ID (with --db)")
    if request_id is not None and db is None:
        fail("--request-id needs --db, the prompt log to read it from")
    if request_id is not None:
        text_option("--request-id", request_id)
    single_stdin(answer=answer, prompt=prompt, store=store)
    if db is not None:
        database_target(db)
    setup = surface_setup(options)
    if db is None and setup is not None and setup.config is not None and setup.config.store is not None:
        db = database_target(setup.config.store)  # the config's store (or $CITELOCK_DB) for its surfaces
    if request_id is not None and db is not None and "://" not in db and not Path(db).expanduser().is_file():
        fail(f"--db {shown(db)}: no prompt log there to replay --request-id {request_id!r} from")
    with bulk_allocation():
        relevance = options.relevance != "off"
        passed = _check_and_print(answer, store, prompt, request_id, db, setup, as_json=as_json, relevance=relevance)
    raise typer.Exit(EXIT_OK if passed else EXIT_FINDINGS)


@contextmanager
def bulk_allocation() -> Iterator[None]:
    """Pause the cyclic garbage collector while a long answer's records are built (they hold no cycles).

    Building hundreds of thousands of records triggers full collections that each walk every object built so
    far; pausing them saves a fifth to a third of the time on a 10 MB answer. Reference counting still frees
    everything; the collector runs again on exit.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check_and_print(
    answer: Path,
    store: Path | None,
    prompt: Path | None,
    request_id: str | None,
    db: str | None,
    setup: SurfaceSetup | None,
    *,
    as_json: bool,
    relevance: bool = True,
) -> bool:
    """Read the inputs, then (only then) open the database, guard, print; True when the answer passes.

    The answer is parsed under the rule its record's call applied (a constrained call's record takes its schema's
    JSON only): with --prompt before the database is opened, with --request-id once the record is read from the
    log and before anything is written.
    """
    content = read_answer(answer)
    ids = load_store_ids(store) if store is not None else None
    record = load_prompt(prompt) if prompt is not None else None
    parsed = parse_loaded(content, answer, record) if record is not None else None
    # Every input is read and valid: only now is the database opened (its tables created) and written.
    with using_database(db or "-"):
        log = PromptLog(db) if db is not None else None
        if record is None:
            assert log is not None and request_id is not None
            try:
                record = log.get(request_id)
            except KeyError:
                fail(f"request id {request_id!r} is not in the prompt log {shown(db or '')}")
        elif log is not None:  # logged once: membership and append are one transaction (same record: no error)
            assert parsed is not None
            record = log.append_if_absent(record)
        if parsed is None:
            parsed = parse_loaded(content, answer, record)
        del content  # the parsed answer keeps what it needs
        queue = ReviewQueue(db) if db is not None and setup is not None else None
        results = ResultStore(db) if db is not None and setup is not None else None
        if setup is None:
            with windowed_check(record, parsed, known_ids=ids, relevance=relevance) as view:
                del parsed  # each window keeps what it needs
                _print(view, None, as_json=as_json)
                return view.ok
        result = setup.guard.run(record, parsed, known_ids=ids)
        if queue is not None and results is not None:  # the guard writes nothing: the command persists
            queue.enqueue_result(result)
            results.append(result)
    del parsed  # the result keeps what it needs; drop the rest before printing
    _print(ReportView.of(result.report), result, as_json=as_json)
    return result.decision == "pass"


def _print(view: ReportView, result: GuardResult | None, *, as_json: bool) -> None:
    if as_json:
        write_report_json(view, result)
        return
    print_table(view)
    if result is not None:
        _print_outcome(result)


def _print_outcome(result: GuardResult) -> None:
    how = {"pass": "pass", "repaired": "repaired (served without / marking failing claims)", "block": "BLOCKED"}
    on_fail = result.policy.on_fail if result.policy is not None else "block"
    typer.echo(f"surface {result.surface} (on_fail={on_fail}): {how[result.decision]}")
    for o in result.claims:
        if o.action != "serve":
            typer.echo(f"  claim {o.claim_index} {o.action}: {', '.join(r.value for r in o.reasons)}")
    typer.echo(f"judge accounting: {result.accounting.model_dump(mode='json')}")
