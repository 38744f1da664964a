"""The figures of an audit: what committed report rows found and cost, and the audit's summary.

:class:`PartFigures` add up (one part, or the whole audit); :class:`AuditSummary` puts the whole audit's figures
beside this run's.

:class:`~citelock.audit.AuditSink` writes each part's figures beside the part and adds them up into the summary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from citelock.audit._work import AuditOutcome

__all__ = ["BAD_ROWS_KEPT", "AuditSummary", "PartFigures"]

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
        if not self.add_report(outcome.report):
            return
        result = outcome.result
        if result is not None:
            self.queued += len(result.report.findings) if queued else 0
            accounting = result.accounting.model_dump()
            for name in _JUDGE_FIELDS:
                self.judge[name] = self.judge.get(name, 0) + int(accounting.get(name, 0))

    def add_report(self, report: dict[str, Any], *, every_example: bool = False) -> bool:
        """Count what one report row found (not its cost: see :meth:`add_outcome`); False for a bad row.

        ``every_example``: list a bad row in ``bad_examples`` even past :data:`BAD_ROWS_KEPT`.
        """
        if report.get("error") is not None:
            self.bad_rows += 1
            if every_example or len(self.bad_examples) < BAD_ROWS_KEPT:
                self.bad_examples.append([report["source"], report["row"], report["error"]])
            return False
        self.answers += 1
        decision = report.get("decision")
        self.passed += bool(decision == "pass" if decision is not None else report.get("ok"))
        self.citations += len(report.get("citations") or ())
        for reason, count in (report.get("counts") or {}).items():
            self.findings += count
            self.findings_by_reason[reason] = self.findings_by_reason.get(reason, 0) + count
        if decision is not None:
            self.decisions[decision] = self.decisions.get(decision, 0) + 1
        return True

    def subtract(self, gone: PartFigures) -> None:
        """Take away what superseded rows found (``gone``, from :meth:`add_report`); the cost figures stay."""
        self.answers -= gone.answers
        self.bad_rows -= gone.bad_rows
        self.passed -= gone.passed
        self.citations -= gone.citations
        self.findings -= gone.findings
        for mine, theirs in ((self.findings_by_reason, gone.findings_by_reason), (self.decisions, gone.decisions)):
            for name, count in theirs.items():
                left = mine.get(name, 0) - count
                if left:
                    mine[name] = left
                else:
                    mine.pop(name, None)
        if gone.bad_examples:
            dropped = {json.dumps(example) for example in gone.bad_examples}
            self.bad_examples = [e for e in self.bad_examples if json.dumps(e) not in dropped]

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
        superseded: Report rows replaced by a newer version of their input row (edited since it was committed)
            or whose input row is gone, in the whole audit; ``figures`` no longer count them.
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
    superseded: int = 0

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
            "superseded": self.superseded,
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
