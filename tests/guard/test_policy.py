from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from citelock import Chunk, ReasonCode, UsageError
from citelock.guard import Guard, GuardResult, SurfacePolicy, iso_week
from citelock.judges import DEFAULT_JUDGE
from support.fakes import (
    REVENUE_CHUNKS,
    CountingCacheJudge,
    FailingJudge,
    KeywordJudge,
    RecordingJudge,
    make_record,
)

HIGH = SurfacePolicy(name="billing", stakes="high")
LOW_ALL = SurfacePolicy(name="chat", stakes="low", sample_rate=1.0)


def cite(text: str, chunk_id: str, span: str | None = None) -> dict[str, object]:
    citation: dict[str, object] = {"chunk_id": chunk_id}
    if span is not None:
        citation["span"] = span
    return {"text": text, "citations": [citation]}


# --- the policy record ---------------------------------------------------------------------------------------


def test_fail_closed_defaults_follow_stakes() -> None:
    assert SurfacePolicy(name="a", stakes="high").fail_closed is True
    assert SurfacePolicy(name="a", stakes="low", sample_rate=0.2).fail_closed is False
    assert SurfacePolicy(name="a", stakes="low", fail_closed=True).fail_closed is True


def test_high_stakes_refuses_sampling() -> None:
    with pytest.raises(ValidationError, match=r"sample_rate must be 1\.0"):
        SurfacePolicy(name="a", stakes="high", sample_rate=0.5)


def test_policy_rejects_bad_values() -> None:
    with pytest.raises(ValidationError):
        SurfacePolicy(name="a", stakes="medium")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        SurfacePolicy(name="a", stakes="low", sample_rate=1.5)
    with pytest.raises(ValidationError):
        SurfacePolicy(name="a", stakes="low", typo=1)  # type: ignore[call-arg]


# --- sampling ------------------------------------------------------------------------------------------------


def test_sampling_is_deterministic_and_near_the_rate() -> None:
    policy = SurfacePolicy(name="chat", stakes="low", sample_rate=0.3, seed=11)
    keys = [(f"req-{i}", c, x) for i in range(500) for c in range(3) for x in range(2)]
    first = [policy.sampled(*k) for k in keys]
    again = [SurfacePolicy(name="chat", stakes="low", sample_rate=0.3, seed=11).sampled(*k) for k in keys]
    assert first == again
    share = sum(first) / len(first)
    assert 0.27 < share < 0.33
    other_seed = [SurfacePolicy(name="chat", stakes="low", sample_rate=0.3, seed=12).sampled(*k) for k in keys]
    assert other_seed != first
    # a larger rate samples a superset (same hash draw, higher threshold)
    wider = [SurfacePolicy(name="chat", stakes="low", sample_rate=0.6, seed=11).sampled(*k) for k in keys]
    assert all(w for f, w in zip(first, wider, strict=True) if f)


def test_replayed_request_judges_the_same_citations() -> None:
    policy = SurfacePolicy(name="chat", stakes="low", sample_rate=0.5, seed=3)
    claims = {"claims": [cite("Revenue grew 12%.", "c1") for _ in range(12)]}
    runs = []
    for _ in range(3):
        record = make_record("q?", REVENUE_CHUNKS, request_id="req-replay")
        result = Guard(policy, KeywordJudge()).run(record, claims)
        runs.append([s.status for s in result.support])
    assert runs[0] == runs[1] == runs[2]
    assert {"judged", "skipped_sampling"} == set(runs[0])
    other_record = make_record("q?", REVENUE_CHUNKS, request_id="req-other")
    other = Guard(policy, KeywordJudge()).run(other_record, claims)
    assert [s.status for s in other.support] != runs[0]


def test_high_stakes_judges_every_survivor() -> None:
    claims = {"claims": [cite("Revenue grew 12%.", "c1") for _ in range(10)]}
    result = Guard(HIGH, KeywordJudge()).run(make_record("q?", REVENUE_CHUNKS), claims)
    assert all(s.status == "judged" for s in result.support)
    assert result.accounting.judge_calls == 1  # identical (claim, passage) pairs are judged once per answer
    assert result.accounting.saved_by_sampling == 0


def test_rate_zero_needs_no_judge_and_nonzero_gets_the_default() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    none = SurfacePolicy(name="chat", stakes="low", sample_rate=0.0)
    result = Guard(none, None).run(record, {"claims": [cite("Dividends were suspended.", "c1")]})
    assert result.decision == "pass"  # nothing deterministic fails, and nothing was judged
    assert result.accounting.saved_by_sampling == 1
    assert Guard(none).judge is None
    judged = Guard(HIGH)  # a judging surface without a judge gets the default one, built with the guard
    assert judged.judge is not None and judged.judge.name == DEFAULT_JUDGE
    result = judged.run(record, {"claims": [cite("Revenue grew 12% in 2024.", "c1")]})
    assert [s.status for s in result.support] == ["judged"] and result.support[0].judge == DEFAULT_JUDGE
    with pytest.raises(UsageError, match="take effect with a policy"):
        Guard(None, KeywordJudge())


# --- ordering ------------------------------------------------------------------------------------------------


def _seeded_answers(seed: int, count: int) -> list[tuple[str, list[Chunk], dict[str, object]]]:
    """Answers with known defects: bad ids, bad spans, mis-attributed spans, wrong numbers, unsupported prose."""
    rng = random.Random(seed)
    subjects = ["revenue", "headcount", "inventory", "churn", "backlog", "capex", "payroll", "refunds"]
    out = []
    for n in range(count):
        picked = rng.sample(subjects, 4)
        chunks = [
            Chunk(id=f"c{i + 1}", text=f"The {s} rose {10 + i}% in the third quarter.", rank=i + 1)
            for i, s in enumerate(picked)
        ]
        claims = []
        for _ in range(rng.randint(3, 5)):
            i = rng.randrange(len(chunks))
            s, good = picked[i], chunks[i]
            kind = rng.choice(["good", "good", "bad_id", "bad_span", "other_span", "number", "unsupported"])
            if kind == "good":
                claims.append(cite(f"The {s} rose {10 + i}%.", good.id, f"{s} rose {10 + i}%"))
            elif kind == "bad_id":
                claims.append(cite(f"The {s} rose {10 + i}%.", f"c-{900 + i}"))
            elif kind == "bad_span":
                claims.append(cite(f"The {s} rose {10 + i}%.", good.id, f"{s} fell sharply"))
            elif kind == "other_span":
                j = (i + 1) % len(chunks)
                claims.append(cite(f"The {s} rose {10 + i}%.", good.id, f"{picked[j]} rose {10 + j}%"))
            elif kind == "number":
                claims.append(cite(f"The {s} rose {50 + i}%.", good.id))
            else:
                claims.append(cite(f"The {s} was audited twice.", good.id))
        out.append((f"req-{seed}-{n}", chunks, {"claims": claims}))
    return out


def _defects(result: GuardResult) -> set[tuple[int, int | None]]:
    return {(f.claim_index, f.citation_index) for f in result.report.findings} | {
        (f.claim_index, None) for f in result.report.findings
    }


def test_ordering_catches_the_same_defects_with_fewer_calls() -> None:
    answers = _seeded_answers(seed=5, count=30)
    ordered_calls = all_calls = saved = 0
    defective_claims = 0
    for request_id, chunks, answer in answers:
        record = make_record("What rose?", chunks, request_id=request_id)
        ordered_judge, all_judge = RecordingJudge(), RecordingJudge()
        ordered = Guard(HIGH, ordered_judge).run(record, answer)
        everything = Guard(HIGH, all_judge, ordering=False).run(record, answer)
        defective = {ci for ci, _ in _defects(ordered)}
        assert defective == {ci for ci, _ in _defects(everything)}, request_id
        assert ordered.decision == everything.decision
        defective_claims += len(defective)
        ordered_calls += len(ordered_judge.calls)
        all_calls += len(all_judge.calls)
        saved += ordered.accounting.saved_by_ordering
        a = ordered.accounting
        # skipped citations save at most one call each (less when an identical pair is judged anyway)
        assert 0 <= everything.accounting.judge_calls - a.judge_calls <= a.saved_by_ordering
    assert defective_claims > 20  # the seeded set really is defective
    assert saved > 0
    assert ordered_calls < all_calls


def test_citations_failing_numbers_are_not_judged() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    judge = RecordingJudge()
    result = Guard(HIGH, judge).run(record, {"claims": [cite("Revenue grew 15%.", "c1")]})
    assert [f.reason for f in result.report.findings] == [ReasonCode.NUMBER_MISMATCH]
    assert judge.calls == []
    assert result.support[0].status == "skipped_ordering"
    assert result.accounting.saved_by_ordering == 1


def test_accounting_partitions_every_citation() -> None:
    policy = SurfacePolicy(name="chat", stakes="low", sample_rate=0.5, seed=1)
    for request_id, chunks, answer in _seeded_answers(seed=9, count=20):
        result = Guard(policy, KeywordJudge()).run(make_record("q", chunks, request_id=request_id), answer)
        statuses = [s.status for s in result.support]
        a = result.accounting
        assert a.citations == len(statuses) == len(result.report.citations)
        assert statuses.count("skipped_ordering") == a.saved_by_ordering
        assert statuses.count("skipped_sampling") == a.saved_by_sampling
        assert statuses.count("no_passage") == a.no_passage
        assert (
            statuses.count("judged")
            + statuses.count("error")
            + a.saved_by_ordering
            + a.saved_by_sampling
            + (a.no_passage)
            == a.citations
        )


def test_cache_hits_are_counted_from_a_caching_judge() -> None:
    judge = CountingCacheJudge()
    record = make_record("q?", REVENUE_CHUNKS)
    answer = {"claims": [cite("Revenue grew 12%.", "c1"), cite("Operating margins expanded.", "c2")]}
    first = Guard(HIGH, judge).run(record, answer)
    second = Guard(HIGH, judge).run(record, answer)
    assert first.accounting.cache_hits == 0
    assert second.accounting.cache_hits == second.accounting.judge_calls == 2


# --- fail closed ---------------------------------------------------------------------------------------------


def test_high_stakes_fails_closed_on_judge_error() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(HIGH, FailingJudge()).run(record, {"claims": [cite("Revenue grew 12%.", "c1")]})
    assert [f.reason for f in result.report.findings] == [ReasonCode.CHECK_ERROR]
    assert result.decision == "block"


def test_low_stakes_records_judge_error_without_blocking() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(LOW_ALL, FailingJudge()).run(record, {"claims": [cite("Revenue grew 12%.", "c1")]})
    assert [f.reason for f in result.report.findings] == [ReasonCode.CHECK_ERROR]
    assert not result.report.ok
    assert result.decision == "pass"


def test_a_check_that_raises_fails_closed_on_high_stakes(monkeypatch: pytest.MonkeyPatch) -> None:
    import citelock.guard._fold as fold_module  # the guard's per-claim free checks

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("index corrupted")

    monkeypatch.setattr(fold_module, "check_claim", broken)
    record = make_record("q?", REVENUE_CHUNKS)
    answer = {"claims": [cite("Revenue grew 12%.", "c1")]}
    high = Guard(HIGH, KeywordJudge()).run(record, answer)
    low = Guard(LOW_ALL, KeywordJudge()).run(record, answer)
    for result in (high, low):
        (finding,) = result.report.findings
        assert finding.reason is ReasonCode.CHECK_ERROR
        assert "index corrupted" in finding.detail
    assert high.decision == "block"
    assert low.decision == "pass"


def test_findings_block_on_any_surface() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(LOW_ALL, KeywordJudge()).run(record, {"claims": [cite("Revenue grew 12%.", "c-999")]})
    assert result.decision == "block"
    assert result.support[0].status == "no_passage"


def test_result_round_trips_as_json_and_carries_the_week() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    result = Guard(HIGH, KeywordJudge()).run(record, {"claims": [cite("Operating margins expanded.", "c1")]})
    assert GuardResult.model_validate_json(result.model_dump_json()) == result
    assert result.week == iso_week(record)
    assert result.week.startswith(str(record.created_at.isocalendar()[0]))
