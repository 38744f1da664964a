"""``citelock check``: guard an answer against the prompt it was generated from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from citelock.cli._app import EXIT_FINDINGS, EXIT_OK, app
from citelock.cli._io import fail, load_prompt, load_store_ids, read_json, read_text
from citelock.errors import CitelockError, ParseError, UsageError
from citelock.guard import Guard, GuardResult, SurfacePolicy, resolve_routing
from citelock.judges import DEFAULT_JUDGE, Judge, make_judge
from citelock.judges._routing import Routing, load_surface_routing
from citelock.prompt._parse import parse_answer
from citelock.records import GuardReport
from citelock.store import CachedJudge, PromptLog, ResultStore, ReviewQueue

__all__ = [
    "CALIBRATION_HELP",
    "ESCALATE_HELP",
    "ON_FAIL_HELP",
    "SurfaceOptions",
    "check",
    "policy_json",
    "report_json",
    "surface_options",
]

ON_FAIL_HELP = (
    "what a failing claim does: block (refuse the whole answer, the default), drop_claim (serve the answer "
    "without it), mark (serve it marked unverified); its findings are queued either way"
)
ESCALATE_HELP = (
    "escalate citations the calibrated routing sends to review to the LLM judge on this OpenAI-compatible "
    "server (/v1 URL, its first listed model); without it they go to the review queue as UNCERTAIN_SUPPORT"
)
CALIBRATION_HELP = (
    "CALIBRATION.json (citelock calibrate --fit --write): route the judge's scores with the thresholds for "
    "this surface's name, else its '*' entry; they must have been calibrated for the judge in use"
)


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


def policy_json(result: GuardResult) -> dict[str, object]:
    """The surface part of ``--json``: ``surface``, ``decision``, ``on_fail``, ``outcomes``, ``accounting``."""
    return {
        "surface": result.surface,
        "decision": result.decision,
        "on_fail": result.policy.on_fail if result.policy is not None else None,
        "outcomes": [o.model_dump(mode="json") for o in result.claims],
        "routes": [
            s.model_dump(mode="json", include={"claim_index", "citation_index", "route", "score"})
            for s in result.support
        ],
        "accounting": result.accounting.model_dump(mode="json"),
    }


@dataclass(frozen=True)
class SurfaceOptions:
    """A surface policy and its judge, built from the command line and checked before anything is written."""

    policy: SurfacePolicy
    judge: Judge | None
    escalate: Judge | None = None


def surface_options(
    *,
    surface: str | None,
    stakes: str,
    sample_rate: float | None,
    judge: str | None,
    judge_base_url: str | None,
    judge_model: str | None,
    on_fail: str | None,
    calibration: Path | None,
    escalate_base_url: str | None = None,
) -> SurfaceOptions | None:
    """Validate the surface options (exit 2 with a clear message on bad usage) before any file is written.

    The surface policy runs when any of ``--surface``, ``--judge``, ``--on-fail`` or ``--calibration`` is
    given (surface name ``default`` when ``--surface`` is not). A surface that judges (high stakes, or a
    sample rate above 0) without ``--judge`` uses the default judge (:data:`citelock.judges.DEFAULT_JUDGE`), as
    :func:`citelock.answer` does.

    Returns:
        The policy and judge, or None when only the free deterministic checks were asked for.
    """
    if judge != "llm" and (judge_base_url is not None or judge_model is not None):
        fail("--judge-base-url and --judge-model need --judge llm")
    if escalate_base_url is not None and calibration is None:
        fail("--escalate-base-url escalates citations routed to review: give --calibration (a routing) too")
    if surface is None and judge is None and on_fail is None and calibration is None:
        if sample_rate is not None:
            fail("--sample-rate needs a surface policy: give --surface NAME (or --judge)")
        return None
    if stakes not in ("high", "low"):
        fail(f"--stakes must be high or low, got {stakes!r}")
    if on_fail is not None and on_fail not in ("block", "drop_claim", "mark"):
        fail(f"--on-fail must be block, drop_claim or mark, got {on_fail!r}")
    name = surface or "default"
    rate = sample_rate if sample_rate is not None else (1.0 if judge or stakes == "high" else 0.0)
    judge_name = judge or (DEFAULT_JUDGE if stakes == "high" or rate > 0 else None)
    routing: Routing | None = None
    if calibration is not None:
        try:
            routing = load_surface_routing(calibration, name)
        except CitelockError as exc:
            fail(str(exc))
    try:
        policy = SurfacePolicy.model_validate(
            {"name": name, "stakes": stakes, "sample_rate": rate, "routing": routing, "on_fail": on_fail or "block"}
        )
        built = CachedJudge(_make_judge(judge_name, judge_base_url, judge_model)) if judge_name else None
        resolve_routing(policy, built)
        stronger = CachedJudge(_make_judge("llm", escalate_base_url, None)) if escalate_base_url else None
    except ValidationError as exc:
        fail(str(exc.errors()[0]["msg"]))
    except UsageError as exc:
        fail(str(exc))
    except CitelockError as exc:  # e.g. a judge server that cannot be reached
        fail(f"cannot set up the judge: {exc}")
    return SurfaceOptions(policy, built, stronger)


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
        typer.Option(
            "--judge",
            help="run the support judge ③ (offline, lexical or llm) under --surface/--stakes "
            f"(a judging surface without --judge uses {DEFAULT_JUDGE})",
        ),
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
    on_fail: Annotated[str | None, typer.Option("--on-fail", help=ON_FAIL_HELP)] = None,
    calibration: Annotated[Path | None, typer.Option("--calibration", help=CALIBRATION_HELP)] = None,
    escalate_base_url: Annotated[str | None, typer.Option("--escalate-base-url", help=ESCALATE_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Check an answer's citations against the prompt exactly as sent.

    Without --judge/--surface/--on-fail/--calibration only the free deterministic checks run (provenance,
    coverage, numbers). With any of them, the tiered surface policy runs: the support judge on citations that
    survived the free checks (all of them on a high-stakes surface, a deterministic sample on a low-stakes one),
    each routed to pass, review or fail; --on-fail decides whether a failing claim blocks the answer or is
    dropped or marked; with --db every finding is queued for review and the result stored for metrics.

    Exit 0 when the answer passes clean, 1 on findings (answer repaired or blocked), 2 on bad usage or input;
    options are checked before anything is written to --db.
    """
    if (prompt is None) == (request_id is None):
        fail("give exactly one of --prompt PROMPT.json or --request-id ID (with --db)")
    if request_id is not None and db is None:
        fail("--request-id needs --db, the prompt log to read it from")
    options = surface_options(
        surface=surface,
        stakes=stakes,
        sample_rate=sample_rate,
        judge=judge,
        judge_base_url=judge_base_url,
        judge_model=judge_model,
        on_fail=on_fail,
        calibration=calibration,
        escalate_base_url=escalate_base_url,
    )
    try:  # built before anything is read or written: a routing made for another judge fails here
        checker = Guard() if options is None else Guard(options.policy, options.judge, escalate=options.escalate)
    except UsageError as exc:
        fail(str(exc))
    raw = read_json(answer, "answer") if answer.suffix == ".json" else read_text(answer, "answer")
    try:
        parsed = parse_answer(raw)
    except ParseError as exc:
        fail(f"answer file {answer}: {exc}")
    ids = load_store_ids(store) if store is not None else None
    record = load_prompt(prompt) if prompt is not None else None
    log = PromptLog(db) if db is not None else None
    if record is not None:
        if log is not None and record.request_id not in log:
            log.append(record)
    else:
        assert log is not None and request_id is not None
        try:
            record = log.get(request_id)
        except KeyError:
            fail(f"request id {request_id!r} is not in the prompt log {db}")
    outcome = checker.run(record, parsed, store=ids)
    report = outcome.report
    result: GuardResult | None = None
    if options is None:
        out = report_json(report)
        passed = report.ok
    else:
        result = outcome
        if db is not None:  # the guard writes nothing: the command persists what it found
            ReviewQueue(db).enqueue(report.findings, surface=options.policy.name, week=result.week)
            ResultStore(db).append(result)
        out = {**report_json(report), **policy_json(result)}
        passed = result.decision == "pass"
    if as_json:
        typer.echo(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        _print_table(report)
        if result is not None:
            _print_outcome(result)
    raise typer.Exit(EXIT_OK if passed else EXIT_FINDINGS)


def _print_outcome(result: GuardResult) -> None:
    how = {"pass": "pass", "repaired": "repaired (served without / marking failing claims)", "block": "BLOCKED"}
    on_fail = result.policy.on_fail if result.policy is not None else "block"
    typer.echo(f"surface {result.surface} (on_fail={on_fail}): {how[result.decision]}")
    for o in result.claims:
        if o.action != "serve":
            typer.echo(f"  claim {o.claim_index} {o.action}: {', '.join(r.value for r in o.reasons)}")
    typer.echo(f"judge accounting: {result.accounting.model_dump(mode='json')}")


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
