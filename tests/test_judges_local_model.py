"""The LLM judge's plumbing against the real bundled SmolLM2-135M (a tiny model: not a competent judge)."""

from __future__ import annotations

import pytest

from citelock.judges import LLMJudge

pytestmark = pytest.mark.local_model


def test_smollm2_judge_answers_one_of_three_words() -> None:
    from citelock.backends import locate_model
    from citelock.judges import LlamaCppCompleter

    path = locate_model("smollm2")
    assert path.suffix == ".gguf" and path.is_file()
    completer = LlamaCppCompleter(path, n_ctx=2048)
    judge = LLMJudge(completer)
    for claim, passage in [
        ("Revenue grew 12% in 2023.", "Revenue grew 12% in 2023. Costs rose."),
        ("The moon is made of cheese.", "Revenue grew 12% in 2023."),
    ]:
        verdict = judge.judge(claim, passage)
        assert verdict.label in ("yes", "partial", "no")
        assert verdict.raw.strip().lower() == verdict.label
        assert verdict.version == f"judge.v1/{path.name}"
