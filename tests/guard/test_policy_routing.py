"""Routing judged citations to pass / review / fail, escalating reviews, and routings that do not fit the judge."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from citelock import ReasonCode, UsageError, Verdict
from citelock.guard import GuardResult, SurfacePolicy
from citelock.judges._routing import Routing
from citelock.store import ReviewQueue
from support.fakes import REVENUE_CHUNKS, ROUTING, FailingJudge, KeywordJudge, ShareJudge, make_record
from support.guarding import guard_and_store


@dataclass
class ScriptedJudge:
    """A 'stronger' judge answering a fixed label per claim text, or per passage with ``by="passage"`` (no score),
    recording what it was asked about."""

    labels: dict[str, str]
    by: str = "claim"
    name: str = "strong-test"
    version: str = "7"
    calls: list[str] = field(default_factory=list)

    def judge(self, claim: str, passage: str) -> Verdict:
        asked = passage if self.by == "passage" else claim
        self.calls.append(asked)
        return Verdict(label=self.labels[asked], raw=self.labels[asked], judge=self.name, version=self.version)  # type: ignore[arg-type]


def cite(text: str, chunk_id: str) -> dict[str, object]:
    return {"text": text, "citations": [{"chunk_id": chunk_id}]}


def run(*claims: dict[str, object], policy: SurfacePolicy, judge: object = None, **kwargs: object) -> GuardResult:
    record = make_record("What happened?", REVENUE_CHUNKS)
    return guard_and_store(record, {"claims": list(claims)}, policy=policy, judge=judge or ShareJudge(), **kwargs)  # type: ignore[arg-type]


HIGH = SurfacePolicy(name="billing", stakes="high", routing=ROUTING)
LOW = SurfacePolicy(name="chat", stakes="low", sample_rate=1.0, routing=ROUTING)


# --- pass / fail -----------------------------------------------------------------------------------------------


def test_the_score_not_the_label_decides_a_pass() -> None:
    # 3 of 4 content words in c1: the judge's label is partial, but its score reaches pass_at
    result = run(cite("Revenue grew 12% in Europe.", "c1"), policy=HIGH)
    (check,) = result.support
    assert (check.label, check.score, check.route) == ("partial", 0.75, "pass")
    assert result.report.findings == () and result.decision == "pass"
    assert result.claims[0].action == "serve" and result.claims[0].reasons == ()
    # without a routing the same verdict fails by its label, as before
    plain = run(cite("Revenue grew 12% in Europe.", "c1"), policy=SurfacePolicy(name="billing", stakes="high"))
    assert [f.reason for f in plain.report.findings] == [ReasonCode.PARTIAL_SUPPORT]
    assert plain.support[0].route == "fail" and plain.decision == "block"


def test_fail_routes_are_diagnosed_with_the_same_thresholds() -> None:
    result = run(
        cite("Dividends were suspended.", "c1"),
        cite("Operating margins expanded in Europe.", "c1"),
        policy=HIGH,
    )
    unsupported, wrong = result.report.findings
    assert unsupported.reason is ReasonCode.UNSUPPORTED
    assert "nor does any other assembled chunk" in unsupported.detail and "score 0.000" in unsupported.detail
    # c2 scores 0.75 (label partial): it routes to pass, so the claim is re-citable
    assert wrong.reason is ReasonCode.WRONG_CHUNK and wrong.related_chunk_id == "c2"
    assert wrong.verdicts["route"] == "fail" and wrong.verdicts["diagnosis"] == "yes:c2"
    # a stricter pass threshold: c2 would only be "review", which is not support
    strict = Routing(pass_at=0.9, fail_below=0.6, judge="share-test", judge_version="1")
    again = run(
        cite("Operating margins expanded in Europe.", "c1"),
        cite("Revenue grew sharply in Europe.", "c1"),
        policy=SurfacePolicy(name="billing", stakes="high", routing=strict),
    )
    assert [f.reason for f in again.report.findings] == [ReasonCode.UNSUPPORTED, ReasonCode.PARTIAL_SUPPORT]
    assert again.report.findings[0].related_chunk_id is None


# --- review ----------------------------------------------------------------------------------------------------


def test_review_without_a_stronger_judge_is_queued_as_uncertain(tmp_path) -> None:
    queue = ReviewQueue(tmp_path / "q.db")
    result = run(cite("Revenue grew sharply in Europe.", "c1"), policy=HIGH, queue=queue)
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.UNCERTAIN_SUPPORT and finding.layer.value == "support"
    assert "0.500" in finding.detail and "no stronger judge is configured" in finding.detail
    assert result.support[0].route == "review" and result.accounting.reviews == 1
    assert result.accounting.escalations == 0
    (entry,) = list(queue)
    assert entry.reason is ReasonCode.UNCERTAIN_SUPPORT and entry.calibratable
    # high stakes: a claim in review is not served as verified (on_fail=block refuses the answer)
    assert result.decision == "block" and result.claims[0].action == "block"
    assert result.claims[0].reasons == (ReasonCode.UNCERTAIN_SUPPORT,)


def test_low_stakes_serves_a_claim_in_review_and_still_queues_it(tmp_path) -> None:
    queue = ReviewQueue(tmp_path / "q.db")
    result = run(cite("Revenue grew sharply in Europe.", "c1"), policy=LOW, queue=queue)
    assert LOW.serve_unverified and not HIGH.serve_unverified
    assert result.decision == "pass"
    assert result.claims[0].action == "serve" and result.claims[0].reasons == (ReasonCode.UNCERTAIN_SUPPORT,)
    assert [e.reason for e in queue] == [ReasonCode.UNCERTAIN_SUPPORT]


@pytest.mark.parametrize(
    ("label", "route", "reasons"),
    [("yes", "pass", []), ("no", "fail", [ReasonCode.UNSUPPORTED]), ("partial", "fail", [ReasonCode.PARTIAL_SUPPORT])],
)
def test_review_escalates_to_the_stronger_judge_whose_label_decides(
    label: str, route: str, reasons: list[ReasonCode]
) -> None:
    claim = "Revenue grew sharply in Europe."
    strong = ScriptedJudge({claim: label})
    result = run(cite(claim, "c1"), cite("Revenue grew 12% in 2024.", "c1"), policy=HIGH, escalate=strong)
    assert strong.calls == [claim]  # only the review is escalated, never a clear pass
    first = result.support[0]
    assert (first.route, first.escalation_label, first.escalation_judge) == (route, label, "strong-test 7")
    assert first.label == "partial" and first.score == 0.5  # the first judge's verdict is kept beside it
    assert result.accounting.reviews == 1 and result.accounting.escalations == 1
    assert [f.reason for f in result.report.findings] == reasons
    if reasons:
        assert result.report.findings[0].judge_version == "strong-test 7"
        assert "escalated" in result.report.findings[0].detail
    assert result.decision == ("pass" if label == "yes" else "block")


def test_an_escalation_with_its_own_shipped_routing_can_stay_in_review(monkeypatch: pytest.MonkeyPatch) -> None:
    import citelock.guard._guard as guard_module

    strong_routing = Routing(pass_at=0.9, fail_below=0.1, judge="share-test", judge_version="2")
    monkeypatch.setattr(
        guard_module, "shipped_routing", lambda name, version: strong_routing if version == "2" else None
    )
    strong = ShareJudge(version="2")
    result = run(cite("Revenue grew sharply in Europe.", "c1"), policy=HIGH, escalate=strong)
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.UNCERTAIN_SUPPORT
    assert "the stronger judge was unsure too" in finding.detail
    assert result.support[0].escalation_score == 0.5 and result.support[0].route == "review"


def test_a_failing_escalation_is_a_check_error_and_the_claim_stays_in_review() -> None:
    result = run(cite("Revenue grew sharply in Europe.", "c1"), policy=HIGH, escalate=FailingJudge())
    assert [f.reason for f in result.report.findings] == [ReasonCode.UNCERTAIN_SUPPORT, ReasonCode.CHECK_ERROR]
    assert "escalation judge failing-test 1 failed" in result.report.findings[1].detail
    assert result.accounting.errors == 1 and result.decision == "block"


def test_diagnosis_escalates_an_unsure_other_chunk_like_the_citation_itself() -> None:
    # content words revenue, grew, margins, expanded: c1 and c2 each hold half (0.5, review), c3 none (fail)
    claim = "Revenue grew, margins expanded."
    c1, c2, c3 = (chunk.text for chunk in REVENUE_CHUNKS)
    strong = ScriptedJudge({c1: "no", c2: "yes", c3: "no"}, by="passage")
    result = run(cite(claim, "c1"), policy=HIGH, escalate=strong)
    (finding,) = result.report.findings
    # the stronger judge failed the cited c1; c2, unsure for the first judge, is passed by the stronger one
    assert finding.reason is ReasonCode.WRONG_CHUNK and finding.related_chunk_id == "c2"
    assert finding.verdicts["diagnosis"] == "yes:c2"
    assert strong.calls == [c1, c2]
    assert result.accounting.escalations == 2 and result.accounting.reviews == 1
    assert result.support[0].diagnosis == {"c2": "yes"}
    # the stronger judge fails c2 as well: UNSUPPORTED (c3 scores 0, a clear fail, and is never escalated)
    strict = ScriptedJudge({c1: "no", c2: "no", c3: "yes"}, by="passage")
    again = run(cite(claim, "c1"), policy=HIGH, escalate=strict)
    (finding,) = again.report.findings
    assert finding.reason is ReasonCode.UNSUPPORTED and "nor does any other assembled chunk" in finding.detail
    assert strict.calls == [c1, c2]  # c3 scores 0: a clear fail is never escalated
    assert again.support[0].diagnosis == {"c2": "no", "c3": "no"}


def test_a_failing_citation_names_the_other_chunks_the_judge_was_unsure_about() -> None:
    # margins, expanded, sharply, europe: c1 none (fail), c2 half (review), c3 none
    result = run(cite("Margins expanded sharply in Europe.", "c1"), policy=HIGH)
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.UNSUPPORTED and finding.related_chunk_id is None
    assert finding.verdicts["diagnosis"] == "unsure:c2"
    assert "no other assembled chunk passed (unsure about c2" in finding.detail
    assert "nor does any other" not in finding.detail


def test_a_failing_escalation_during_diagnosis_is_a_check_error() -> None:
    claim = "Revenue grew, margins expanded."
    c1 = REVENUE_CHUNKS[0].text

    @dataclass
    class FailsOnOthers:
        name: str = "strong-test"
        version: str = "7"

        def judge(self, claim: str, passage: str) -> Verdict:
            if passage != c1:
                raise RuntimeError("server went away")
            return Verdict(label="no", raw="", judge=self.name, version=self.version)

    result = run(cite(claim, "c1"), policy=HIGH, escalate=FailsOnOthers())
    unsupported, error = result.report.findings
    assert unsupported.reason is ReasonCode.UNSUPPORTED and unsupported.verdicts["diagnosis"] == "error"
    assert error.reason is ReasonCode.CHECK_ERROR and "escalation judge, judging against c2" in error.detail
    assert "may really be WRONG_CHUNK" in error.detail and result.accounting.errors == 1


# --- where the routing comes from ------------------------------------------------------------------------------


def test_a_routing_for_another_judge_or_version_is_refused_naming_both() -> None:
    for routing in (
        Routing(pass_at=0.8, fail_below=0.2, judge="offline", judge_version="1.2"),
        Routing(pass_at=0.8, fail_below=0.2, judge="share-test", judge_version="2"),
    ):
        policy = SurfacePolicy(name="billing", stakes="high", routing=routing)
        with pytest.raises(UsageError) as caught:
            run(cite("Revenue grew 12% in 2024.", "c1"), policy=policy)
        message = str(caught.value)
        assert f"{routing.judge} {routing.judge_version}" in message and "share-test 1" in message
        assert "billing" in message


def test_the_shipped_routing_applies_when_the_surface_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    import citelock.guard._policy as policy_module

    asked: list[tuple[str, str]] = []

    def shipped(name: str, version: str) -> Routing | None:
        asked.append((name, version))
        return ROUTING if (name, version) == ("share-test", "1") else None

    monkeypatch.setattr(policy_module, "shipped_routing", shipped)
    result = run(cite("Revenue grew sharply in Europe.", "c1"), policy=SurfacePolicy(name="b", stakes="high"))
    assert asked == [("share-test", "1")]
    assert result.support[0].route == "review"
    assert [f.reason for f in result.report.findings] == [ReasonCode.UNCERTAIN_SUPPORT]


def test_a_judge_without_scores_under_a_routing_is_a_check_error() -> None:
    routing = Routing(pass_at=0.8, fail_below=0.2, judge="keyword-test", judge_version="1")
    result = run(
        cite("Revenue grew 12% in 2024.", "c1"),
        policy=SurfacePolicy(name="billing", stakes="high", routing=routing),
        judge=KeywordJudge(),
    )
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.CHECK_ERROR and "gave no score" in finding.detail
    assert result.support[0].status == "error" and result.decision == "block"


def test_routed_results_round_trip_as_json() -> None:
    result = run(cite("Revenue grew sharply in Europe.", "c1"), cite("Dividends were cut.", "c2"), policy=LOW)
    again = GuardResult.model_validate_json(result.model_dump_json())
    assert again == result and again.policy.routing == ROUTING
