"""The configured client: ``Citelock(backend, log, guard, sinks)`` built once, ``.answer``/``.aanswer`` per request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import citelock
from citelock import Citelock, FakeBackend, Guard, GuardedAnswer, GuardResult, ReasonCode, SurfacePolicy, UsageError
from citelock.judges._routing import Routing
from citelock.store import PromptLog, ResultStore, ReviewQueue
from support.fakes import ShareJudge

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023."},
]
GOOD = {"text": "The bridge spans 880 meters.", "citations": [{"chunk_id": "c-1", "span": "spans 880 meters"}]}
WRONG = {"text": "Tickets cost forty dollars.", "citations": [{"chunk_id": "c-1", "span": "The Aurora bridge"}]}
ROUTING = Routing(pass_at=0.6, fail_below=0.2, judge="share-test", judge_version="1")


def out(*claims: dict[str, object]) -> str:
    return json.dumps({"claims": list(claims)}, ensure_ascii=False, separators=(",", ":"))


def test_one_client_answers_many_requests_with_its_configuration(tmp_path: Path) -> None:
    fake = FakeBackend([out(GOOD), out(GOOD)])
    db = tmp_path / "c.db"
    client = Citelock(fake, log=db, render="none", policy="substring")
    first = client.answer("How long is the bridge?", CHUNKS, request_id="r1")
    second = client.answer("How long is it?", CHUNKS, request_id="r2", render="footnotes")
    assert (first.ok, second.ok) == (True, True)
    assert first.rendered == "The bridge spans 880 meters."  # the client's render style
    assert second.rendered.startswith("The bridge spans 880 meters.[1]")  # a per-request override
    assert [call.record.request_id for call in fake.calls] == ["r1", "r2"]
    log = PromptLog(db)
    assert log.get("r1").sha256 == first.prompt_sha256 and log.get("r2").sha256 == second.prompt_sha256


def test_per_request_span_policy_override_reaches_the_schema() -> None:
    fake = FakeBackend([out(GOOD), out(GOOD)])
    client = Citelock(fake, policy="substring")
    client.answer("q?", CHUNKS)
    client.answer("q?", CHUNKS, policy="id")
    assert [c.schema.policy for c in fake.calls if c.schema is not None] == ["substring", "id"]


def test_sinks_receive_every_result_queue_store_and_callable(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    seen: list[tuple[GuardedAnswer, GuardResult]] = []
    surface = SurfacePolicy(name="legal", stakes="high", routing=ROUTING, on_fail="drop_claim")
    client = Citelock(
        FakeBackend([out(GOOD, WRONG)]),
        guard=Guard(surface, ShareJudge()),
        sinks=[ReviewQueue(db), ResultStore(db), lambda answer, result: seen.append((answer, result))],
    )
    result = client.answer("How long is the bridge?", CHUNKS)
    assert result.decision == "repaired" and [o.claim_index for o in result.result.dropped] == [1]
    assert "Tickets" not in result.rendered
    (entry,) = list(ReviewQueue(db))
    assert entry.surface == "legal" and entry.reason in (ReasonCode.UNSUPPORTED, ReasonCode.WRONG_CHUNK)
    (stored,) = ResultStore(db).latest()
    assert stored.decision == "repaired" and stored.report.request_id == result.request_id
    ((answer, guard_result),) = seen
    assert answer == result and guard_result == stored == answer.result


def test_a_queue_or_result_store_needs_a_surface(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="groups results by surface"):
        Citelock(FakeBackend([]), sinks=[ReviewQueue(tmp_path / "q.db")])
    with pytest.raises(UsageError, match="a sink must be"):
        Citelock(FakeBackend([]), sinks=["not a sink"])  # type: ignore[list-item]


def test_bad_configuration_fails_at_construction_before_anything_is_logged(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    with pytest.raises(UsageError, match=r"must implement citelock\.Backend"):
        Citelock(object(), log=db)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown backend"):
        Citelock("no-such-backend", log=db)
    with pytest.raises(UsageError, match=r"guard must be a citelock\.Guard"):
        Citelock(FakeBackend([]), guard=SurfacePolicy(name="x", stakes="low"))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="render style"):
        Citelock(FakeBackend([]), render="html")  # type: ignore[arg-type]
    other = Routing(pass_at=0.6, fail_below=0.2, judge="another-judge", judge_version="9")
    with pytest.raises(UsageError, match="another-judge"):
        Guard(SurfacePolicy(name="legal", stakes="high", routing=other), ShareJudge())
    assert not db.exists()  # nothing was written by any failed construction


def test_no_process_wide_default_backend() -> None:
    a, b = Citelock(), Citelock()
    assert a._backend is None and b._backend is None  # nothing is loaded until first use
    assert "not loaded" in repr(a)
    fake = FakeBackend([])
    assert Citelock(fake).backend is fake


def test_aanswer_matches_answer_and_awaits_async_backends() -> None:
    client = Citelock(FakeBackend([out(GOOD), out(GOOD)]))
    sync = client.answer("q?", CHUNKS, request_id="same")
    result = asyncio.run(client.aanswer("q?", CHUNKS, request_id="same"))
    assert result.model_dump(exclude={"generation"}) == sync.model_dump(exclude={"generation"})


def test_free_check_guard_result_without_a_policy() -> None:
    bad = {"text": "It spans 900 meters.", "citations": [{"chunk_id": "c-9", "span": "spans 900 meters"}]}
    client = Citelock(FakeBackend([out(bad)], enforced=False))
    result = client.answer("q?", CHUNKS)
    assert not result.ok and result.decision == "block" and not result.served  # free checks block on findings
    assert [f.reason for f in result.findings] == [ReasonCode.ID_NOT_IN_PROMPT]


def test_the_one_off_wrapper_is_the_client() -> None:
    via_wrapper = citelock.answer("q?", CHUNKS, backend=FakeBackend([out(GOOD)]), request_id="x")
    via_client = Citelock(FakeBackend([out(GOOD)])).answer("q?", CHUNKS, request_id="x")
    assert via_wrapper.model_dump(exclude={"generation"}) == via_client.model_dump(exclude={"generation"})
    with pytest.raises(UsageError, match="take effect with surface"):
        citelock.answer("q?", CHUNKS, backend=FakeBackend([out(GOOD)]), judge=ShareJudge())


def test_guard_run_parses_once_and_check_is_its_report() -> None:
    from support.fakes import make_record

    record = make_record("q?", [{"id": "c-1", "text": "The Aurora bridge opened in 1932."}])
    raw = {"claims": [{"text": "It opened in 1932.", "citations": [{"chunk_id": "c-1", "span": "opened in 1932"}]}]}
    result = Guard().run(record, raw)
    assert result.ok and result.surface is None and result.policy is None and result.support == ()
    assert citelock.check(record, raw) == result.report
    assert "Guard(surface=None" in repr(Guard())


def test_the_one_off_wrapper_names_an_unknown_option() -> None:
    with pytest.raises(UsageError, match=r"unknown option\(s\) \['polcy'\]"):
        citelock.answer("q?", CHUNKS, backend=FakeBackend([out(GOOD)]), polcy="quote")  # type: ignore[call-arg]


def test_a_free_checks_result_cannot_be_queued(tmp_path: Path) -> None:
    from support.fakes import make_record

    record = make_record("q?", [{"id": "c-1", "text": "The Aurora bridge opened in 1932."}])
    result = Guard().run(record, {"claims": [{"text": "It opened.", "citations": [{"chunk_id": "c-9"}]}]})
    with pytest.raises(UsageError, match="groups findings by surface"):
        ReviewQueue(tmp_path / "q.db").enqueue_result(result)
