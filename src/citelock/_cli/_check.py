"""``citelock check``: guard an answer against the prompt it was generated from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from citelock._cli._app import EXIT_FINDINGS, EXIT_OK, app
from citelock._cli._io import fail, load_prompt, load_store_ids, read_json, read_text
from citelock._errors import ParseError, UsageError
from citelock._parse import parse_answer
from citelock._records import Answer, GuardReport, PromptRecord
from citelock.guard import PolicyResult, SurfacePolicy, guard
from citelock.guard import check as run_guard
from citelock.judges import CachedJudge, Judge, make_judge
from citelock.store import PromptLog, ResultStore, ReviewQueue

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
    judge: Annotated[
        str | None,
        typer.Option("--judge", help="also run the support judge ③ (offline, lexical or llm) under --surface/--stakes"),
    ] = None,
    judge_base_url: Annotated[
        str | None,
        typer.Option("--judge-base-url", help="--judge llm on an OpenAI-compatible server at this /v1 URL"),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option("--judge-model", help="--judge llm: a GGUF file, or with --judge-base-url the server's model"),
    ] = None,
    surface: Annotated[
        str | None,
        typer.Option(
            "--surface",
            help="surface name; with --db, findings go to the review queue and results are "
            "stored for `citelock metrics`",
        ),
    ] = None,
    stakes: Annotated[
        str, typer.Option("--stakes", help="high: judge every surviving citation, fail closed; low: sample")
    ] = "high",
    sample_rate: Annotated[
        float | None, typer.Option("--sample-rate", min=0.0, max=1.0, help="low stakes: fraction judged")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Check an answer's citations against the prompt exactly as sent (exit 0 ok, 1 findings, 2 bad input).

    Without --judge/--surface only the free deterministic checks run (provenance, coverage, numbers). With them,
    the tiered surface policy runs: the support judge on citations that survived the free checks (all of them on
    a high-stakes surface, a deterministic sample on a low-stakes one); with --db every finding is queued for
    review and the result stored for metrics.
    """
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
    if judge != "llm" and (judge_base_url is not None or judge_model is not None):
        fail("--judge-base-url and --judge-model need --judge llm")
    if judge is None and surface is None:
        report = run_guard(record, parsed, store=ids)
        out = report_json(report)
        passed = report.ok
    else:
        judge_spec = (judge, judge_base_url, judge_model) if judge else None
        result = _run_policy(record, parsed, ids, judge_spec, surface or "default", stakes, sample_rate, db)
        report = result.report
        out = {
            **report_json(report),
            "surface": result.surface,
            "decision": result.decision,
            "accounting": result.accounting.model_dump(mode="json"),
        }
        passed = result.decision == "pass"
    if as_json:
        typer.echo(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        _print_table(report)
        if "decision" in out:
            typer.echo(f"surface {out['surface']}: {out['decision']}; judge accounting: {out['accounting']}")
    raise typer.Exit(EXIT_OK if passed else EXIT_FINDINGS)


def _run_policy(
    record: PromptRecord,
    parsed: Answer,
    ids: set[str] | None,
    judge_spec: tuple[str, str | None, str | None] | None,
    surface: str,
    stakes: str,
    sample_rate: float | None,
    db: str | None,
) -> PolicyResult:
    if stakes not in ("high", "low"):
        fail(f"--stakes must be high or low, got {stakes!r}")
    rate = sample_rate if sample_rate is not None else (1.0 if judge_spec else 0.0)
    try:
        policy = SurfacePolicy.model_validate({"name": surface, "stakes": stakes, "sample_rate": rate})
        judge = CachedJudge(_make_judge(*judge_spec)) if judge_spec else None
        queue = ReviewQueue(db) if db is not None else None
        results = ResultStore(db) if db is not None else None
        return guard(record, parsed, policy=policy, judge=judge, store=ids, queue=queue, results=results)
    except (ValidationError, UsageError) as exc:
        fail(exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc))


def _make_judge(name: str, base_url: str | None, model: str | None) -> Judge:
    """The judge named on the command line: a server's model with a base URL, else a GGUF file for ``llm``."""
    if base_url is not None:
        return make_judge(name, base_url=base_url, api_model=model)
    return make_judge(name, model=Path(model) if model is not None else None)


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
