"""Guarded streaming with the scripted FakeBackend (scripted deltas): events, show policies, early stop,
cancellation (SQLite and PostgreSQL), sync and async. Real model and real server: ``test_stream_real.py``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from citelock import BackendLimits, Citelock, FakeBackend, Guard, GuardedAnswer, ReasonCode, SurfacePolicy
from citelock.backends import Generation
from citelock.records import PromptRecord
from citelock.store import PromptLog, ResultStore, ReviewQueue
from citelock.stream import Done

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023."},
]
QUESTION = "How long is the Aurora bridge?"
TIMING = {"generation": {"latency_s", "first_token_s", "tokens_per_s", "schema_build_ms"}}
LOW = SurfacePolicy(name="chat", stakes="low", sample_rate=1.0, on_fail="drop_claim")
HIGH = SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")


def _out(*claims: tuple[str, str, str]) -> str:
    data = {"claims": [{"text": t, "citations": [{"chunk_id": c, "span": s}]} for t, c, s in claims]}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


GOOD = _out(
    ("The bridge spans 880 meters.", "c-1", "spans 880 meters"),
    ("It opened in 1932.", "c-1", "opened in 1932"),
)
NUMBER_BAD = _out(
    ("The bridge spans 880 meters.", "c-1", "spans 880 meters"),
    ("Prices rose 9% in 2023.", "c-2", "prices in Zürich rose"),  # 9% is in no cited passage
)


def _types(events: Iterable[Any]) -> list[str]:
    return [e.type for e in events]


def _same(a: GuardedAnswer, b: GuardedAnswer) -> None:
    assert a.model_dump(exclude=TIMING) == b.model_dump(exclude=TIMING)  # type: ignore[arg-type]


@pytest.mark.parametrize("surface", [None, LOW, HIGH])
@pytest.mark.parametrize("output", [GOOD, NUMBER_BAD])
def test_the_done_answer_equals_answer_for_the_same_generation(surface: SurfacePolicy | None, output: str) -> None:
    guard = Guard(surface) if surface is not None else None
    client = Citelock(FakeBackend([output, output]), guard=guard)
    events = list(client.stream(QUESTION, CHUNKS, request_id="r-1"))
    assert events[-1].type == "done" and _types(events).count("done") == 1
    done = events[-1]
    assert isinstance(done, Done) and not done.cut
    _same(done.answer, client.answer(QUESTION, CHUNKS, request_id="r-1"))


@pytest.mark.parametrize(
    ("policy", "output", "limits"),
    [
        ("quote", '{"claims":[{"text":"It spans 880 meters across the bay.","citations":[{"chunk_id":"c-1"}]}]}', None),
        ("sentence", _out(("It spans 880 meters.", "c-1", "It spans 880 meters across the bay.")), None),
        ("substring", "It spans 880 meters [c-1]. Prices rose 5% [c-2]. It is blue [c-9].", BackendLimits(policies=())),
    ],
)
def test_every_policy_and_free_text_stream_to_the_answer_answer_returns(
    policy: str, output: str, limits: BackendLimits | None
) -> None:
    client = Citelock(FakeBackend([output, output], limits=limits), guard=Guard(LOW))
    events = list(client.stream(QUESTION, CHUNKS, policy=policy, request_id="r-p", on_diverge="continue"))  # type: ignore[arg-type]
    _same(events[-1].answer, client.answer(QUESTION, CHUNKS, policy=policy, request_id="r-p"))  # type: ignore[arg-type]
    checked = [e for e in events if e.type == "claim.checked"]
    assert [e.claim for e in checked] == list(events[-1].answer.answer.claims)


def test_immediately_events_are_in_order_and_complete() -> None:
    client = Citelock(FakeBackend([GOOD]))
    events = list(client.stream(QUESTION, CHUNKS, show="immediately"))
    answer = events[-1].answer
    for n, claim in enumerate(answer.answer.claims):
        deltas = [e for e in events if e.type == "claim.delta" and e.claim_index == n]
        assert "".join(e.delta for e in deltas) == claim.text == deltas[-1].snapshot
        spans = [e for e in events if e.type == "citation.delta" and e.claim_index == n and e.field == "span"]
        assert "".join(e.delta for e in spans) == claim.citations[0].span
        closed = [e for e in events if e.type == "citation.closed" and e.claim_index == n]
        assert [c.citation for c in closed] == list(claim.citations)
        at = events.index(closed[0])
        checked = next(i for i, e in enumerate(events) if e.type == "claim.checked" and e.claim_index == n)
        assert events.index(deltas[-1]) < at < checked  # text, then its citation, then its checks
        assert events[checked].claim == claim and events[checked].passed
    order = [e.claim_index for e in events if e.type == "claim.checked"]
    assert order == list(range(len(answer.answer.claims)))


def test_after_checks_never_shows_a_failing_claim_nor_any_unchecked_text() -> None:
    client = Citelock(FakeBackend([NUMBER_BAD]), guard=Guard(LOW))
    events = list(client.stream(QUESTION, CHUNKS, show="after_checks"))
    assert not {"claim.delta", "citation.delta", "citation.opened", "citation.closed"} & set(_types(events))
    checked = {e.claim_index: e for e in events if e.type == "claim.checked"}
    assert not checked[1].passed and {f.reason for f in checked[1].findings} == {ReasonCode.NUMBER_MISMATCH}
    shown = [e.claim_index for e in events if e.type == "claim.shown"]
    assert 1 not in shown and 0 in shown
    withheld = [e for e in events if e.type == "claim.withheld"]
    assert [(w.claim_index, w.reasons) for w in withheld] == [(1, (ReasonCode.NUMBER_MISMATCH,))]
    assert events.index(checked[0]) < _types(events).index("claim.shown")


def test_immediately_retracts_a_claim_that_fails_and_marks_it_on_a_mark_surface() -> None:
    for on_fail, action in (("drop_claim", "retract"), ("mark", "mark")):
        surface = SurfacePolicy(name="chat", stakes="low", sample_rate=0.0, on_fail=on_fail)  # type: ignore[arg-type]
        events = list(Citelock(FakeBackend([NUMBER_BAD]), guard=Guard(surface)).stream(QUESTION, CHUNKS))
        retracted = [e for e in events if e.type == "claim.retracted"]
        assert [(r.claim_index, r.action) for r in retracted] == [(1, action)]


def test_after_judge_shows_a_claim_only_after_its_judge_passed() -> None:
    client = Citelock(FakeBackend([GOOD]), guard=Guard(HIGH))
    events = list(client.stream(QUESTION, CHUNKS))  # high stakes: after_judge is the default
    assert "claim.delta" not in _types(events)
    for shown in (e for e in events if e.type == "claim.shown"):
        judged = [e for e in events if e.type == "claim.judged" and e.claim_index == shown.claim_index]
        assert len(judged) == 1 and judged[0].passed and events.index(judged[0]) < events.index(shown)
    judged_ok = {e.claim_index for e in events if e.type == "claim.judged" and e.passed}
    assert {e.claim_index for e in events if e.type == "claim.shown"} == judged_ok
    final = events[-1].answer
    assert final.result.accounting.judge_calls == len(final.answer.claims)


def test_the_judge_is_asked_once_per_citation_across_the_stream_and_the_final_guard() -> None:
    calls: list[tuple[str, str]] = []

    class Counting:
        name, version = "counting", "1"

        def judge(self, claim: str, passage: str) -> Any:
            from citelock.records import Verdict

            calls.append((claim, passage))
            return Verdict(label="yes", raw="yes", judge=self.name, version=self.version)

    client = Citelock(FakeBackend([GOOD]), guard=Guard(HIGH, Counting()))
    events = list(client.stream(QUESTION, CHUNKS))
    assert len(calls) == len(set(calls)) == 2
    assert events[-1].answer.result.accounting.judge_calls == 2


def _diverging_delta(output: str, marker: str) -> int:
    """The 0-based index of the delta at which ``marker`` is complete in ``output``'s deltas."""
    pieces = FakeBackend.deltas(output)
    seen = ""
    for n, piece in enumerate(pieces):
        seen += piece
        if seen.endswith(marker):
            return n
    raise AssertionError(marker)


FABRICATED_SPAN = _out(
    ("The bridge spans 880 meters.", "c-1", "spans 880 meters"),
    ("Prices rose 9% last year.", "c-2", "rose 9% last year"),
    ("It opened in 1932.", "c-1", "opened in 1932"),
)


def test_a_fabricated_span_on_an_unconstrained_backend_cuts_the_stream_at_the_diverging_delta() -> None:
    fake = FakeBackend([FABRICATED_SPAN], enforced=False)
    events = list(Citelock(fake).stream(QUESTION, CHUNKS))
    at = _diverging_delta(FABRICATED_SPAN, '"rose 9')  # "rose " is in c-2; "rose 9" is not
    diverged = [e for e in events if e.type == "claim.diverged"]
    assert len(diverged) == 1
    d = diverged[0]
    assert (d.claim_index, d.citation_index, d.field, d.action) == (1, 0, "span", "cut")
    assert d.delta_index == at and d.tokens == at + 1
    assert fake.streamed == at + 1  # not one delta more was generated
    done = events[-1]
    assert done.type == "done" and done.cut
    answer = done.answer
    assert answer.generation.completion_tokens == at + 1 and answer.generation.finish_reason == "diverged"
    assert answer.decision == "block" and not answer.served
    reasons = [f.reason for f in answer.findings]
    assert ReasonCode.ANSWER_TRUNCATED in reasons and ReasonCode.SPAN_NOT_IN_CHUNK in reasons
    assert answer.answer.claims[0].text == "The bridge spans 880 meters."


@pytest.mark.parametrize(
    ("cited", "marker"),
    [
        ("c-17", '"c-17'),  # no assembled id starts with "c-17": wrong at the delta that typed "17"
        ("c", '"c"'),  # "c" starts assembled ids: wrong only once the string closes
    ],
)
def test_a_fabricated_id_cuts_at_the_delta_where_it_stops_being_a_prefix(cited: str, marker: str) -> None:
    output = _out(("The bridge spans 880 meters.", cited, "spans 880 meters"))
    fake = FakeBackend([output], enforced=False)
    events = list(Citelock(fake).stream(QUESTION, CHUNKS))
    d = next(e for e in events if e.type == "claim.diverged")
    assert d.field == "chunk_id" and d.value == cited and d.reason == ReasonCode.ID_NOT_IN_PROMPT
    assert fake.streamed == d.tokens == _diverging_delta(output, marker) + 1


def test_naive_free_text_cuts_at_a_marker_id_no_assembled_id_starts_with() -> None:
    text = "The bridge spans 880 meters [c-1]. It opened in 1932 [x-9]. More text follows here."
    fake = FakeBackend([text], limits=BackendLimits(policies=()))
    events = list(Citelock(fake).stream(QUESTION, CHUNKS))
    d = next(e for e in events if e.type == "claim.diverged")
    assert d.field == "chunk_id" and d.value == "x"
    assert fake.streamed == d.tokens == _diverging_delta(text, "[x") + 1


def test_continue_drops_the_diverged_claim_and_the_answer_equals_answer() -> None:
    guard = Guard(SurfacePolicy(name="chat", stakes="low", sample_rate=0.0, on_fail="drop_claim"))
    fake = FakeBackend([FABRICATED_SPAN, FABRICATED_SPAN], enforced=False)
    client = Citelock(fake, guard=guard)
    events = list(client.stream(QUESTION, CHUNKS, show="after_checks"))
    d = next(e for e in events if e.type == "claim.diverged")
    assert d.action == "continue" and fake.streamed == len(FakeBackend.deltas(FABRICATED_SPAN))
    assert 1 not in {e.claim_index for e in events if e.type == "claim.shown"}
    assert 1 in {e.claim_index for e in events if e.type == "claim.withheld"}
    done = events[-1]
    assert not done.cut
    _same(done.answer, client.answer(QUESTION, CHUNKS, request_id=done.answer.request_id))


class _WholeOnly:
    """A backend without ``stream``: its whole output is one step."""

    name = "whole"
    model = "scripted"

    def __init__(self, output: str) -> None:
        self.inner = FakeBackend([output, output])
        self.limits = self.inner.limits

    def generate(self, record: PromptRecord, schema: Any, *, max_tokens: int) -> Generation:
        return self.inner.generate(record, schema, max_tokens=max_tokens)


def test_a_backend_without_streaming_yields_the_whole_answer_as_one_step() -> None:
    backend = _WholeOnly(GOOD)
    client = Citelock(backend, guard=Guard(LOW))
    events = list(client.stream(QUESTION, CHUNKS, show="after_checks", request_id="r-2"))
    assert [e.claim_index for e in events if e.type == "claim.checked"] == [0, 1]
    _same(events[-1].answer, client.answer(QUESTION, CHUNKS, request_id="r-2"))


def _stores(target: str) -> tuple[PromptLog, ReviewQueue, ResultStore]:
    return PromptLog(target), ReviewQueue(target), ResultStore(target)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_cancelling_mid_claim_persists_the_log_entry_the_checked_claims_and_a_truncation_finding(
    target: str, asynchronous: bool
) -> None:
    log, queue, results = _stores(target)
    fake = FakeBackend([FABRICATED_SPAN.replace("rose 9% last year", "rose 5% in 2023")])
    client = Citelock(fake, log=log, guard=Guard(LOW), sinks=[queue, results])
    seen: list[Any] = []
    if asynchronous:

        async def consume() -> None:
            events = client.astream(QUESTION, CHUNKS, request_id="cancel-1", show="immediately")
            async for event in events:
                seen.append(event)
                if event.type == "claim.delta" and event.claim_index == 1:
                    break  # mid-claim: claim 0 is checked, claim 1 half-generated
            await events.aclose()  # type: ignore[attr-defined]

        asyncio.run(consume())
    else:
        events = client.stream(QUESTION, CHUNKS, request_id="cancel-1", show="immediately")
        for event in events:
            seen.append(event)
            if event.type == "claim.delta" and event.claim_index == 1:
                break
        events.close()  # type: ignore[attr-defined]
    assert [e.claim_index for e in seen if e.type == "claim.checked"] == [0]
    assert fake.streamed < len(FakeBackend.deltas(FABRICATED_SPAN))
    assert log.get("cancel-1").request_id == "cancel-1"
    stored = results.for_request("cancel-1")
    assert stored is not None and stored.decision == "block"
    assert [c.claim for c in stored.claims] == ["The bridge spans 880 meters."]
    reasons = [f.reason for f in stored.report.findings]
    assert reasons == [ReasonCode.ANSWER_TRUNCATED]
    queued = [e for e in queue if e.request_id == "cancel-1"]
    assert [e.reason for e in queued] == [ReasonCode.ANSWER_TRUNCATED]


def test_async_stream_equals_the_sync_stream_and_answer() -> None:
    client = Citelock(FakeBackend([GOOD, GOOD]), guard=Guard(HIGH))

    async def collect() -> list[Any]:
        return [e async for e in client.astream(QUESTION, CHUNKS, request_id="r-3")]

    events = asyncio.run(collect())
    sync = list(client.stream(QUESTION, CHUNKS, request_id="r-3"))
    strip = [e.model_dump(exclude={"answer"}) for e in events]
    assert strip == [e.model_dump(exclude={"answer"}) for e in sync]
    _same(events[-1].answer, sync[-1].answer)


def test_bad_arguments_fail_before_anything_is_logged(tmp_path: Path) -> None:
    from citelock import InputError, UsageError

    log = PromptLog(tmp_path / "log.db")
    client = Citelock(FakeBackend([GOOD]), log=log)
    with pytest.raises(InputError):
        client.stream("", CHUNKS)
    with pytest.raises(UsageError):
        client.stream(QUESTION, CHUNKS, render="html")  # type: ignore[arg-type]
    assert list(log) == []


def test_the_starlette_example_streams_only_verified_claims() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    example = root / "examples" / "stream_starlette.py"
    env = {"PYTHONPATH": str(root / "src"), "PATH": ""}
    out = subprocess.run([sys.executable, str(example), "--fake"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    # high stakes: the passing claim is held until the answer-level check ran, so the failing one is announced first
    assert lines[0] == {"type": "claim.withheld", "claim_index": 1, "reasons": ["NUMBER_MISMATCH"]}
    assert lines[1] == {"type": "claim.shown", "claim_index": 0, "claim": "The bridge spans 880 meters."}
    assert lines[-1]["type"] == "done" and lines[-1]["decision"] == "repaired"
    assert "1931" not in out.stdout  # the failing claim's text never left the server


def test_max_tokens_cutting_the_answer_is_truncated_output_and_the_checked_claims_are_persisted(tmp_path: Path) -> None:
    from citelock import TruncatedOutputError

    class Cut(FakeBackend):
        """Stops half-way through the second claim and says so (``finish_reason="length"``)."""

        def stream(self, record: PromptRecord, schema: Any, *, max_tokens: int) -> Any:
            pieces = self.deltas(GOOD)[:70]
            self.streamed += len(pieces)
            yield from pieces
            text = "".join(pieces)
            yield Generation(text=text, backend="fake", model="m", enforced=True, finish_reason="length")

    db = tmp_path / "citelock.db"
    results = ResultStore(db)
    client = Citelock(Cut([]), log=PromptLog(db), guard=Guard(LOW), sinks=[results])
    seen: list[Any] = []
    with pytest.raises(TruncatedOutputError):
        for event in client.stream(QUESTION, CHUNKS, request_id="len-1", show="after_checks"):
            seen.append(event)
    assert [e.claim_index for e in seen if e.type == "claim.checked"] == [0]  # the half claim is not checked
    stored = results.for_request("len-1")
    assert stored is not None and [c.claim for c in stored.claims] == ["The bridge spans 880 meters."]
    assert [f.reason for f in stored.report.findings] == [ReasonCode.ANSWER_TRUNCATED]
