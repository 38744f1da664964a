"""The near-miss set: does the relevance check flag a true sentence of the right paragraph that misses the slot?

Data: SQuAD 2.0 **train** articles (Rajpurkar et al. 2018, CC BY-SA 4.0), a JSON file in SQuAD's own format
(``{"data": [{"title", "paragraphs": [{"context", "qas": [{"question", "answers", "is_impossible"}]}]}]}``),
passed with ``--squad PATH``. The file is not part of the project (data from outside stays out of git): use
SQuAD's ``train-v2.0.json`` or any part of it (a public GitHub copy of its first ten articles, 4,719 questions,
was used for the figures in docs/measured.md). Never SQuAD's dev split: it is kept for checks run elsewhere.

The set, deterministic (``--seed``): articles are split in two halves by the sha256 of their title
(calibration and held-out). Per article, up to ``--per-article`` answerable questions are drawn. For each:

- **on-question**: the sentence of its paragraph (split as the constraint splits chunks) holding a gold answer;
- **near misses**: the other sentences of the same paragraph that hold no gold answer;
- **far misses**: ``--far`` sentences of other articles of the same half.

A claim's passage is its own paragraph (each paragraph is one chunk). Unanswerable questions (``is_impossible``)
give the abstention rows: the best score any sentence of their paragraph reaches.

Rows, on the held-out half, each at thresholds chosen on the calibration half only: the free check as shipped
(:func:`citelock.guard._relevance.answer_focus` at ``SHIPPED_RELEVANCE``), plain word overlap, and the slot check
(:func:`citelock.guard._near_miss.slot_score`) at several targets, alone and or-ed with the free check.

``--fit`` fits the slot model's logistic weights on the calibration half and writes them, with the per-stakes
thresholds, to ``src/citelock/judges/params/relevance_slot.v1.json`` (``--detector`` picks spaCy or the rules).

Usage:
    python scripts/near_miss_set.py --squad PATH [--seed 0] [--per-article 80] [--far 2] [--fit] [--spacy] [--json]
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import random
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citelock.guard._near_miss import FEATURES, SlotModel, slot_applies, slot_features
from citelock.guard._relevance import SHIPPED_RELEVANCE, answer_focus
from citelock.text import _answer_slot, split_sentences

PARAMS = Path(__file__).resolve().parent.parent / "src" / "citelock" / "judges" / "params" / "relevance_slot.v1.json"
_WORD = re.compile(r"\w+")
_FUNCTION = frozenset(
    "a an the of to in on for and or is are was were be by with what how why when who where which do does did "
    "can could should would will my i you it this that as at from if".split()
)


@dataclass(frozen=True)
class Question:
    """One SQuAD question over its paragraph."""

    article: str
    split: str
    question: str
    sentences: tuple[str, ...]
    gold: tuple[int, ...]  # indexes of the sentences holding a gold answer (empty: unanswerable)
    answers: tuple[str, ...]


@dataclass
class Item:
    """One (question, claim) pair of the set."""

    q: Question
    claim: str
    kind: str  # "on", "near", "far"
    passage: tuple[str, ...]
    features: tuple[float, ...] = field(default=())


def article_split(title: str, titles: Sequence[str]) -> str:
    """``tune`` for the half of the titles with the lower sha256, else ``heldout`` (deterministic)."""
    order = sorted(titles, key=lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest())
    return "tune" if order.index(title) < (len(order) + 1) // 2 else "heldout"


def _sentences(context: str) -> list[tuple[int, int, str]]:
    return [(a, b, " ".join(context[a:b].split())) for a, b in split_sentences(context) if context[a:b].strip()]


def load_questions(path: Path, seed: int, per_article: int) -> list[Question]:
    """The questions of the set (see the module docstring): answerable ones with a gold sentence, and unanswerable."""
    data = json.loads(path.read_text(encoding="utf-8"))
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise SystemExit(f"{path}: expected SQuAD's JSON format, an object with a 'data' list of articles")
    titles = [a["title"] for a in articles]
    rng = random.Random(seed)
    out: list[Question] = []
    for article in articles:
        split = article_split(article["title"], titles)
        answerable: list[Question] = []
        impossible: list[Question] = []
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            spans = _sentences(context)
            sentences = tuple(s for _a, _b, s in spans)
            for qa in paragraph["qas"]:
                if qa.get("is_impossible"):
                    impossible.append(Question(article["title"], split, qa["question"], sentences, (), ()))
                    continue
                gold: set[int] = set()
                ok = True
                for ans in qa["answers"]:
                    start, end = ans["answer_start"], ans["answer_start"] + len(ans["text"])
                    hit = [i for i, (a, b, _s) in enumerate(spans) if a <= start and end <= b]
                    ok = ok and bool(hit)
                    gold.update(hit)
                if ok and gold and len(gold) < len(sentences):
                    texts = tuple(a["text"] for a in qa["answers"])
                    answerable.append(Question(article["title"], split, qa["question"], sentences, tuple(gold), texts))
        rng.shuffle(answerable)
        rng.shuffle(impossible)
        out.extend(answerable[:per_article])
        out.extend(impossible[: max(1, per_article // 4)])
    return out


def build_items(questions: Sequence[Question], seed: int, far: int) -> list[Item]:
    """On-question, near-miss and far-miss items of the answerable questions."""
    rng = random.Random(seed + 1)
    pool: dict[str, list[tuple[str, tuple[str, ...], str]]] = {}
    for q in questions:
        for s in q.sentences:
            pool.setdefault(q.split, []).append((s, q.sentences, q.article))
    items: list[Item] = []
    for q in questions:
        if not q.gold:
            continue
        for i, s in enumerate(q.sentences):
            if i in q.gold:
                items.append(Item(q, s, "on", q.sentences))
            elif not any(a.lower() in s.lower() for a in q.answers):
                items.append(Item(q, s, "near", q.sentences))
        others = [p for p in pool[q.split] if p[2] != q.article]
        for s, passage, _article in rng.sample(others, min(far, len(others))):
            items.append(Item(q, s, "far", passage))
    for it in items:
        it.features = slot_features(it.q.question, it.claim, it.passage)
    return items


def overlap_score(question: str, claim: str) -> float:
    """The word-overlap baseline: the share of the question's words that occur in the claim."""
    words = {w for w in _WORD.findall(question.lower()) if w not in _FUNCTION}
    return len(words & set(_WORD.findall(claim.lower()))) / len(words) if words else 1.0


def free_flags(it: Item, only: str | None = None) -> bool:
    """Today's free check (as shipped) flags the claim as a one-claim answer citing its paragraph."""
    score, met, _best = answer_focus(it.q.question, [it.claim], [" ".join(it.passage)])
    route = SHIPPED_RELEVANCE.route(score, focus_met=met)
    return route == only if only else route != "pass"


def threshold_for(scores: Sequence[float], rate: float) -> float:
    """The largest threshold t with at most ``rate`` of ``scores`` strictly below t."""
    ordered = sorted(scores)
    allowed = int(rate * len(ordered))
    return ordered[allowed] if allowed < len(ordered) else 1.0


def pass_threshold(scores: Sequence[float], rate: float) -> float:
    """The smallest threshold t with at most ``rate`` of ``scores`` at or above t."""
    ordered = sorted(scores, reverse=True)
    allowed = int(rate * len(ordered))
    return (ordered[allowed] + 1e-9) if allowed < len(ordered) else 0.0


def rates(items: Sequence[Item], flagged: Callable[[Item], bool]) -> dict[str, float | int]:
    """Near-miss and far-miss recall, on-question false-flag rate."""
    out: dict[str, float | int] = {}
    for kind, name in (("near", "near_recall"), ("far", "far_recall"), ("on", "on_false_flags")):
        group = [it for it in items if it.kind == kind]
        out[name] = round(sum(1 for it in group if flagged(it)) / len(group), 3) if group else 0.0
    return out


def fit(items: Sequence[Item], seed: int) -> tuple[tuple[float, ...], float]:
    """Logistic weights on the calibration items (on-question vs the rest), balanced classes."""
    from sklearn.linear_model import LogisticRegression  # the eval extra; only this script fits

    x = [list(it.features) for it in items]
    y = [1 if it.kind == "on" else 0 for it in items]
    lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000, random_state=seed).fit(x, y)
    return tuple(round(float(w), 5) for w in lr.coef_[0]), round(float(lr.intercept_[0]), 5)


def _model(args: argparse.Namespace, kind: str, tune: Sequence[Item]) -> SlotModel:
    if args.fit:
        weights, bias = fit(tune, args.seed)
        return SlotModel(weights, bias, kind, "fitted now")
    params = json.loads(Path(args.params).read_text(encoding="utf-8"))
    data = params["models"][kind]
    names = tuple(data.get("features", params.get("features", FEATURES)))  # an older file names them once
    return SlotModel(tuple(data["weights"]), float(data["bias"]), kind, "shipped", names)


def _thresholds(model: SlotModel, tune: Sequence[Item]) -> dict[str, dict[str, float]]:
    """Per stakes, chosen on the calibration half: high flags more (near misses passing <= 5%), low flags less."""
    on = [model.probability(it.features) for it in tune if it.kind == "on"]
    near = [model.probability(it.features) for it in tune if it.kind == "near"]
    return {
        "high": {"fail_below": round(threshold_for(on, 0.03), 4), "review_below": round(pass_threshold(near, 0.05), 4)},
        "low": {"fail_below": round(threshold_for(on, 0.01), 4), "review_below": round(threshold_for(on, 0.01), 4)},
    }


def _auc(held: Sequence[Item], p: dict[int, float], kind: str) -> float:
    """The area under the on-question vs ``kind`` curve: the chance an on-question item outscores a ``kind`` one."""
    on = [p[id(it)] for it in held if it.kind == "on"]
    other = sorted(p[id(it)] for it in held if it.kind == kind)
    if not on or not other:
        return 0.0
    won = sum(
        bisect.bisect_left(other, x) + 0.5 * (bisect.bisect_right(other, x) - bisect.bisect_left(other, x)) for x in on
    )
    return round(won / (len(on) * len(other)), 4)


def _curve(held: Sequence[Item], p: dict[int, float]) -> dict[str, dict[str, float]]:
    """The slot check's curve read on the held-out half itself: near- and far-miss recall at the threshold that
    flags a given share of its on-question sentences (what the check can separate, not a calibrated figure)."""
    on = [p[id(it)] for it in held if it.kind == "on"]
    out: dict[str, dict[str, float]] = {}
    for rate in (0.03, 0.05, 0.10, 0.20):
        t = threshold_for(on, rate)
        row = rates(held, lambda it, t=t: p[id(it)] < t)
        out[f"{rate:.0%}"] = {"near_recall": row["near_recall"], "far_recall": row["far_recall"]}
    return out


def _abstention(model: SlotModel, questions: Sequence[Question], threshold: float) -> dict[str, float]:
    def best(q: Question) -> float:
        return max(model.probability(slot_features(q.question, s, q.sentences)) for s in q.sentences)

    ans = [best(q) for q in questions if q.gold]
    imp = [best(q) for q in questions if not q.gold]
    return {
        "answerable_abstained": round(sum(1 for b in ans if b < threshold) / len(ans), 3) if ans else 0.0,
        "unanswerable_abstained": round(sum(1 for b in imp if b < threshold) / len(imp), 3) if imp else 0.0,
    }


def _top1(model: SlotModel, questions: Sequence[Question]) -> dict[str, float]:
    ans = [q for q in questions if q.gold]
    if not ans:
        return {}

    def top(q: Question, score: Callable[[Question, str], float]) -> int:
        return max(range(len(q.sentences)), key=lambda i: (score(q, q.sentences[i]), -i))

    def slot_p(q: Question, s: str) -> float:
        return model.probability(slot_features(q.question, s, q.sentences))

    slot = sum(1 for q in ans if top(q, slot_p) in q.gold)
    over = sum(1 for q in ans if top(q, lambda q, s: overlap_score(q.question, s)) in q.gold)
    first = sum(1 for q in ans if 0 in q.gold)
    n = len(ans)
    return {"slot_top1": round(slot / n, 3), "overlap_top1": round(over / n, 3), "first_sentence": round(first / n, 3)}


def main(argv: Sequence[str] | None = None) -> int:
    """Build the set, fit or load the slot model, print the held-out table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--squad", type=Path, required=True, help="a SQuAD 2.0 train JSON file (or part of one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-article", type=int, default=80)
    parser.add_argument("--far", type=int, default=2)
    parser.add_argument("--fit", action="store_true", help="fit the model and write relevance_slot.v1.json")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--params", type=Path, default=PARAMS, help="the params file to read (or, with --fit, write)")
    parser.add_argument("--spacy", action="store_true", help="spaCy's entities instead of the rules (nlp extra)")
    args = parser.parse_args(argv)
    if args.spacy:
        _answer_slot.use_detector("spacy")
    if not args.squad.is_file():
        print(f"no SQuAD file at {args.squad}: pass --squad, a SQuAD 2.0 train JSON file", file=sys.stderr)
        return 2
    kind = "rules" if _answer_slot.detector() == "rules" else "spacy"
    questions = load_questions(args.squad, args.seed, args.per_article)
    items = build_items(questions, args.seed, args.far)
    tune = [it for it in items if it.q.split == "tune"]
    held = [it for it in items if it.q.split == "heldout"]
    model = _model(args, kind, tune)
    stakes = _thresholds(model, tune)
    on_overlap = [overlap_score(it.q.question, it.claim) for it in tune if it.kind == "on"]
    t_over = threshold_for(on_overlap, 0.03)
    p = {id(it): model.probability(it.features) for it in items}
    rows: dict[str, dict[str, Any]] = {
        "free check as shipped (fail+review)": rates(held, free_flags),
        f"word overlap, 3% target (< {t_over:.3f})": rates(
            held, lambda it: overlap_score(it.q.question, it.claim) < t_over
        ),
    }
    t_over10 = threshold_for(on_overlap, 0.10)
    rows[f"word overlap, 10% target (< {t_over10:.3f})"] = rates(
        held, lambda it: overlap_score(it.q.question, it.claim) < t_over10
    )
    for target in (0.01, 0.03, 0.05, 0.10, 0.20):
        t = threshold_for([p[id(it)] for it in tune if it.kind == "on"], target)
        rows[f"slot check, {target:.0%} target (< {t:.3f})"] = rates(held, lambda it, t=t: p[id(it)] < t)
    high, low = stakes["high"], stakes["low"]
    rows["slot check, high stakes: fail"] = rates(held, lambda it: p[id(it)] < high["fail_below"])
    rows["slot check, high stakes: fail + review"] = rates(held, lambda it: p[id(it)] < high["review_below"])
    rows["slot check, low stakes: fail"] = rates(held, lambda it: p[id(it)] < low["fail_below"])
    rows["free check or slot check (high, fail+review)"] = rates(
        held, lambda it: free_flags(it) or p[id(it)] < high["review_below"]
    )
    rows["free check as shipped (fail only)"] = rates(held, lambda it: free_flags(it, "fail"))
    for name, band in (("high", high), ("low", low)):
        where = "factoid or short questions" if name == "high" else "factoid questions"
        rows[f"the guard, {name} stakes (free check, or slot check on {where})"] = rates(
            held,
            lambda it, band=band, name=name: (
                free_flags(it) or (slot_applies(it.q.question, name) and p[id(it)] < band["review_below"])
            ),
        )
    held_q = [q for q in questions if q.split == "heldout"]
    abstain_t = threshold_for(
        [max(model.probability(slot_features(q.question, s, q.sentences)) for s in q.sentences)
         for q in questions if q.split == "tune" and q.gold],
        0.05,
    )  # fmt: skip
    counts = {
        "articles": {s: sorted({q.article for q in questions if q.split == s}) for s in ("tune", "heldout")},
        "heldout_questions": sum(1 for q in held_q if q.gold),
        "heldout_unanswerable": sum(1 for q in held_q if not q.gold),
        **{f"heldout_{k}": sum(1 for it in held if it.kind == k) for k in ("on", "near", "far")},
    }
    report = {
        "seed": args.seed,
        "detector": _answer_slot.detector(),
        "counts": counts,
        "rows": rows,
        "stakes": stakes,
        "abstain_below": round(abstain_t, 4),
        "abstention": _abstention(model, held_q, abstain_t),
        "ranking": _top1(model, held_q),
        "curve_heldout": _curve(held, p),
        "auc_heldout": {"near": _auc(held, p, "near"), "far": _auc(held, p, "far")},
    }
    if args.fit:
        _write(model, kind, stakes, abstain_t, counts, args.params)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"near-miss set, held-out half (seed {args.seed}, detector {report['detector']}): {counts}")
    print("| method | near-miss recall | far-miss recall | false flags, on-question |")
    print("|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['near_recall']} | {row['far_recall']} | {row['on_false_flags']} |")
    print(f"stakes thresholds (calibration half): {stakes}")
    print(f"abstain below {abstain_t:.4f}: {report['abstention']}; ranking: {report['ranking']}")
    print(f"curve read on the held-out half (false-flag rate: recalls): {report['curve_heldout']}")
    print(f"area under the on-question vs near / far miss curve, held-out: {report['auc_heldout']}")
    return 0


def _write(
    model: SlotModel, kind: str, stakes: dict[str, Any], abstain: float, counts: dict[str, Any], path: Path
) -> None:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    data["source"] = (
        "scripts/near_miss_set.py --fit: SQuAD 2.0 train articles, calibration half (on-question sentences vs near "
        "and far misses); high stakes: <=3% on-question fail, <=5% near misses pass; low stakes: <=1% flagged"
    )
    data["features"] = list(FEATURES)
    data.setdefault("models", {})[kind] = {
        "features": list(model.features),
        "weights": list(model.weights),
        "bias": model.bias,
        "detector": _answer_slot.detector(),
        "stakes": stakes,
        "abstain_below": round(abstain, 4),
        "calibration_articles": counts["articles"]["tune"],
    }
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
