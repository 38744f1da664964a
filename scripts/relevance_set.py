"""The ExpertQA off-question set: how well does the free relevance check flag answers to another question?

The set (deterministic, seeded): for every ExpertQA val question, one system's answer (drawn with the seed among
the systems that have claims the annotators marked relevant, "Very relevant" or "A bit relevant"), reduced to
those relevant claims, is the **on-question** item. Two **off-question** items pair the same question with the
relevant claims of another question's answer: one from a question of another field, and one from a question of
the *same* field (the hard ones: same vocabulary, another question). Questions are split into a calibration and a
held-out half by :func:`citelock.evals._answers.question_split` (by the question's text, so every item of one
question falls on one side).

Rows, on the held-out half, each at thresholds chosen on the calibration half only:

- ``flag nothing``: the floor (recall 0).
- ``word overlap``: the share of the question's lower-cased words (minus function words) that occur anywhere in
  the answer, thresholded on the calibration half for the free check's two targets (1% and 4% of on-question
  answers below the threshold).
- ``free check (fail)`` / ``free check (fail+review)``: :func:`citelock.guard._relevance.score_answer` at the
  shipped :data:`~citelock.guard._relevance.SHIPPED_RELEVANCE` thresholds.

Columns: precision and recall of "flagged" for off-question items, the false-alarm rate on on-question answers,
and the false-alarm rate on single annotator-relevant claims (each claim alone as the answer).

``--calibrate`` prints the thresholds the calibration half yields (at most 1% of on-question answers below
``fail_below``, 4% below ``review_below``): they are what ``SHIPPED_RELEVANCE`` holds.

Usage:
    python scripts/relevance_set.py [--data DIR] [--seed 0] [--calibrate] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from citelock.evals._answers import _claim_text, question_split
from citelock.guard._relevance import SHIPPED_RELEVANCE, answer_focus, score_answer

RELEVANT = ("Very relevant", "A bit relevant")
_WORD = re.compile(r"\w+")
_FUNCTION = frozenset(
    "a an the of to in on for and or is are was were be by with what how why when who where which do does did "
    "can could should would will my i you it this that as at from if".split()
)


@dataclass(frozen=True)
class Item:
    """One (question, claims) pair of the set."""

    question: str
    claims: tuple[str, ...]
    off: bool
    kind: str  # "own", "other_field", "same_field"
    split: str


def _relevant_answers(row: dict[str, object]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    answers = row.get("answers")
    if not isinstance(answers, dict):
        return out
    for system, answer in sorted(answers.items()):
        claims = tuple(
            _claim_text(c["claim_string"])
            for c in answer.get("claims", [])
            if c.get("informativeness") in RELEVANT and _claim_text(c.get("claim_string", ""))
        )
        if claims:
            out[system] = claims
    return out


def build_set(path: Path, seed: int) -> list[Item]:
    """The off-question set (see the module docstring); the same file and seed give the same items."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    own: list[tuple[str, str, tuple[str, ...]]] = []  # (question, field, claims)
    for row in rows:
        answers = _relevant_answers(row)
        if not answers:
            continue
        system = rng.choice(sorted(answers))
        field = str((row.get("metadata") or {}).get("field", ""))
        own.append((row["question"], field, answers[system]))
    by_field: dict[str, list[int]] = defaultdict(list)
    for i, (_q, field, _c) in enumerate(own):
        by_field[field].append(i)
    items: list[Item] = []
    for i, (question, field, claims) in enumerate(own):
        split = question_split(question)
        items.append(Item(question, claims, False, "own", split))
        others = [j for j in range(len(own)) if own[j][1] != field]
        items.append(Item(question, own[rng.choice(others)][2], True, "other_field", split))
        same = [j for j in by_field[field] if j != i]
        if same:
            items.append(Item(question, own[rng.choice(same)][2], True, "same_field", split))
    return items


def overlap_score(question: str, claims: Sequence[str]) -> float:
    """The word-overlap baseline: the share of the question's words that occur in the answer."""
    words = {w for w in _WORD.findall(question.lower()) if w not in _FUNCTION}
    if not words:
        return 1.0
    answer = set(_WORD.findall(" ".join(claims).lower()))
    return len(words & answer) / len(words)


def free_score(question: str, claims: Sequence[str]) -> float:
    """The free relevance check's answer score."""
    return score_answer(question, claims)[0]


def free_route(question: str, claims: Sequence[str]) -> str:
    """The free check's route (``pass``/``review``/``fail``) at the shipped thresholds."""
    score, met, _best = answer_focus(question, claims)
    return SHIPPED_RELEVANCE.route(score, focus_met=met)


def threshold_for(scores: Sequence[float], rate: float) -> float:
    """The largest threshold t with at most ``rate`` of ``scores`` strictly below t."""
    ordered = sorted(scores)
    allowed = int(rate * len(ordered))
    return ordered[allowed] if allowed < len(ordered) else 1.0


def _metrics(
    items: Sequence[Item], flagged: Callable[[Item], bool], single: Callable[[str, str], bool]
) -> dict[str, object]:
    tp = sum(1 for it in items if it.off and flagged(it))
    fp = sum(1 for it in items if not it.off and flagged(it))
    off = sum(1 for it in items if it.off)
    on = sum(1 for it in items if not it.off)
    hard = [it for it in items if it.kind == "same_field"]
    claims = [(it.question, c) for it in items if not it.off for c in it.claims]
    single_fa = sum(1 for q, c in claims if single(q, c))
    return {
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / off, 3) if off else None,
        "recall_same_field": round(sum(1 for it in hard if flagged(it)) / len(hard), 3) if hard else None,
        "false_alarm_answers": round(fp / on, 3) if on else None,
        "false_alarm_claims": round(single_fa / len(claims), 3) if claims else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Build the set, calibrate or evaluate, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="folder holding expertqa/val.jsonl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calibrate", action="store_true", help="print the thresholds of the calibration half")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    path = args.data / "expertqa" / "val.jsonl"
    if not path.is_file():
        print(f"no ExpertQA file at {path}: pass --data, the folder that holds expertqa/val.jsonl", file=sys.stderr)
        return 2
    items = build_set(path, args.seed)
    tune = [it for it in items if it.split == "tune"]
    held = [it for it in items if it.split == "heldout"]
    on_tune = [free_score(it.question, it.claims) for it in tune if not it.off]
    if args.calibrate:
        print(f"fail_below={threshold_for(on_tune, 0.01):.4f} review_below={threshold_for(on_tune, 0.04):.4f}")
        return 0
    on_overlap = [overlap_score(it.question, it.claims) for it in tune if not it.off]
    t_overlap, t_overlap_1 = threshold_for(on_overlap, 0.04), threshold_for(on_overlap, 0.01)
    rows = {
        "flag nothing": _metrics(held, lambda it: False, lambda q, c: False),
        f"word overlap, 1% target (< {t_overlap_1:.3f})": _metrics(
            held,
            lambda it: overlap_score(it.question, it.claims) < t_overlap_1,
            lambda q, c: overlap_score(q, [c]) < t_overlap_1,
        ),
        f"word overlap, 4% target (< {t_overlap:.3f})": _metrics(
            held,
            lambda it: overlap_score(it.question, it.claims) < t_overlap,
            lambda q, c: overlap_score(q, [c]) < t_overlap,
        ),
        "free check: fail": _metrics(
            held,
            lambda it: free_route(it.question, it.claims) == "fail",
            lambda q, c: free_route(q, [c]) == "fail",
        ),
        "free check: fail + review": _metrics(
            held,
            lambda it: free_route(it.question, it.claims) != "pass",
            lambda q, c: free_route(q, [c]) != "pass",
        ),
    }
    counts = {
        "heldout_questions": len({it.question for it in held}),
        "on_question": sum(1 for it in held if not it.off),
        "off_question": sum(1 for it in held if it.off),
        "same_field": sum(1 for it in held if it.kind == "same_field"),
    }
    if args.json:
        print(json.dumps({"seed": args.seed, "counts": counts, "rows": rows}, indent=2))
        return 0
    print(f"ExpertQA off-question set, held-out half (seed {args.seed}): {counts}")
    cols = ["precision", "recall", "recall_same_field", "false_alarm_answers", "false_alarm_claims"]
    print("| method | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join("-" if row[c] is None else str(row[c]) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
