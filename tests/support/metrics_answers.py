"""Three guarded answers over two ISO weeks with hand-computed metrics (shared by the metrics and metrics CLI tests)."""

from __future__ import annotations

from datetime import UTC, datetime

from citelock import PromptRecord
from citelock.guard import GuardResult, SurfacePolicy
from citelock.store import ResultStore, ReviewQueue
from support.fakes import REVENUE_CHUNKS, KeywordJudge, make_record
from support.guarding import guard_and_store

WEEK1 = datetime(2025, 2, 12, 9, 0, tzinfo=UTC)  # 2025-W07
WEEK2 = datetime(2025, 2, 19, 9, 0, tzinfo=UTC)  # 2025-W08
HIGH = SurfacePolicy(name="chat", stakes="high")
OFF = SurfacePolicy(name="search", stakes="low", sample_rate=0.0)


def cite(text: str, chunk_id: str) -> dict[str, object]:
    return {"text": text, "citations": [{"chunk_id": chunk_id}]}


def record(request_id: str, when: datetime) -> PromptRecord:
    return make_record("q?", REVENUE_CHUNKS, request_id=request_id).model_copy(update={"created_at": when})


ANSWER_A = {
    "claims": [
        cite("Revenue grew 12%.", "c1"),  # judged yes
        cite("Operating margins expanded.", "c1"),  # judged no -> WRONG_CHUNK (c2)
        {"text": "Freight costs are billed to the buyer."},  # UNCITED_CLAIM
    ]
}
ANSWER_B = {
    "claims": [
        cite("Operating margins expanded to 30%.", "c2"),  # judged yes
        cite("Revenue grew 12%.", "c-999"),  # ID_NOT_IN_PROMPT, nothing to judge
    ]
}
ANSWER_C = {"claims": [{"text": "Happy to help!"}, cite("Revenue grew 12%.", "c1")]}  # sampled out


def results(queue: ReviewQueue | None = None, store: ResultStore | None = None) -> list[GuardResult]:
    judge = KeywordJudge()
    return [
        guard_and_store(record("a", WEEK1), ANSWER_A, policy=HIGH, judge=judge, queue=queue, results=store),
        guard_and_store(record("b", WEEK1), ANSWER_B, policy=HIGH, judge=judge, queue=queue, results=store),
        guard_and_store(record("c", WEEK2), ANSWER_C, policy=OFF, judge=None, queue=queue, results=store),
    ]
