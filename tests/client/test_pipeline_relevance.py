"""Relevance after the guard: pre-generation abstention in the client, metrics, eval rows and the review desk.

The fake backend records every call, so "abstained before generating" is checked as "the backend was never
called"; the desk is the real app on a real SQLite store.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fastapi.testclient import TestClient

import citelock
from citelock import FakeBackend, Guard, ReasonCode, SurfacePolicy, assemble, serialize
from citelock.evals._compare import summarize_compare
from citelock.metrics import metrics_from_store
from citelock.review import ReviewDesk, create_account, create_app
from citelock.store import ResultStore, ReviewQueue
from support.review_desk import BASE, PASSWORDS, sign_in

CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-3", "text": "Harlow's city council voted 7 to 2 to raise the bridge toll to $3.50 in 2023."},
]
OPENED = {"claims": [{"text": "The Aurora Bridge opened to traffic in 1932.", "citations": [{"chunk_id": "c-1"}]}]}
SURFACE = SurfacePolicy(name="docs", stakes="low", sample_rate=0.0)


def _client(db: Path, policy: SurfacePolicy = SURFACE) -> tuple[citelock.Citelock, FakeBackend]:
    fake = FakeBackend([json.dumps(OPENED)] * 3, enforced=False)
    sinks = [ReviewQueue(str(db)), ResultStore(str(db))]
    return citelock.Citelock(fake, log=db, policy="id", guard=Guard(policy), sinks=sinks), fake


def test_no_relevant_chunk_abstains_without_calling_the_backend(tmp_path: Path) -> None:
    client, fake = _client(tmp_path / "a.db")
    result = client.answer("What is the population of Harlow?", CHUNKS)
    assert fake.calls == []  # no token spent
    assert result.abstained_before_generation and result.answer.abstained and result.answer.claims == ()
    assert result.generation.completion_tokens == 0 and result.rendered == citelock.pipeline.ABSTENTION_TEXT
    assert result.findings == ()
    async_result = asyncio.run(client.aanswer("What is the population of Harlow?", CHUNKS))
    assert async_result.abstained_before_generation and fake.calls == []
    answered = client.answer("When did the Aurora Bridge open?", CHUNKS)
    assert len(fake.calls) == 1 and not answered.abstained_before_generation


def test_abstention_can_be_turned_off_per_surface(tmp_path: Path) -> None:
    for policy in (SURFACE.model_copy(update={"abstain_below": None}), SURFACE.model_copy(update={"relevance": "off"})):
        client, fake = _client(tmp_path / f"{policy.relevance}.db", policy)
        result = client.answer("What is the population of Harlow?", CHUNKS)
        assert len(fake.calls) == 1 and not result.abstained_before_generation
    free = citelock.Citelock(FakeBackend([json.dumps(OPENED)], enforced=False), policy="id")
    assert not free.answer("What is the population of Harlow?", CHUNKS).abstained_before_generation  # no surface


def test_metrics_count_relevance_and_abstentions_per_surface(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    client, _ = _client(db)
    client.answer("What is the population of Harlow?", CHUNKS)  # abstained by the pipeline
    client.answer("When did the Aurora Bridge open?", CHUNKS)  # on-question
    client.answer("How long is the Aurora Bridge?", CHUNKS)  # the same claim: off-question (review)
    report = metrics_from_store(str(db))
    relevance = report.get("relevance_rate", surface="docs")
    assert (relevance.numerator, relevance.denominator) == (1, 2)
    abstention = report.get("abstention_rate", surface="docs")
    assert (abstention.numerator, abstention.denominator) == (1, 3)
    assert report.get("pipeline_abstentions", surface="docs").numerator == 1
    assert [e.reason for e in ReviewQueue(str(db))] == [ReasonCode.OFF_QUESTION]


def test_eval_compare_counts_off_question_answers_and_abstentions_apart() -> None:
    base = {"mode": "quote", "ok": True, "fabricated": 0, "stale": 0, "non_verbatim": 0, "uncited": 0}
    base |= {"latency_s": 0.1, "claims": 1}
    rows = [
        base | {"off_question": 1},
        base | {"off_question": 0},
        base | {"abstained": True, "abstained_before_generation": True},
    ]
    summary = summarize_compare(rows, ["quote"])["quote"]
    assert summary["off_question"] == 1 and summary["abstained_before_generation"] == 1
    assert (
        summary["clean_answers"] == 2
    )  # clean is about citations: an off-question answer counts, an abstention does not


def test_the_review_desk_renders_an_off_question_entry(tmp_path: Path) -> None:
    desk = ReviewDesk(str(tmp_path / "desk.db"))
    create_account(desk.accounts, "alice", PASSWORDS["alice"], role="reviewer")
    record = serialize(assemble("How long is the Aurora Bridge?", CHUNKS), request_id="req-off")
    desk.log.append(record)
    result = Guard(SURFACE).run(record, OPENED)
    desk.results.append(result)
    (entry,) = desk.queue.enqueue_result(result)
    assert entry.reason is ReasonCode.OFF_QUESTION and entry.claim_index == -1
    with TestClient(create_app(desk), base_url=BASE) as client:
        sign_in(client, "alice")
        page = client.get(f"/entries/{entry.id}")
        assert page.status_code == 200
        assert "OFF_QUESTION" in page.text and "(the whole answer)" in page.text
        assert "How long is the Aurora Bridge?" in page.text
        assert client.get("/?reason=OFF_QUESTION").status_code == 200


def test_a_stream_abstains_before_generating_too(tmp_path: Path) -> None:
    client, fake = _client(tmp_path / "s.db")
    events = list(client.stream("What is the population of Harlow?", CHUNKS))
    assert fake.calls == [] and events[-1].type == "done"
    done = events[-1].answer  # type: ignore[union-attr]
    assert done.abstained_before_generation and done.answer.abstained and done.findings == ()
