"""Repair instead of blocking: on_fail = block | drop_claim | mark, per claim, with rendering and the queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import citelock
from citelock import FakeBackend, ReasonCode
from citelock.guard import ClaimOutcome, GuardResult, SurfacePolicy
from citelock.judges._routing import Routing
from citelock.store import PromptLog, ReviewQueue
from support.fakes import REVENUE_CHUNKS, ROUTING, FailingJudge, ShareJudge, make_record
from support.guarding import guard_and_store

GOOD = {"text": "Revenue grew 12% in 2024.", "citations": [{"chunk_id": "c1", "span": "Revenue grew 12%"}]}
UNSUPPORTED = {"text": "Dividends were suspended.", "citations": [{"chunk_id": "c1"}]}
NUMBER = {"text": "Revenue grew 15% in 2024.", "citations": [{"chunk_id": "c1"}]}
FABRICATED = {"text": "Operating margins expanded to 30% in 2024.", "citations": [{"chunk_id": "c-999"}]}
UNCITED = {"text": "The buyer pays the freight costs under clause 7."}
REVIEW = {"text": "Revenue grew sharply in Europe.", "citations": [{"chunk_id": "c1"}]}


def surface(on_fail: str, stakes: str = "high", **extra: object) -> SurfacePolicy:
    return SurfacePolicy.model_validate(
        {"name": "billing", "stakes": stakes, "on_fail": on_fail, "routing": ROUTING, **extra}
    )


def run(*claims: dict[str, object], policy: SurfacePolicy, **kwargs: object) -> GuardResult:
    record = make_record("What happened?", REVENUE_CHUNKS)
    judge = kwargs.pop("judge", None) or ShareJudge()
    return guard_and_store(record, {"claims": list(claims)}, policy=policy, judge=judge, **kwargs)  # type: ignore[arg-type]


def actions(result: GuardResult) -> list[tuple[str, tuple[str, ...]]]:
    return [(o.action, tuple(r.value for r in o.reasons)) for o in result.claims]


@pytest.mark.parametrize(
    ("on_fail", "decision", "action"),
    [("block", "block", "block"), ("drop_claim", "repaired", "drop"), ("mark", "repaired", "mark")],
)
def test_on_fail_decides_what_a_failing_claim_does(tmp_path: Path, on_fail: str, decision: str, action: str) -> None:
    queue = ReviewQueue(tmp_path / "q.db")
    result = run(GOOD, UNSUPPORTED, policy=surface(on_fail), queue=queue)
    assert result.decision == decision
    assert actions(result) == [("serve", ()), (action, ("UNSUPPORTED",))]
    assert result.served is (decision != "block")
    assert [o.claim_index for o in result.dropped] == ([1] if action == "drop" else [])
    assert [o.claim_index for o in result.marked] == ([1] if action == "mark" else [])
    # the failing claim is queued whatever the surface does with it
    assert [(e.reason, e.claim_index) for e in queue] == [(ReasonCode.UNSUPPORTED, 1)]


def test_every_per_claim_failure_is_dropped_with_its_reason() -> None:
    result = run(GOOD, NUMBER, FABRICATED, UNCITED, UNSUPPORTED, policy=surface("drop_claim"))
    assert result.decision == "repaired"
    got = actions(result)
    assert got[0] == ("serve", ())
    assert got[1] == ("drop", ("NUMBER_MISMATCH",))
    assert got[2][0] == "drop" and got[2][1][0] in {"ID_NOT_IN_PROMPT", "FABRICATED_ID"}
    assert got[3] == ("drop", ("UNCITED_CLAIM",))
    assert got[4] == ("drop", ("UNSUPPORTED",))
    assert [o.claim for o in result.dropped] == [c["text"] for c in (NUMBER, FABRICATED, UNCITED, UNSUPPORTED)]


def test_dropping_every_factual_claim_refuses_the_answer() -> None:
    result = run(UNSUPPORTED, NUMBER, policy=surface("drop_claim"))
    assert actions(result) == [("drop", ("UNSUPPORTED",)), ("drop", ("NUMBER_MISMATCH",))]
    assert result.decision == "block" and not result.served
    marked = run(UNSUPPORTED, NUMBER, policy=surface("mark"))
    assert marked.decision == "repaired"  # marked claims are still served, visibly unverified


def test_a_claim_in_review_on_high_stakes_is_dropped_but_queued_as_review(tmp_path: Path) -> None:
    queue = ReviewQueue(tmp_path / "q.db")
    result = run(GOOD, REVIEW, policy=surface("drop_claim"), queue=queue)
    assert actions(result) == [("serve", ()), ("drop", ("UNCERTAIN_SUPPORT",))]
    assert result.decision == "repaired"
    assert [e.reason for e in queue] == [ReasonCode.UNCERTAIN_SUPPORT]  # review, not a failure
    served = run(GOOD, REVIEW, policy=surface("drop_claim", serve_unverified=True))
    assert served.decision == "pass" and actions(served)[1] == ("serve", ("UNCERTAIN_SUPPORT",))


def test_a_fail_closed_check_error_refuses_the_answer_even_when_dropping() -> None:
    broken = FailingJudge(trigger="Operating")  # raises on c2 only
    claims = (GOOD, {"text": "Operating margins expanded to 30% in 2024.", "citations": [{"chunk_id": "c2"}]})
    no_routing = {"routing": None}
    high = run(*claims, policy=surface("drop_claim", **no_routing), judge=broken)
    assert high.decision == "block"
    assert actions(high)[1] == ("drop", ("CHECK_ERROR",))
    low = run(*claims, policy=surface("drop_claim", stakes="low", sample_rate=1.0, **no_routing), judge=broken)
    assert low.decision == "pass"  # recorded, not fail-closed: the claim is served
    assert actions(low) == [("serve", ()), ("serve", ("CHECK_ERROR",))]


def test_outcomes_cover_every_claim_and_round_trip() -> None:
    result = run(GOOD, UNSUPPORTED, REVIEW, policy=surface("mark"))
    assert [o.claim_index for o in result.claims] == [0, 1, 2]
    assert GuardResult.model_validate_json(result.model_dump_json()) == result
    assert result.claims[1] == ClaimOutcome(
        claim_index=1, claim=UNSUPPORTED["text"], action="mark", reasons=(ReasonCode.UNSUPPORTED,)
    )


# --- the wrapper API and rendering -----------------------------------------------------------------------------

CHUNKS = [
    {"id": "a", "text": "The bridge opened in 1932.", "source": "https://example.org/a"},
    {"id": "b", "text": "The bridge spans 880 meters."},
    {"id": "c", "text": "The bridge is closed on Sundays."},
]
ANSWER = json.dumps(
    {
        "claims": [
            {"text": "The bridge opened in 1932.", "citations": [{"chunk_id": "a", "span": "bridge opened in 1932"}]},
            {"text": "The bridge was painted gold.", "citations": [{"chunk_id": "c", "span": "closed on Sundays"}]},
            {"text": "The bridge spans 880 meters.", "citations": [{"chunk_id": "b", "span": "spans 880 meters"}]},
        ]
    }
)


def answer(on_fail: str, **kwargs: object) -> citelock.GuardedAnswer:
    policy = SurfacePolicy.model_validate({"name": "docs", "stakes": "high", "on_fail": on_fail, "routing": ROUTING})
    return citelock.answer(
        "Tell me about the bridge.", CHUNKS, backend=FakeBackend([ANSWER]), surface=policy, judge=ShareJudge(), **kwargs
    )  # type: ignore[arg-type]


def test_drop_claim_renders_without_the_claim_and_its_footnote() -> None:
    result = answer("drop_claim")
    assert result.decision == "repaired" and result.served and not result.ok
    assert result.rendered == (
        "The bridge opened in 1932.[1] The bridge spans 880 meters.[2]\n\n"
        "[1] a (https://example.org/a): “bridge opened in 1932”\n"
        "[2] b: “spans 880 meters”"
    )
    (removed,) = result.result.dropped
    assert (removed.claim_index, removed.claim, removed.reasons) == (
        1,
        "The bridge was painted gold.",
        (ReasonCode.UNSUPPORTED,),
    )
    assert result.result.marked == ()
    assert len(result.answer.claims) == 3  # the record keeps the whole answer; only the rendering repairs it


def test_mark_renders_the_claim_marked_unverified() -> None:
    result = answer("mark")
    assert result.decision == "repaired" and not result.ok
    assert result.rendered.split("\n\n")[0] == (
        "The bridge opened in 1932.[1] The bridge was painted gold.[2] (unverified: UNSUPPORTED) "
        "The bridge spans 880 meters.[3]"
    )
    assert [m.claim_index for m in result.result.marked] == [1] and result.result.dropped == ()


def test_a_blocked_answer_renders_whole_for_inspection() -> None:
    result = answer("block")
    assert result.decision == "block" and not result.served and not result.ok
    assert "The bridge was painted gold.[2]" in result.rendered and "(unverified" not in result.rendered
    assert result.result.dropped == () and result.result.marked == ()


def test_answer_refuses_a_mismatched_routing_before_logging(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    other = Routing(pass_at=0.8, fail_below=0.2, judge="offline", judge_version="9")
    policy = SurfacePolicy(name="docs", stakes="high", routing=other)
    fake = FakeBackend([ANSWER])
    with pytest.raises(citelock.UsageError, match=r"offline 9.*share-test 1"):
        citelock.answer("q?", CHUNKS, backend=fake, surface=policy, judge=ShareJudge(), log=db)
    assert fake.calls == [] and not db.exists()
    fine = citelock.answer("q?", CHUNKS, backend=FakeBackend([ANSWER]), surface=SurfacePolicy(
        name="docs", stakes="high", routing=ROUTING), judge=ShareJudge(), log=db)  # fmt: skip
    assert len(PromptLog(db)) == 1 and fine.decision == "block"


def test_metrics_count_repaired_answers_reviews_and_escalations() -> None:
    from test_policy_routing import ScriptedJudge

    from citelock.metrics import compute_metrics

    results = [
        run(GOOD, policy=surface("drop_claim")),  # pass
        run(GOOD, UNSUPPORTED, policy=surface("drop_claim")),  # repaired
        run(GOOD, REVIEW, policy=surface("mark")),  # repaired (review marked on high stakes)
        run(UNSUPPORTED, policy=surface("drop_claim")),  # block: nothing factual left
        run(GOOD, REVIEW, policy=surface("block"), escalate=ScriptedJudge({REVIEW["text"]: "yes"})),  # pass
    ]
    assert [r.decision for r in results] == ["pass", "repaired", "repaired", "block", "pass"]
    m = compute_metrics(results)
    assert m.get("pass_rate").value == pytest.approx(2 / 5)
    assert m.get("repaired_rate").value == pytest.approx(2 / 5)
    assert m.get("review_routed").value == 2 and m.get("escalations").value == 1


# --- a claim citing several chunks: only its failing citations go ------------------------------------------------

TWO_GOOD_ONE_WRONG = {
    "text": "Revenue grew 12% in 2024.",
    "citations": [{"chunk_id": "c3"}, {"chunk_id": "c1", "span": "Revenue grew 12%"}, {"chunk_id": "c-999"}],
}


def test_drop_claim_removes_only_the_failing_citations_when_another_passes(tmp_path: Path) -> None:
    queue = ReviewQueue(tmp_path / "q.db")
    result = run(TWO_GOOD_ONE_WRONG, policy=surface("drop_claim"), queue=queue)
    (outcome,) = result.claims
    assert outcome.action == "serve" and outcome.removed_citations == (0, 2)
    assert ReasonCode.WRONG_CHUNK in outcome.reasons  # c3 says nothing about revenue; c1, also cited, does
    assert {ReasonCode.ID_NOT_IN_PROMPT, ReasonCode.FABRICATED_ID} & set(outcome.reasons)  # c-999
    assert result.decision == "repaired" and result.served and result.trimmed == (outcome,)
    assert result.dropped == ()
    # both failing citations are still queued for review
    assert sorted(e.citation_index for e in queue if e.citation_index is not None) == [0, 2]


@pytest.mark.parametrize("on_fail", ["block", "mark"])
def test_block_and_mark_still_act_on_the_whole_claim(on_fail: str) -> None:
    result = run(TWO_GOOD_ONE_WRONG, policy=surface(on_fail))
    (outcome,) = result.claims
    assert outcome.action == on_fail and outcome.removed_citations == ()


def test_a_claim_level_failure_drops_the_claim_whatever_its_citations() -> None:
    number = {"text": "Revenue grew 15% in 2024.", "citations": [{"chunk_id": "c1"}, {"chunk_id": "c2"}]}
    result = run(GOOD, number, policy=surface("drop_claim"))
    assert actions(result)[1][0] == "drop" and result.claims[1].removed_citations == ()
    every = {"text": "Dividends were suspended.", "citations": [{"chunk_id": "c1"}, {"chunk_id": "c2"}]}
    result = run(GOOD, every, policy=surface("drop_claim"))  # no citation of it passes: dropped whole
    assert actions(result)[1] == ("drop", ("UNSUPPORTED",)) and result.trimmed == ()


def test_a_trimmed_claim_renders_without_its_removed_citations() -> None:
    chunks = [*CHUNKS, {"id": "d", "text": "Bridges are often painted red."}]
    answer_json = json.dumps(
        {
            "claims": [
                {
                    "text": "The bridge opened in 1932.",
                    "citations": [
                        {"chunk_id": "d", "span": "often painted red"},
                        {"chunk_id": "a", "span": "bridge opened in 1932"},
                    ],
                }
            ]
        }
    )
    policy = SurfacePolicy.model_validate(
        {"name": "docs", "stakes": "high", "on_fail": "drop_claim", "routing": ROUTING}
    )
    result = citelock.answer(
        "When did it open?", chunks, backend=FakeBackend([answer_json]), surface=policy, judge=ShareJudge()
    )
    assert result.decision == "repaired" and result.served
    assert result.rendered == "The bridge opened in 1932.[1]\n\n[1] a (https://example.org/a): “bridge opened in 1932”"
    (trimmed,) = result.result.trimmed
    assert trimmed.removed_citations == (0,) and trimmed.reasons == (ReasonCode.WRONG_CHUNK,)
