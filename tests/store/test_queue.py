from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from citelock import Finding, InputError, Layer, ReasonCode
from citelock.guard import SurfacePolicy
from citelock.store import AlreadyResolvedError, QueueEntry, ReviewQueue, queue_entry_schema
from support.fakes import REVENUE_CHUNKS, KeywordJudge, make_record
from support.guarding import guard_and_store


def finding(n: int, reason: ReasonCode = ReasonCode.UNSUPPORTED, passage: str = "Revenue grew 12%.") -> Finding:
    return Finding(
        request_id=f"req-{n}",
        prompt_sha256="ab" * 32,
        reason=reason,
        layer=Layer.SUPPORT if reason in (ReasonCode.UNSUPPORTED, ReasonCode.WRONG_CHUNK) else Layer.PROVENANCE,
        claim_index=0,
        claim=f"Claim number {n}.",
        citation_index=0,
        chunk_id="c1",
        passage=passage,
        verdicts={"provenance": "pass", "numbers": "pass", "support": "no"},
        judge_raw="no",
        judge_version="keyword-test 1",
    )


# --- contents ------------------------------------------------------------------------------------------------


def test_entry_carries_everything_a_reviewer_needs(target: str) -> None:
    queue = ReviewQueue(target)
    record = make_record("q?", REVENUE_CHUNKS, request_id="req-42")
    result = guard_and_store(
        record,
        {"claims": [{"text": "Operating margins expanded.", "citations": [{"chunk_id": "c1"}]}]},
        policy=SurfacePolicy(name="billing", stakes="high"),
        judge=KeywordJudge(),
        queue=queue,
    )
    assert result.decision == "block"
    (entry,) = list(queue)
    assert entry.reason is ReasonCode.WRONG_CHUNK
    assert entry.claim == "Operating margins expanded."
    assert entry.chunk_id == "c1"
    assert entry.related_chunk_id == "c2"
    assert entry.passage == "Revenue grew 12% in 2024."
    assert entry.verdicts == {
        "provenance": "pass",
        "numbers": "pass",
        "support": "no",
        "route": "fail",
        "diagnosis": "yes:c2",
    }
    assert entry.judge_raw is not None and entry.judge_raw.startswith("no")
    assert entry.judge_version == "keyword-test 1"
    assert (entry.request_id, entry.prompt_sha256) == ("req-42", record.sha256)
    assert entry.surface == "billing"
    assert entry.week == result.week
    assert entry.created_at.tzinfo is not None
    assert queue.get(entry.id) == entry
    assert queue.get(entry.id[:6]) == entry


def test_enqueue_is_idempotent_for_replays(target: str) -> None:
    queue = ReviewQueue(target)
    queue.enqueue([finding(1), finding(2)], surface="chat")
    queue.enqueue([finding(1), finding(2)], surface="chat")
    assert len(queue) == 2
    queue.enqueue([finding(1)], surface="search")  # another surface is another entry
    assert len(queue) == 3


def test_listing_is_grouped_by_reason(target: str) -> None:
    queue = ReviewQueue(target)
    queue.enqueue([finding(n, ReasonCode.UNSUPPORTED) for n in range(3)], surface="chat")
    queue.enqueue([finding(n, ReasonCode.SPAN_NOT_IN_CHUNK) for n in range(5)], surface="chat")
    queue.enqueue([finding(9, ReasonCode.WRONG_CHUNK)], surface="search")
    groups = queue.grouped()
    assert [(r.value, len(es)) for r, es in groups.items()] == [
        ("SPAN_NOT_IN_CHUNK", 5),
        ("UNSUPPORTED", 3),
        ("WRONG_CHUNK", 1),
    ]
    assert list(queue.grouped(surface="search")) == [ReasonCode.WRONG_CHUNK]
    assert list(queue.grouped(reason="UNSUPPORTED")) == [ReasonCode.UNSUPPORTED]
    with pytest.raises(InputError, match="unknown reason code 'NOPE'"):
        queue.grouped(reason="NOPE")


# --- resolution ----------------------------------------------------------------------------------------------


def test_accept_stores_a_calibration_sample(target: str) -> None:
    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1)], surface="chat")
    resolution = queue.resolve(entry.id, "accept", note="the passage does say it", reviewer="ana")
    assert resolution.outcome == "accept"
    (sample,) = queue.calibration_samples()
    assert (sample.claim, sample.passage, sample.label) == ("Claim number 1.", "Revenue grew 12%.", "yes")
    assert sample.judge_label == "no"
    assert sample.judge_version == "keyword-test 1"
    assert queue.resolution(entry.id) == resolution
    assert queue.grouped() == {}  # resolved entries leave the open list
    assert len(queue.grouped(status="resolved")[ReasonCode.UNSUPPORTED]) == 1


def test_accepting_a_provenance_finding_is_not_a_judge_sample(target: str) -> None:
    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1, ReasonCode.SPAN_NOT_IN_CHUNK)], surface="chat")
    queue.resolve(entry.id, "accept")
    assert queue.calibration_samples() == []


def test_repair_and_escalate_are_tracked_separately(target: str) -> None:
    queue = ReviewQueue(target)
    entries = queue.enqueue([finding(n) for n in range(4)], surface="chat")
    queue.resolve(entries[0].id, "repair", note="narrow the claim to revenue only", chunk_id="c2")
    queue.resolve(entries[1].id, "escalate", category="ranking", note="c2 should rank first")
    queue.resolve(entries[2].id, "escalate", category="chunking")
    assert queue.outcome_counts() == {
        "repair": 1,
        "escalate": 2,
        "escalate:ranking": 1,
        "escalate:chunking": 1,
    }
    repaired = queue.resolution(entries[0].id)
    assert repaired is not None and repaired.chunk_id == "c2" and repaired.note == "narrow the claim to revenue only"
    assert queue.resolution(entries[3].id) is None
    assert queue.calibration_samples() == []


def test_a_second_outcome_is_refused_unless_it_is_a_named_rereview(target: str) -> None:
    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1)], surface="chat")
    queue.resolve(entry.id, "repair", note="drop the claim", reviewer="ana")
    with pytest.raises(AlreadyResolvedError, match=r"already has an outcome \(repair by ana at .*never overwritten"):
        queue.resolve(entry.id, "accept")
    assert queue.calibration_samples() == []  # the refused accept wrote nothing
    assert queue.outcome_counts() == {"repair": 1}
    with pytest.raises(InputError, match="needs the reviewer's name"):
        queue.rereview(entry.id, "accept", reviewer="  ")
    assert len(queue.history(entry.id)) == 1


def test_a_rereview_supersedes_and_keeps_the_history(target: str) -> None:
    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1)], surface="chat")
    first = queue.resolve(entry.id, "accept", reviewer="ana")
    assert len(queue.calibration_samples()) == 1
    second = queue.rereview(entry.id, "repair", reviewer="bo", note="the passage says 12%, not the claim")
    assert (first.revision, second.revision) == (0, 1)
    assert queue.resolution(entry.id) == second
    assert queue.history(entry.id) == [first, second]
    assert queue.outcome_counts() == {"repair": 1}  # counted by the current outcome
    assert queue.calibration_samples() == []  # the overturned accept is no longer a human "yes"
    third = queue.rereview(entry.id, "accept", reviewer="cy", revision=1)
    assert third.revision == 2 and len(queue.calibration_samples()) == 1
    with pytest.raises(AlreadyResolvedError, match=r"at revision 2 .*not 1"):  # cy's change was not seen
        queue.rereview(entry.id, "escalate", category="ranking", reviewer="bo", revision=1)
    assert [e.reviewer for e in queue.history(entry.id)] == ["ana", "bo", "cy"]


def test_a_rereview_needs_an_outcome_to_supersede(target: str) -> None:
    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1)], surface="chat")
    with pytest.raises(InputError, match="still open"):
        queue.rereview(entry.id, "accept", reviewer="ana")
    assert queue.history(entry.id) == [] and queue.resolution(entry.id) is None


def test_the_database_refuses_to_rewrite_review_history(target: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1)], surface="chat")
    queue.resolve(entry.id, "repair", note="drop it", reviewer="ana")
    statements = [
        "UPDATE citelock_queue SET reason = 'UNCITED_CLAIM'",
        "DELETE FROM citelock_queue",
        "UPDATE citelock_review_events SET outcome = 'accept'",
        "DELETE FROM citelock_review_events",
    ]
    if queue.engine.dialect.name == "postgresql":
        statements += ["TRUNCATE citelock_review_events", "TRUNCATE citelock_queue CASCADE"]
    for statement in statements:
        with pytest.raises(DBAPIError, match="append-only"), queue.engine.begin() as conn:
            conn.execute(text(statement))
    current = ReviewQueue(target).resolution(entry.id)
    assert current is not None and (current.outcome, current.reviewer) == ("repair", "ana")
    assert len(queue) == 1


@pytest.mark.parametrize(
    ("outcome", "kwargs", "message"),
    [
        ("repair", {}, "a repair needs a note"),
        ("repair", {"note": "   "}, "a repair needs a note"),
        ("escalate", {}, "an escalation needs a category"),
        ("escalate", {"category": "vibes"}, "category must be chunking, truncation or ranking"),
        ("accept", {"category": "ranking"}, "a category is only for escalations"),
        ("accept", {"chunk_id": "c2"}, "a replacement chunk id is only for repairs"),
        ("approve", {}, "outcome must be accept, repair or escalate"),
    ],
)
def test_resolve_rejects_arguments_that_do_not_fit(
    target: str, outcome: str, kwargs: dict[str, str], message: str
) -> None:
    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1)], surface="chat")
    with pytest.raises(InputError, match=message):
        queue.resolve(entry.id, outcome, **kwargs)  # type: ignore[arg-type]
    assert queue.resolution(entry.id) is None


def test_unknown_and_ambiguous_ids(target: str) -> None:
    queue = ReviewQueue(target)
    base = QueueEntry.from_finding(finding(1), surface="chat")
    queue.add([base.model_copy(update={"id": "abcd1111"}), base.model_copy(update={"id": "abcd2222"})])
    with pytest.raises(InputError, match="matches several entries"):
        queue.get("abcd")
    assert queue.get("abcd2").id == "abcd2222"
    with pytest.raises(InputError, match="too short"):
        queue.get("ab")
    with pytest.raises(KeyError):
        queue.get("ffff0000")
    with pytest.raises(KeyError):
        queue.resolve("zzzz", "accept")
    with pytest.raises(KeyError):
        queue.rereview("zzzz", "accept", reviewer="ana")
    with pytest.raises(KeyError):  # LIKE wildcards in a prefix are literal
        queue.get("abc%")


def test_queue_entry_schema_is_valid_json_schema() -> None:
    import jsonschema

    schema = queue_entry_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    entry = QueueEntry.from_finding(finding(3), surface="chat")
    jsonschema.validate(json.loads(entry.model_dump_json()), schema)
    assert schema["additionalProperties"] is False
    with pytest.raises(ValueError):
        QueueEntry.model_validate({**entry.model_dump(), "unknown": 1})


# --- robustness ----------------------------------------------------------------------------------------------


def _writer(target: str, worker: int, count: int) -> None:
    queue = ReviewQueue(target)
    for n in range(count):
        queue.enqueue([finding(worker * 1000 + n)], surface=f"w{worker}")


@pytest.mark.slow
def test_concurrent_processes_lose_no_entry(target: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(target, w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    queue = ReviewQueue(target)
    assert len(queue) == 200
    per_surface = {s: len(queue.items(surface=s)) for s in ("w0", "w1", "w2", "w3")}
    assert per_surface == {"w0": 50, "w1": 50, "w2": 50, "w3": 50}


def _crash_writer(target: str, progress: str) -> None:
    queue = ReviewQueue(target)
    big = "x" * 200_000  # large rows make a kill mid-write likely
    with open(progress, "a") as log:
        for n in range(100_000):
            queue.enqueue([finding(n, passage=big + str(n))], surface="crash")
            log.write(f"{n}\n")
            log.flush()


def test_crash_mid_write_leaves_the_store_readable(target: str, tmp_path: Path) -> None:
    progress = tmp_path / "progress.txt"
    progress.touch()
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_crash_writer, args=(target, str(progress)))
    proc.start()
    deadline = time.monotonic() + 120
    while len(progress.read_text().splitlines()) < 25:
        assert proc.is_alive() and time.monotonic() < deadline, "the writer did not make progress"
        time.sleep(0.01)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    reported = len(progress.read_text().splitlines())

    queue = ReviewQueue(target)
    stored = list(queue)
    # every reported commit is there; at most one more (committed, killed before it was reported)
    assert reported <= len(stored) <= reported + 1
    # the stored entries are exactly the first N the writer made, each complete
    numbers = sorted(int(e.request_id.removeprefix("req-")) for e in stored)
    assert numbers == list(range(len(stored)))
    assert all(e.passage is not None and e.passage.endswith(e.request_id.removeprefix("req-")) for e in stored)
    queue.enqueue([finding(10**6)], surface="after-crash")  # still writable
    assert len(queue) == len(stored) + 1
    if "://" not in target:
        with sqlite3.connect(target) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _racing_reviewer(target: str, worker: int, barrier: Any, rereview: bool) -> None:
    queue = ReviewQueue(target)
    (entry,) = list(queue)
    barrier.wait(timeout=60)
    try:
        if rereview:
            queue.rereview(entry.id, "accept", reviewer=f"r{worker}", revision=0)
        else:
            queue.resolve(entry.id, "repair", note=f"reviewer {worker}", reviewer=f"r{worker}")
    except AlreadyResolvedError:
        os._exit(3)
    os._exit(0)


@pytest.mark.parametrize("rereview", [False, True], ids=["resolve", "rereview"])
def test_racing_reviewers_get_one_event_and_errors(target: str, rereview: bool) -> None:
    queue = ReviewQueue(target)
    (entry,) = queue.enqueue([finding(1)], surface="chat")
    if rereview:
        queue.resolve(entry.id, "repair", note="first", reviewer="ana")
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(6)
    procs = [ctx.Process(target=_racing_reviewer, args=(target, w, barrier, rereview)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert sorted(-1 if p.exitcode is None else p.exitcode for p in procs) == [0, 3, 3, 3, 3, 3]
    history = queue.history(entry.id)
    assert [e.revision for e in history] == ([0, 1] if rereview else [0])
    winner = next(p for p in procs if p.exitcode == 0)
    assert history[-1].reviewer == f"r{procs.index(winner)}"
