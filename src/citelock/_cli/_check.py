"""``citelock check``: guard an answer against the prompt it was generated from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from citelock._cli._app import EXIT_FINDINGS, EXIT_OK, app
from citelock._cli._io import fail, load_prompt, load_store_ids, read_json, read_text
from citelock._errors import ParseError
from citelock._parse import parse_answer
from citelock._records import GuardReport
from citelock.guard import check as run_guard
from citelock.store import PromptLog

__all__ = ["check", "report_json"]


def report_json(report: GuardReport) -> dict[str, object]:
    """The ``--json`` shape: ``ok``, ``findings`` (reason, claim, chunk_id, span, ...) and ``counts``."""
    return {
        "ok": report.ok,
        "request_id": report.request_id,
        "prompt_sha256": report.prompt_sha256,
        "findings": [f.model_dump(mode="json") for f in report.findings],
        "counts": report.counts,
        "citations": [c.model_dump(mode="json") for c in report.citations],
        "claims": [c.model_dump(mode="json") for c in report.claims],
    }


@app.command()
def check(
    answer: Annotated[Path, typer.Option("--answer", help='ANSWER.json: {"claims": [...]} or {"text": "..."}')],
    prompt: Annotated[
        Path | None,
        typer.Option("--prompt", help="PROMPT.json: messages as sent + chunks, or a logged record"),
    ] = None,
    store: Annotated[
        Path | None, typer.Option("--store", help="CHUNKS.jsonl: the chunk store (stale vs fabricated ids)")
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
            "the prompt is appended to it (once)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Check an answer's citations against the prompt exactly as sent (exit 0 ok, 1 findings, 2 bad input)."""
    if (prompt is None) == (request_id is None):
        fail("give exactly one of --prompt PROMPT.json or --request-id ID (with --db)")
    if request_id is not None and db is None:
        fail("--request-id needs --db, the prompt log to read it from")
    raw = read_json(answer, "answer") if answer.suffix == ".json" else read_text(answer, "answer")
    try:
        parsed = parse_answer(raw)
    except ParseError as exc:
        fail(f"answer file {answer}: {exc}")
    ids = load_store_ids(store) if store is not None else None
    log = PromptLog(db) if db is not None else None
    if prompt is not None:
        record = load_prompt(prompt)
        if log is not None and record.request_id not in log:
            log.append(record)
    else:
        assert log is not None and request_id is not None
        try:
            record = log.get(request_id)
        except KeyError:
            fail(f"request id {request_id!r} is not in the prompt log {db}")
    report = run_guard(record, parsed, store=ids)
    if as_json:
        typer.echo(json.dumps(report_json(report), ensure_ascii=False, indent=2))
    else:
        _print_table(report)
    raise typer.Exit(EXIT_OK if report.ok else EXIT_FINDINGS)


def _print_table(report: GuardReport) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    cited = len(report.citations)
    passed = sum(c.passed for c in report.citations)
    factual = sum(c.factual for c in report.claims)
    console.print(
        f"request {report.request_id}: {len(report.claims)} claims ({factual} factual), "
        f"{passed}/{cited} citations pass provenance — {'OK' if report.ok else 'FAILED'}"
    )
    if not report.findings:
        return
    table = Table("reason", "claim", "chunk", "span", "detail", show_lines=False)
    for f in report.findings:
        table.add_row(
            f.reason.value,
            _short(f.claim, 60),
            f.chunk_id or "-",
            _short(f.span or "", 40) or "-",
            f.detail + (f" (see {f.related_chunk_id})" if f.related_chunk_id else ""),
        )
    console.print(table)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
