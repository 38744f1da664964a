"""Exports of reviewed outcomes: the fix list (CSV or JSON lines) and hand labels for ``citelock calibrate``.

- The **fix list** has one row per reviewed entry, its current outcome: what the content or retrieval team
  changes (the claim, the cited chunk and span, the outcome, the escalation category, the better chunk, the
  note) and who decided when. Columns: :data:`FIX_LIST_COLUMNS`.
- The **labels** are the queue's calibration samples (accepted support findings, human label ``yes``) as JSON
  lines ``{"id", "claim", "passage", "label", ...}``: the format ``citelock calibrate --format labels`` reads.

A CSV opened in a spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage
return) as a formula, and claims come from models and the web: such a cell is written with a leading ``'``
(the usual defence), and the JSON lines keep every value exactly.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from citelock.reasons import REASONS
from citelock.store import CalibrationSample, QueueEntry, Resolution

__all__ = ["FIX_LIST_COLUMNS", "fix_list_csv", "fix_list_jsonl", "fix_list_row", "labels_jsonl"]

FIX_LIST_COLUMNS = (
    "entry_id",
    "surface",
    "week",
    "reason",
    "meaning",
    "what_to_do",
    "request_id",
    "claim_index",
    "claim",
    "chunk_id",
    "span",
    "related_chunk_id",
    "outcome",
    "category",
    "better_chunk_id",
    "note",
    "reviewer",
    "resolved_at",
    "revision",
)

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def fix_list_row(entry: QueueEntry, resolution: Resolution) -> dict[str, Any]:
    """One fix-list row (keys: :data:`FIX_LIST_COLUMNS`)."""
    info = REASONS[entry.reason]
    return {
        "entry_id": entry.id,
        "surface": entry.surface,
        "week": entry.week,
        "reason": entry.reason.value,
        "meaning": info.description,
        "what_to_do": info.fix,
        "request_id": entry.request_id,
        "claim_index": entry.claim_index,
        "claim": entry.claim,
        "chunk_id": entry.chunk_id,
        "span": entry.span,
        "related_chunk_id": entry.related_chunk_id,
        "outcome": resolution.outcome,
        "category": resolution.category,
        "better_chunk_id": resolution.chunk_id,
        "note": resolution.note,
        "reviewer": resolution.reviewer,
        "resolved_at": resolution.resolved_at.isoformat(),
        "revision": resolution.revision,
    }


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def fix_list_csv(items: Iterable[tuple[QueueEntry, Resolution]]) -> Iterator[str]:
    """The fix list as CSV text, a header then one chunk of text per row (for streaming)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow(FIX_LIST_COLUMNS)
    yield flush()
    for entry, resolution in items:
        row = fix_list_row(entry, resolution)
        writer.writerow([_cell(row[name]) for name in FIX_LIST_COLUMNS])
        yield flush()


def fix_list_jsonl(items: Iterable[tuple[QueueEntry, Resolution]]) -> Iterator[str]:
    """The fix list as JSON lines, one line per row."""
    for entry, resolution in items:
        yield json.dumps(fix_list_row(entry, resolution), ensure_ascii=False) + "\n"


def labels_jsonl(samples: Iterable[CalibrationSample]) -> Iterator[str]:
    """Hand labels ``{"id", "claim", "passage", "label", ...}`` for ``citelock calibrate --format labels``."""
    for sample in samples:
        row = {
            "id": sample.entry_id,
            "claim": sample.claim,
            "passage": sample.passage,
            "label": sample.label,
            "judge_label": sample.judge_label,
            "judge_version": sample.judge_version,
            "reviewed_at": sample.created_at.isoformat(),
        }
        yield json.dumps(row, ensure_ascii=False) + "\n"
