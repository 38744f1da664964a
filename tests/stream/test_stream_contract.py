"""The stream's contract on every ending (issue #34 items 5, 6, 7, 9; #36's Guard copy), with the FakeBackend.

- A claim shown (``claim.shown``, or its text deltas under ``immediately``) whose answer then blocks, fails or
  errors is ``claim.retracted`` before ``done`` or before the error is raised.
- On a high-stakes surface a passing claim is held until the answer-level check (relevance) ran: it is never on
  screen when that check refuses the answer.
- Every ending persists its result and queue entries before the stream returns, raises or ``aclose()`` returns.
- Output beyond the schema's bounds (claims, characters) from any backend is cut with ``OutputBoundsError`` and
  an ``ANSWER_TRUNCATED`` finding.
- A stream on a ``relevance="judged"`` surface runs and gives ``answer``'s decision.

The real hostile server (2,000 claims over SSE through ``wrap``) is in ``test_wrap_stream.py``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from citelock import (
    Citelock,
    FakeBackend,
    Guard,
    GuardedAnswer,
    OutputBoundsError,
    ReasonCode,
    SchemaOptions,
    SurfacePolicy,
    UnparsedAnswerError,
)
from citelock.store import PromptLog, ResultStore, ReviewQueue

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023."},
]
LENGTH = "How long is the Aurora bridge?"
NONE_SURFACE = None
LOW_BLOCK = SurfacePolicy(name="chat", stakes="low", sample_rate=0.0, on_fail="block")
HIGH = SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")


def _out(*claims: tuple[str, str, str]) -> str:
    data = {"claims": [{"text": t, "citations": [{"chunk_id": c, "span": s}]} for t, c, s in claims]}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


OPENED = _out(("The Aurora bridge opened in 1932.", "c-1", "opened in 1932"))  # true, cited, off the question
SPANS = _out(("The bridge spans 880 meters.", "c-1", "spans 880 meters"))


def _on_screen(events: list[Any]) -> set[int]:
    """The claims a consumer rendering the events has on screen at the end (shown or streamed, not retracted)."""
    screen: set[int] = set()
    for event in events:
        if event.type in ("claim.shown", "claim.delta"):
            screen.add(event.claim_index)
        elif event.type == "claim.retracted" and event.action == "retract":
            screen.discard(event.claim_index)
    return screen


def _served(answer: GuardedAnswer) -> set[int]:
    if answer.decision == "block":
        return set()
    return {c.claim_index for c in answer.result.claims if c.action in ("serve", "mark")}


@pytest.mark.parametrize("show", ["immediately", "after_checks"])
def test_a_shown_claim_of_an_answer_blocked_off_question_is_retracted_before_done(show: str) -> None:
    client = Citelock(FakeBackend([OPENED, OPENED]))  # no surface: an OFF_QUESTION finding blocks
    events = list(client.stream(LENGTH, CHUNKS, show=show))  # type: ignore[arg-type]
    done = events[-1].answer
    assert done.decision == "block" and ReasonCode.OFF_QUESTION in {f.reason for f in done.findings}
    types = [e.type for e in events]
    assert ("claim.shown" in types) == (show == "after_checks")  # it passed its own checks: it was shown
    retracted = [e for e in events if e.type == "claim.retracted"]
    assert [(r.claim_index, r.action, r.reasons) for r in retracted] == [(0, "retract", (ReasonCode.OFF_QUESTION,))]
    assert types.index("claim.retracted") < types.index("done")
    assert _on_screen(events) == set() == _served(done)


def test_on_a_high_stakes_surface_nothing_the_relevance_check_refuses_is_ever_shown() -> None:
    client = Citelock(FakeBackend([OPENED, SPANS]), guard=Guard(HIGH))
    refused = list(client.stream(LENGTH, CHUNKS))
    assert refused[-1].answer.decision == "block"
    assert not [e for e in refused if e.type in ("claim.shown", "claim.delta", "claim.retracted")]
    assert [e.claim_index for e in refused if e.type == "claim.withheld"] == [0]
    # a passing answer: its claim is shown after the answer-level check, just before done
    served = list(client.stream(LENGTH, CHUNKS))
    types = [e.type for e in served]
    assert served[-1].answer.decision == "pass" and types[-2:] == ["claim.shown", "done"]
    assert _on_screen(served) == {0} == _served(served[-1].answer)


@pytest.mark.parametrize(
    "surface",
    [
        NONE_SURFACE,
        LOW_BLOCK,
        HIGH,
        SurfacePolicy(name="marks", stakes="low", sample_rate=1.0, on_fail="mark"),
        SurfacePolicy(name="drops", stakes="low", sample_rate=1.0, on_fail="drop_claim"),
    ],
)
@pytest.mark.parametrize("show", ["immediately", "after_checks", "after_judge"])
@pytest.mark.parametrize(
    ("question", "output"),
    [
        (LENGTH, SPANS),
        (LENGTH, OPENED),
        ("When did the bridge open?", OPENED),
        (LENGTH, _out(("The bridge spans 880 meters.", "c-1", "spans 880 meters"), ("Prices rose 9%.", "c-2", "rose"))),
    ],
)
def test_what_stays_on_screen_is_exactly_what_the_result_serves(
    surface: SurfacePolicy | None, show: str, question: str, output: str
) -> None:
    client = Citelock(FakeBackend([output]), guard=Guard(surface) if surface is not None else None)
    events = list(client.stream(question, CHUNKS, show=show))  # type: ignore[arg-type]
    done = events[-1].answer
    clean = {c.claim_index for c in done.result.claims if c.action == "serve"} if done.decision != "block" else set()
    assert clean <= _on_screen(events) <= _served(done)  # nothing refused stays up; everything served clean is up


def _stores(tmp_path: Path) -> tuple[PromptLog, ReviewQueue, ResultStore]:
    db = tmp_path / "citelock.db"
    return PromptLog(db), ReviewQueue(db), ResultStore(db)


EXTRA_KEY = (
    '{"claims":[{"text":"The bridge spans 880 meters.","citations":[{"chunk_id":"c-1","span":"spans 880 meters"}]},'
    '{"text":"It opened in 1932.","citations":[{"chunk_id":"c-1","span":"opened in 1932","page":3}]}]}'
)


def test_a_stream_that_shows_a_claim_then_fails_to_parse_retracts_it_and_persists_before_raising(
    tmp_path: Path,
) -> None:
    log, queue, results = _stores(tmp_path)
    surface = SurfacePolicy(name="chat", stakes="low", sample_rate=0.0, on_fail="drop_claim")
    client = Citelock(FakeBackend([EXTRA_KEY], enforced=False), log=log, guard=Guard(surface), sinks=[queue, results])
    seen: list[Any] = []
    with pytest.raises(UnparsedAnswerError):
        for event in client.stream("How long is the bridge?", CHUNKS, request_id="bad-1", show="after_checks"):
            seen.append(event)
    types = [e.type for e in seen]
    assert "claim.shown" in types and types[-1] == "claim.retracted" and "done" not in types
    assert _on_screen(seen) == set()
    stored = results.for_request("bad-1")
    assert stored is not None and stored.decision == "block"
    assert ReasonCode.ANSWER_TRUNCATED in {f.reason for f in stored.report.findings}
    assert ReasonCode.ANSWER_TRUNCATED in {e.reason for e in queue if e.request_id == "bad-1"}


def _many(n: int) -> str:
    return _out(*[(f"The bridge spans 880 meters ({k}).", "c-1", "spans 880 meters") for k in range(n)])


@pytest.mark.parametrize("asynchronous", [False, True])
def test_output_beyond_the_schemas_claims_bound_is_cut_with_a_typed_error_and_a_finding(
    tmp_path: Path, asynchronous: bool
) -> None:
    log, queue, results = _stores(tmp_path)
    surface = SurfacePolicy(name="chat", stakes="low", sample_rate=0.0, on_fail="drop_claim")
    fake = FakeBackend([_many(2000)], enforced=False)  # ~150 KB that ignored the constraint
    client = Citelock(fake, log=log, guard=Guard(surface), sinks=[queue, results], options=SchemaOptions(max_claims=3))
    seen: list[Any] = []

    async def consume() -> None:
        async for event in client.astream(LENGTH, CHUNKS, request_id="big-1", show="after_checks"):
            seen.append(event)

    with pytest.raises(OutputBoundsError) as info:
        if asynchronous:
            asyncio.run(consume())
        else:
            seen.extend(client.stream(LENGTH, CHUNKS, request_id="big-1", show="after_checks"))
    assert (info.value.bound, info.value.limit, info.value.got) == ("claims", 3, 4)
    assert fake.streamed < len(FakeBackend.deltas(_many(5)))  # cut as the 4th claim began, not read to the end
    assert [e.claim_index for e in seen if e.type == "claim.checked"] == [0, 1, 2]
    assert _on_screen(seen) == set()  # shown, then retracted: the stream ended in an error
    stored = results.for_request("big-1")
    assert stored is not None and stored.decision == "block" and len(stored.claims) == 3
    finding = next(f for f in stored.report.findings if f.reason is ReasonCode.ANSWER_TRUNCATED)
    assert "beyond the schema's bound of 3 claims" in finding.detail
    # the whole answer, not streamed: the same bound, the same error
    with pytest.raises(OutputBoundsError):
        Citelock(FakeBackend([_many(2000)], enforced=False), options=SchemaOptions(max_claims=3)).answer(LENGTH, CHUNKS)


def test_output_beyond_the_schemas_characters_bound_is_cut() -> None:
    huge = _out(("The bridge spans 880 meters" + " and more" * 20000 + ".", "c-1", "spans 880 meters"))
    fake = FakeBackend([huge, huge], enforced=False)
    client = Citelock(fake)
    with pytest.raises(OutputBoundsError) as info:
        list(client.stream(LENGTH, CHUNKS))
    assert info.value.bound == "chars" and info.value.got > info.value.limit
    assert fake.streamed < len(FakeBackend.deltas(huge)) // 10
    with pytest.raises(OutputBoundsError):
        client.answer(LENGTH, CHUNKS)


def test_async_aclose_persists_before_it_returns(tmp_path: Path) -> None:
    log, queue, results = _stores(tmp_path)
    surface = SurfacePolicy(name="chat", stakes="low", sample_rate=0.0, on_fail="drop_claim")
    two = _out(("The bridge spans 880 meters.", "c-1", "spans 880 meters"), ("It opened in 1932.", "c-1", "opened"))
    client = Citelock(FakeBackend([two]), log=log, guard=Guard(surface), sinks=[queue, results])
    found: list[Any] = []

    async def consume() -> None:
        events = client.astream(LENGTH, CHUNKS, request_id="ac-1", show="immediately")
        async for event in events:
            if event.type == "claim.delta" and event.claim_index == 1:
                break
        await events.aclose()  # type: ignore[attr-defined]
        found.append(results.for_request("ac-1"))  # before anything else runs on the loop
        found.append([e.reason for e in queue if e.request_id == "ac-1"])

    asyncio.run(consume())
    assert found[0] is not None and found[0].decision == "block"
    assert found[1] == [ReasonCode.ANSWER_TRUNCATED]


class _Word:
    """A text completer that answers one fixed word (the relevance judge's completer)."""

    model_id = "word"

    def __init__(self, word: str) -> None:
        self.word = word

    def complete(self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int) -> str:
        return self.word


@pytest.mark.parametrize("word", ["yes", "no"])
def test_a_stream_on_a_judged_relevance_surface_gives_answers_decision(word: str) -> None:
    from citelock.judges import RelevanceJudge

    policy = SurfacePolicy(name="docs", stakes="low", sample_rate=0.0, relevance="judged", on_fail="block")
    guard = Guard(policy, relevance_judge=RelevanceJudge(_Word(word)))
    client = Citelock(FakeBackend([OPENED, OPENED]), guard=guard)
    events = list(client.stream(LENGTH, CHUNKS, request_id="j-1"))
    whole = client.answer(LENGTH, CHUNKS, request_id="j-1")
    done = events[-1].answer
    assert done.decision == whole.decision and done.result.relevance == whole.result.relevance
    assert done.result.relevance is not None and done.result.relevance.judge_label == word


def test_guard_with_judges_keeps_every_other_field() -> None:
    from citelock.judges import LexicalJudge, RelevanceJudge

    policy = SurfacePolicy(name="docs", stakes="high", relevance="judged")
    guard = Guard(policy, LexicalJudge(), relevance_judge=RelevanceJudge(_Word("yes")), ordering=False)
    swapped = LexicalJudge()
    twin = guard.with_judges(judge=swapped)
    assert twin.judge is swapped and guard.judge is not swapped
    keep = {k: v for k, v in vars(guard).items() if k != "judge"}
    assert {k: v for k, v in vars(twin).items() if k != "judge"} == keep
