"""The support layer and the policy with the library's own judges (not test doubles)."""

from __future__ import annotations

from pathlib import Path

import citelock.judges as judges
from citelock import Chunk, ReasonCode
from citelock.guard import Guard, PromptIndex, SurfacePolicy
from citelock.store import CachedJudge
from support.fakes import REVENUE_CHUNKS, make_record

HIGH = SurfacePolicy(name="billing", stakes="high")


def cite(text: str, chunk_id: str) -> dict[str, object]:
    return {"text": text, "citations": [{"chunk_id": chunk_id}]}


def test_lexical_judge_diagnoses_wrong_chunk_and_unsupported() -> None:
    record = make_record("q?", REVENUE_CHUNKS)
    answer = {
        "claims": [
            cite("Revenue grew 12% in 2024.", "c1"),
            cite("Operating margins expanded.", "c1"),
            cite("The warranty covers labour for ninety days.", "c1"),
        ]
    }
    result = Guard(HIGH, judges.LexicalJudge()).run(record, answer)
    assert [(f.claim_index, f.reason, f.related_chunk_id) for f in result.report.findings] == [
        (1, ReasonCode.WRONG_CHUNK, "c2"),
        (2, ReasonCode.UNSUPPORTED, None),
    ]
    assert all(f.judge_version == "lexical " + judges.LexicalJudge().version for f in result.report.findings)
    assert result.decision == "block"


def test_offline_judge_verdicts_are_isolated_from_question_and_other_chunks() -> None:
    judge = judges.OfflineJudge()
    claims = {"claims": [cite("Revenue grew 12% in 2024.", "c1"), cite("Operating margins expanded.", "c2")]}
    variants = [
        ("How did revenue do?", REVENUE_CHUNKS),
        ("Something else entirely, about freight and clause 7?", REVENUE_CHUNKS[::-1]),
        ("q?", [*REVENUE_CHUNKS[:2], Chunk(id="x1", text="Margins collapsed and revenue fell sharply in 2024.")]),
    ]
    seen = []
    for question, chunks in variants:
        record = make_record(question, chunks)
        result = Guard(HIGH, judge).run(record, claims)
        seen.append([(s.label, s.raw) for s in result.support])
        index = PromptIndex.build(record)
        direct = judge.judge("Revenue grew 12% in 2024.", index.body(index.by_id["c1"]))
        assert (direct.label, direct.raw) == seen[-1][0]
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][0][0] == "yes"  # a verbatim restatement of the cited passage


def test_cached_offline_judge_counts_cache_hits_and_keeps_verdicts(tmp_path: Path) -> None:
    judge = CachedJudge(judges.OfflineJudge(), tmp_path / "verdicts.db")
    record = make_record("q?", REVENUE_CHUNKS)
    answer = {"claims": [cite("Revenue grew 12% in 2024.", "c1"), cite("Freight costs are billed to the buyer.", "c3")]}
    first = Guard(HIGH, judge).run(record, answer)
    second = Guard(HIGH, judge).run(record, answer)
    assert first.accounting.cache_hits == 0
    assert first.accounting.judge_calls == 2
    assert second.accounting.cache_hits == second.accounting.judge_calls == 2
    assert [s.label for s in first.support] == [s.label for s in second.support]
    assert second.report.findings == first.report.findings
