"""What ``citelock check`` prints, and the deterministic guard run window by window so memory stays bounded.

A long answer is guarded in windows of at most :data:`WINDOW_CLAIMS` claims and :data:`WINDOW_CITATIONS`
citations (a single claim is never split) with :func:`citelock.guard.check` (every
deterministic check is per claim or per citation), each window's records written as JSON lines to spooled
temporary files (in memory up to a few MB, then on disk) and dropped. The printed report is the same as for one
run over the whole answer: claim indexes count from the answer's start, findings come in the guard's order
(provenance, then coverage, then numbers) and ``counts`` in order of first appearance.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Collection, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, Any

import typer

from citelock.audit._report_row import Elements, ReportView, check_fields, policy_fields
from citelock.guard import GuardResult, PromptIndex, check_relevance
from citelock.guard import check as run_guard
from citelock.guard._relevance import relevance_finding
from citelock.records import Answer, ClaimCheck, Finding, Layer, PromptRecord, ReasonCode

__all__ = [
    "NARROW",
    "REASON_WIDTH",
    "WINDOW_CITATIONS",
    "WINDOW_CLAIMS",
    "ReportView",
    "console",
    "print_table",
    "windowed_check",
    "write_report_json",
]

WINDOW_CLAIMS = 2_000
"""Claims guarded at a time by :func:`windowed_check`, at most."""

WINDOW_CITATIONS = 20_000
"""Citations guarded at a time by :func:`windowed_check`, at most (unless one claim has more)."""

REASON_WIDTH = max(len(code.value) for code in ReasonCode)
"""The longest reason code: the table's reason column is never narrower, so no code is ever cut."""

_SPOOL_BYTES = 8 * 1024 * 1024
_LAYER_ORDER = (Layer.PROVENANCE, Layer.COVERAGE, Layer.NUMBERS, Layer.RELEVANCE)
NARROW = 64
"""Below this many columns the findings (and ``queue list``'s entries) are printed as lines, not as tables."""
_TABLE_ROWS = 500
"""Findings per printed table: a long report is printed as consecutive tables, so memory stays flat."""


class _Spool:
    """JSON lines kept in memory up to a few MB, then in a temporary file."""

    def __init__(self, stack: ExitStack) -> None:
        spooled = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES, mode="w+", encoding="utf-8")  # noqa: SIM115
        self._file: IO[str] = stack.enter_context(spooled)  # closed with the stack

    def add(self, line: str) -> None:
        self._file.write(line)
        self._file.write("\n")

    def lines(self) -> Iterator[str]:
        self._file.seek(0)
        for line in self._file:
            yield line.rstrip("\n")


def _shifted(model: Any, start: int) -> Any:
    return model.model_copy(update={"claim_index": model.claim_index + start}) if start else model


@contextmanager
def windowed_check(
    record: PromptRecord, answer: Answer, *, known_ids: Collection[str] | None = None, relevance: bool = True
) -> Iterator[ReportView]:
    """Run the deterministic guard window by window; the view is valid inside the block.

    ``relevance=False`` leaves out the free relevance check (``--relevance off``).

    Memory holds the parsed answer and one window's records (at most :data:`WINDOW_CLAIMS` claims and
    :data:`WINDOW_CITATIONS` citations, or one claim with more), whatever the answer's length.
    """
    with ExitStack() as stack:
        findings = {layer: _Spool(stack) for layer in _LAYER_ORDER}
        other = _Spool(stack)  # a layer the deterministic guard does not produce today: kept, printed last
        citations, claims = _Spool(stack), _Spool(stack)
        counts: dict[Layer | None, dict[str, int]] = {}
        totals = {"claims": 0, "factual": 0, "citations": 0, "passed": 0}
        bounds = list(_windows(answer))
        all_claims: list[ClaimCheck] = []
        first_cited: dict[int, str] = {}  # claim -> its first citation that passed provenance
        for start, end in bounds:
            window = answer
            if len(bounds) > 1:
                window = answer.model_copy(update={"claims": answer.claims[start:end]})
            report = run_guard(record, window, known_ids=known_ids, relevance=False)  # per answer: after the windows
            for f in report.findings:
                layer = f.layer if f.layer in findings else None
                (findings[f.layer] if layer is not None else other).add(_shifted(f, start).model_dump_json())
                per_layer = counts.setdefault(layer, {})
                per_layer[f.reason.value] = per_layer.get(f.reason.value, 0) + 1
            for c in report.citations:
                citations.add(_shifted(c, start).model_dump_json())
            for c in report.citations:
                if c.passed:
                    first_cited.setdefault(c.claim_index + start, c.chunk_id)
            for k in report.claims:
                claims.add(_shifted(k, start).model_dump_json())
                all_claims.append(_shifted(k, start))
            totals["claims"] += len(report.claims)
            totals["factual"] += sum(k.factual for k in report.claims)
            totals["citations"] += len(report.citations)
            totals["passed"] += sum(c.passed for c in report.citations)
        off = _relevance(record, answer, all_claims, first_cited) if relevance else None  # over every window
        if off is not None:
            findings[Layer.RELEVANCE].add(off.model_dump_json())
            counts.setdefault(Layer.RELEVANCE, {})[off.reason.value] = 1
        del answer, window, report  # the records are spooled: the parsed answer can go before printing
        merged: dict[str, int] = {}
        for layer in (*_LAYER_ORDER, None):
            merged.update(counts.get(layer, {}))

        def all_findings() -> Iterator[str]:
            for layer in _LAYER_ORDER:
                yield from findings[layer].lines()
            yield from other.lines()

        yield ReportView(
            request_id=record.request_id,
            prompt_sha256=record.sha256,
            ok=not merged,
            counts=merged,
            findings=all_findings,
            citation_checks=citations.lines,
            claim_checks=claims.lines,
            **totals,
        )


def _relevance(
    record: PromptRecord, answer: Answer, claims: list[ClaimCheck], first_cited: dict[int, str]
) -> Finding | None:
    """The free relevance check of the whole answer (it is per answer, so it runs once after the windows)."""
    if not record.question:
        return None
    index = PromptIndex.build(record)
    passages = [
        index.body(index.by_id[cid]) if (cid := first_cited.get(i)) is not None and cid in index.by_id else None
        for i in range(len(answer.claims))
    ]
    check = check_relevance(record.question, answer, claims, passages)
    return relevance_finding(record, answer, check) if check is not None else None


def _windows(answer: Answer) -> Iterator[tuple[int, int]]:
    """``(start, end)`` claim ranges of at most WINDOW_CLAIMS claims and WINDOW_CITATIONS citations (one if empty)."""
    start = cited = 0
    for index, claim in enumerate(answer.claims):
        if index > start and (index - start >= WINDOW_CLAIMS or cited + len(claim.citations) > WINDOW_CITATIONS):
            yield start, index
            start, cited = index, 0
        cited += len(claim.citations)
    yield start, max(len(answer.claims), start)


def write_report_json(view: ReportView, result: GuardResult | None = None) -> None:
    """Print the ``--json`` report, streamed element by element.

    The shape (:mod:`citelock.audit._report_row`, which an audit's report rows share): ``ok``, ``request_id``,
    ``prompt_sha256``, ``findings`` (reason, claim, chunk_id, span, ...), ``counts``, ``citations``, ``claims``;
    with a surface also ``surface``, ``decision``, ``on_fail``, ``outcomes``, ``routes``, ``accounting`` and
    ``policy`` (the surface policy that ran: stakes, audit plan, routing, ...).
    """
    fields = check_fields(view)
    if result is not None:
        fields += policy_fields(result)
    write = sys.stdout.write
    write("{")
    for number, (key, value) in enumerate(fields):
        write(("\n" if number == 0 else ",\n") + f"  {json.dumps(key)}: ")
        if isinstance(value, Elements):
            empty = True
            for item in value.texts():
                write(("[\n    " if empty else ",\n    ") + item)
                empty = False
            write("[]" if empty else "\n  ]")
        else:
            write(json.dumps(value, ensure_ascii=False))
    write("\n}\n")
    sys.stdout.flush()


def console() -> Any:
    """A rich console whose broken pipe exits 141 like the rest of the command line (rich's own exits 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return _Console()


def print_table(view: ReportView) -> None:
    """The readable report: a summary line, then the findings in tables (as lines on a narrow terminal)."""
    out = console()
    out.print(
        f"request {view.request_id}: {view.claims} claims ({view.factual} factual), "
        f"{view.passed}/{view.citations} citations pass provenance — {'OK' if view.ok else 'FAILED'}",
        markup=False,
        highlight=False,
    )
    rows = Elements(view.findings()).values()
    if out.width < NARROW:  # too narrow for five columns: one plain line per finding, wrapped by the terminal
        for f in rows:
            where = f" [{f['chunk_id']}]" if f["chunk_id"] else ""
            see = f" (see {f['related_chunk_id']})" if f["related_chunk_id"] else ""
            typer.echo(f"{f['reason']}{where}: {_short(f['claim'], 60)!r} — {f['detail']}{see}")
        return
    batch: list[dict[str, Any]] = []
    first = True
    for f in rows:
        batch.append(f)
        if len(batch) == _TABLE_ROWS:
            _print_rows(out, batch, header=first)
            batch, first = [], False
    if batch:
        _print_rows(out, batch, header=first)


def _print_rows(out: Any, rows: list[dict[str, Any]], *, header: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False, show_header=header)
    table.add_column("reason", min_width=REASON_WIDTH, no_wrap=True)
    table.add_column("claim", ratio=3)
    table.add_column("chunk", overflow="fold")
    table.add_column("span", ratio=2)
    table.add_column("detail", ratio=3)
    for f in rows:
        table.add_row(
            Text(f["reason"]),
            Text(_short(f["claim"], 60)),
            Text(f["chunk_id"] or "-"),
            Text(_short(f["span"] or "", 40) or "-"),
            Text(f["detail"] + (f" (see {f['related_chunk_id']})" if f["related_chunk_id"] else "")),
        )
    out.print(table)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
