"""The test judges in tests/support/fakes.py behave as the tests that use them assume."""

from __future__ import annotations

from support.fakes import KeywordJudge, RecordingJudge


def test_keyword_judge_labels() -> None:
    judge = KeywordJudge()
    assert judge.judge("Revenue grew 12%.", "Revenue grew 12% in 2024.").label == "yes"
    assert judge.judge("Revenue grew 12% and margins expanded.", "Revenue grew 12% in 2024.").label == "partial"
    assert judge.judge("Freight is billed to the buyer.", "Revenue grew 12% in 2024.").label == "no"


def test_recording_judge_records() -> None:
    judge = RecordingJudge()
    judge.judge("a claim", "a passage")
    assert judge.calls == [("a claim", "a passage")]
