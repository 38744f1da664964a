"""Batch audit of logged traffic: guard many answers, resumably, on one machine or a Ray cluster.

Read answers (:func:`read_items`: JSONL / Parquet rows exported from another system, or the prompt log with its
answers), guard each (:func:`prepare` then :func:`judge_prepared`, the same in every engine), and commit the
report rows, review-queue entries and results exactly once.
"""

from citelock.audit._figures import AuditSummary, PartFigures
from citelock.audit._local import run_local
from citelock.audit._report import read_report
from citelock.audit._rows import (
    AnswerRow,
    AuditItem,
    AuditRow,
    ReadStats,
    answer_row_schema,
    input_kind,
    read_items,
    row_schema,
)
from citelock.audit._run import ray_engine, run_audit
from citelock.audit._sink import AuditSink
from citelock.audit._work import (
    AuditOutcome,
    AuditSettings,
    Prepared,
    audit_item,
    derived_request_id,
    judge_prepared,
    prepare,
)

__all__ = [
    "AnswerRow",
    "AuditItem",
    "AuditOutcome",
    "AuditRow",
    "AuditSettings",
    "AuditSink",
    "AuditSummary",
    "PartFigures",
    "Prepared",
    "ReadStats",
    "answer_row_schema",
    "audit_item",
    "derived_request_id",
    "input_kind",
    "judge_prepared",
    "prepare",
    "ray_engine",
    "read_items",
    "read_report",
    "row_schema",
    "run_audit",
    "run_local",
]
