from __future__ import annotations

import pytest

from citelock import Chunk, InputError, Layer, ReasonCode, record_from_messages
from citelock.guard import Guard, PromptIndex, SupportTarget, SurfacePolicy, judge_support
from support.fakes import (
    REVENUE_CHUNKS,
    FailingJudge,
    KeywordJudge,
    RecordingJudge,
    make_record,
)

HIGH = SurfacePolicy(name="billing", stakes="high")


def cite(text: str, chunk_id: str, span: str | None = None) -> dict[str, object]:
    citation: dict[str, object] = {"chunk_id": chunk_id}
    if span is not None:
        citation["span"] = span
    return {"text": text, "citations": [citation]}


def test_judge_sees_claim_and_the_one_cited_body_as_sent() -> None:
    record = make_record("How did revenue do?", REVENUE_CHUNKS)
    judge = RecordingJudge()
    result = Guard(HIGH, judge).run(record, {"claims": [cite("Revenue grew 12%.", "c1", "Revenue grew 12%")]})
    body = PromptIndex.build(record).body(PromptIndex.build(record).by_id["c1"])
    assert judge.calls == [("Revenue grew 12%.", body)]
    assert "How did revenue do" not in judge.calls[0][1]
    assert result.decision == "pass"
    assert result.report.ok
    assert Layer.SUPPORT in result.report.layers
    assert [s.label for s in result.support] == ["yes"]


def test_partial_support_when_no_other_chunk_supports() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(HIGH, KeywordJudge()).run(record, {"claims": [cite("Revenue grew and dividends doubled.", "c1")]})
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.PARTIAL_SUPPORT
    assert finding.layer is Layer.SUPPORT
    assert finding.related_chunk_id is None
    assert finding.passage == "Revenue grew 12% in 2024."
    assert finding.verdicts["provenance"] == "pass"
    assert finding.verdicts["numbers"] == "pass"
    assert finding.verdicts["support"] == "partial"
    assert finding.judge_raw is not None and finding.judge_raw.startswith("partial")
    assert finding.judge_version == "keyword-test 1"
    assert result.decision == "block"
    # diagnosis judged both other chunks, neither said yes
    assert result.support[0].diagnosis == {"c2": "no", "c3": "no"}


def test_wrong_chunk_names_the_supporting_chunk() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(HIGH, KeywordJudge()).run(record, {"claims": [cite("Operating margins expanded.", "c1")]})
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.WRONG_CHUNK
    assert finding.related_chunk_id == "c2"
    assert finding.chunk_id == "c1"
    assert finding.verdicts["diagnosis"] == "yes:c2"
    assert result.support[0].related_chunk_id == "c2"
    assert result.accounting.judge_calls == 1
    assert result.accounting.diagnosis_calls == 1  # stops at the first supporting chunk


def test_unsupported_when_nothing_supports() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(HIGH, KeywordJudge()).run(record, {"claims": [cite("Dividends were suspended.", "c3")]})
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.UNSUPPORTED
    assert "nor does any other assembled chunk" in finding.detail
    assert result.accounting.diagnosis_calls == 2


def test_diagnosis_can_be_switched_off() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    policy = SurfacePolicy(name="s", stakes="high", diagnose=False)
    result = Guard(policy, KeywordJudge()).run(record, {"claims": [cite("Operating margins expanded.", "c1")]})
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.UNSUPPORTED
    assert result.accounting.diagnosis_calls == 0


def test_isolation_question_and_other_chunks_never_change_a_verdict() -> None:
    claims = {
        "claims": [
            cite("Revenue grew 12%.", "c1"),
            cite("Revenue grew and dividends doubled.", "c1"),
            cite("Dividends were suspended.", "c1"),
        ]
    }
    variants = [
        ("How did revenue do?", REVENUE_CHUNKS),
        ("Completely different question about freight?", REVENUE_CHUNKS),
        ("q?", [REVENUE_CHUNKS[0]]),
        ("q?", [Chunk(id="z9", text="Dividends were suspended in 2023."), REVENUE_CHUNKS[0]]),
        ("Tell me about 2024 revenue and dividends", [*REVENUE_CHUNKS[::-1]]),
    ]
    seen_labels = []
    seen_first_calls = []
    for question, chunks in variants:
        judge = RecordingJudge()
        result = Guard(HIGH, judge).run(make_record(question, chunks), claims)
        seen_labels.append([s.label for s in result.support])
        # the first call per citation is (claim, cited passage): identical in every variant
        cited_calls = [c for c in judge.calls if c[1] == "Revenue grew 12% in 2024."]
        seen_first_calls.append(cited_calls)
        for claim, passage in judge.calls:
            assert question not in passage and question not in claim
    assert all(labels == ["yes", "partial", "no"] for labels in seen_labels)
    assert all(calls == seen_first_calls[0] for calls in seen_first_calls)
    # but the diagnosis does depend on the other chunks: that is its job
    with_z9 = Guard(HIGH, KeywordJudge()).run(make_record("q?", variants[3][1]), claims)
    reasons = [f.reason for f in with_z9.report.findings]
    assert reasons == [ReasonCode.PARTIAL_SUPPORT, ReasonCode.WRONG_CHUNK]


def test_truncated_chunk_judge_sees_only_the_part_that_was_sent() -> None:
    full = "The warranty covers parts for two years. Labour is covered for ninety days only after purchase."
    sent = full[:60]
    record = record_from_messages(
        [{"role": "user", "content": f"Sources:\n[w1] {sent}\nQuestion: warranty?"}],
        [{"id": "w1", "text": full}],
        question="warranty?",
    )
    assert record.chunks[0].status == "truncated"
    judge = RecordingJudge()
    result = Guard(HIGH, judge).run(record, {"claims": [cite("The warranty covers parts.", "w1")]})
    assert judge.calls[0][1] == sent.strip()
    assert "ninety" not in judge.calls[0][1]
    assert result.decision == "pass"


def test_judge_error_becomes_check_error_finding() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(HIGH, FailingJudge()).run(record, {"claims": [cite("Revenue grew 12%.", "c1")]})
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.CHECK_ERROR
    assert "timed out" in finding.detail
    assert finding.verdicts["support"] == "error"
    assert result.support[0].status == "error"
    assert result.accounting.errors == 1


def test_diagnosis_error_keeps_the_support_finding_and_adds_check_error() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    judge = FailingJudge(trigger="margins")  # only judging c2 fails
    result = Guard(HIGH, judge).run(record, {"claims": [cite("Dividends were suspended.", "c1")]})
    reasons = [f.reason for f in result.report.findings]
    assert reasons == [ReasonCode.UNSUPPORTED, ReasonCode.CHECK_ERROR]
    assert "may really be WRONG_CHUNK" in result.report.findings[1].detail


def test_judge_returning_a_non_verdict_is_a_check_error() -> None:
    class Broken:
        name = "broken"
        version = "0"

        def judge(self, claim: str, passage: str) -> str:
            return "yes"

    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(HIGH, Broken()).run(record, {"claims": [cite("Revenue grew 12%.", "c1")]})  # type: ignore[arg-type]
    (finding,) = result.report.findings
    assert finding.reason is ReasonCode.CHECK_ERROR
    assert "expected a citelock Verdict" in finding.detail


def test_judge_support_refuses_targets_outside_the_prompt() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    with pytest.raises(InputError, match="only citations that passed provenance"):
        judge_support(record, [SupportTarget(0, 0, "c-999", "x")], KeywordJudge())
