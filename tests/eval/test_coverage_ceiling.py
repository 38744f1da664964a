"""The coverage-ceiling study script: its precision-at-recall rule, its annotator scores, and that its rows agree
with ``citelock eval answers`` on the same data."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from citelock.evals._answers import evaluate_answers, read_expertqa_answers, summarize_answers
from citelock.guard import SurfacePolicy
from support.scripts_loader import load_script


@pytest.fixture(scope="module")
def ceiling() -> ModuleType:
    return load_script("coverage_ceiling")


def test_oracle_precision_is_the_best_threshold_reaching_the_recall(ceiling: ModuleType) -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    needs = np.array([True, False, True, True, False, True])
    # 4 positives: recall >= 0.75 needs 3 of them, first reached at the 4th item (3/4); the 6th (4/6) is worse
    assert ceiling.oracle_precision(scores, needs, 0.75) == pytest.approx(3 / 4)
    # recall 1 needs all six items: 4/6
    assert ceiling.oracle_precision(scores, needs, 1.0) == pytest.approx(4 / 6)
    with pytest.raises(ValueError, match="no positives"):
        ceiling.oracle_precision(scores, np.zeros(6, dtype=bool), 0.5)


def test_annotator_rate_leaves_the_claim_itself_out(ceiling: ModuleType) -> None:
    data = ceiling.Sentences(
        text=["a", "b", "c", "d"],
        needs=np.array([True, False, True, True]),
        cited=np.array([False, False, False, True]),
        question=np.array([0, 0, 1, 1]),
        annotator=["x", "x", "x", "y"],
    )
    # x labeled (Yes, No, Yes): each claim sees the other two; y has no other claim
    assert ceiling.annotator_scores(data).tolist() == pytest.approx([0.5, 1.0, 0.5, 0.5])
    # uncited: x gave both labels, so none of x's three uncited sentences is single-label
    assert ceiling.single_label_share(data, ~data.cited) == 0.0
    assert ceiling.single_label_share(data, np.array([True, False, True, True])) == 1.0


@pytest.mark.shared_data
def test_rule_and_number_rows_agree_with_eval_answers(ceiling: ModuleType, shared_data: Path) -> None:
    path = shared_data / "expertqa" / "val.jsonl"
    summary = summarize_answers(
        evaluate_answers(read_expertqa_answers(path), policy=SurfacePolicy(name="t", stakes="high"), judge=None)
    )
    rows = {
        name: (auc, cell) for name, auc, cell in ceiling.study(ceiling.read_sentences(path), seeds=1, use_minilm=False)
    }
    rules = rows["shipped rules"][1]
    assert rules == f"{summary['uncited_precision']:.3f} (recall {summary['uncited_recall']:.3f})"
    base = summary["counts"]["uncited_needs_citation"] / summary["counts"]["uncited"]
    assert rows["flag every uncited sentence"][1].startswith(f"{base:.3f}")
    # the learned rows are real cross-validated figures: AUC and precision are proper fractions
    auc, cell = rows["tf-idf"]
    assert 0.0 < float(auc.split(" ")[0]) < 1.0 and 0.0 < float(cell.split(" ")[0]) <= 1.0

    complete, alarms = ceiling.number_alarms(path)
    assert complete == summary["counts"]["complete"]
    assert len(alarms) == summary["counts"]["complete_number_flagged"]
    assert all(alarm.missing for alarm in alarms)
