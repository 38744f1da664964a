"""Test helper: the telemetry tests' guarded answer (a clean citation, a fabricated id, an unsupported claim)."""

from __future__ import annotations

from typing import Any

from citelock.guard import Guard, SurfacePolicy
from citelock.records import PromptRecord
from support.fakes import REVENUE_CHUNKS, KeywordJudge, make_record

__all__ = ["ANSWER", "EXPECTED", "STORE", "guard", "record"]

STORE = frozenset({"c1", "c2", "c3", "s-old"})
ANSWER: dict[str, Any] = {
    "claims": [
        {"text": "Revenue grew 12% in 2024.", "citations": [{"chunk_id": "c1", "span": "Revenue grew 12%"}]},
        {"text": "Freight is billed to the buyer.", "citations": [{"chunk_id": "c9"}]},
        {"text": "Headcount doubled across every regional office.", "citations": [{"chunk_id": "c3"}]},
    ]
}
# (claim, citation) -> (evaluation name, label): what the guard guarantees for this answer and this judge
EXPECTED = {
    (0, 0): ("citelock.support", "pass"),
    (1, 0): ("citelock.provenance", "FABRICATED_ID"),
    (2, 0): ("citelock.support", "UNSUPPORTED"),
}


def record(request_id: str = "req-otel") -> PromptRecord:
    return make_record("How did the company do in 2024?", REVENUE_CHUNKS, request_id=request_id)


def guard() -> Guard:
    return Guard(SurfacePolicy(name="finance", stakes="high"), KeywordJudge())
