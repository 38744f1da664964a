"""Fit the offline support judge and the lexical baseline's thresholds; write their JSON parameters.

What trains on what (nothing else is read):

- WiCE dev, only claim ids in the *train* half of ``citelock.evals.wice_split`` (claim_dev rows with the full
  cited page, and oracle_dev rows, one short chunk each, labeled with their claim's label).
- Only with ``--with-expertqa``: ExpertQA val claims with evidence and a Complete/Partial/Incomplete label,
  minus every question that also occurs in AttributionBench dev (AttributionBench's ExpertQA part reuses
  ExpertQA claims; they are dropped so that AttributionBench stays a pure evaluation set). AttributionBench is
  read only for that question list. Off by default: measured by the same cross-validation, adding ExpertQA
  lowered the out-of-fold WiCE-train yes pass rate at the target false pass rate (0.375 -> 0.29); its short,
  mostly-supported passages teach the model that short passages mean "yes".
- The token IDF table comes from the sentences of the same training passages.

Model selection (C, class weights) and the thresholds use grouped 5-fold cross-validation on the training
data only (groups: WiCE claim id, ExpertQA question). The yes threshold is the lowest one whose out-of-fold
false pass rate on the WiCE training claims is at most ``--target-fpr``. The held-out WiCE half is never used.

Deterministic: running it twice writes byte-identical files.

Usage:
    python scripts/train_judge.py [--data DIR] [--check]

``--data`` defaults to $CITELOCK_SHARED_DATA or ../shared/data next to the repository. ``--check`` compares
with the shipped files instead of writing them (exit 1 on a difference).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from citelock.evals._datasets import LabeledItem, read_dataset, wice_split
from citelock.judges._features import (
    FEATURE_NAMES,
    FEATURE_SET_VERSION,
    content_tokens,
    extract_features,
    quote_addition,
    split_passage,
)
from citelock.judges._offline import VETO_FEATURES

REPO = Path(__file__).resolve().parent.parent
PARAMS = REPO / "src" / "citelock" / "judges" / "params"
LABELS = {"yes": 0, "partial": 1, "no": 2}
C_GRID = (0.03, 0.1, 0.3, 1.0, 3.0)
WEIGHT_GRID: tuple[str | None, ...] = (None, "balanced")
MIN_DF = 2
# Not given to the model: passage length tracks the dataset (short ExpertQA passages are mostly "yes"), so it
# would learn "long page -> not supported", which is an artifact, not evidence.
EXCLUDED_FEATURES = ("log_passage_sents",)


def _data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("CITELOCK_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def load_training(data: Path, with_expertqa: bool = False) -> tuple[list[LabeledItem], dict[str, int]]:
    wice_claim = [
        i for i in read_dataset("wice", data / "wice" / "claim_dev.jsonl").items if wice_split(i.id) == "train"
    ]
    wice_oracle = [
        i for i in read_dataset("wice", data / "wice" / "oracle_dev.jsonl").items if wice_split(i.id) == "train"
    ]
    ab_questions = {i.group for i in read_dataset("attributionbench", data / "attributionbench" / "dev.jsonl").items}
    expert_all = read_dataset("expertqa", data / "expertqa" / "val.jsonl").items
    expert = [i for i in expert_all if i.group not in ab_questions]
    counts = {
        "wice_claim_train": len(wice_claim),
        "wice_oracle_train_claims": len(wice_oracle),
        "expertqa_kept": len(expert),
        "expertqa_dropped_overlap_with_attributionbench": len(expert_all) - len(expert),
    }
    if not with_expertqa:
        counts["expertqa_kept"] = 0
        expert = []
    return wice_claim + wice_oracle + expert, counts


def fit_idf(items: list[LabeledItem]) -> tuple[dict[str, float], float]:
    """Smoothed IDF over the distinct sentences of the training passages (tokens seen at least MIN_DF times)."""
    df: Counter[str] = Counter()
    seen: set[str] = set()
    for item in items:
        for passage in item.passages:
            for sentence in split_passage(passage):
                if sentence in seen:
                    continue
                seen.add(sentence)
                df.update(set(content_tokens(sentence)))
    n = len(seen)
    idf = {t: round(math.log((n + 1) / (c + 1)), 6) for t, c in sorted(df.items()) if c >= MIN_DF}
    return idf, round(math.log((n + 1) / 2), 6)


def _rows(items: list[LabeledItem], idf: dict[str, float], default_idf: float):
    """One row per (item, passage); returns X, y, group ids, the item index of each row, the rule vetoes."""
    xs, ys, groups, owners, rules = [], [], [], [], []
    for k, item in enumerate(items):
        for passage in item.passages:
            xs.append(extract_features(item.claim, passage, idf, default_idf).values)
            rules.append(quote_addition(item.claim, passage, idf, default_idf))
            ys.append(LABELS[item.label])
            groups.append(f"{item.source.split('/')[0]}:{item.group}")
            owners.append(k)
    return np.array(xs), np.array(ys), np.array(groups), np.array(owners), np.array(rules, dtype=bool)


def _standardize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    mean[0], scale[0] = 0.0, 1.0  # bias column stays 1
    scale[scale == 0] = 1.0
    return mean, scale


def _fit(x: np.ndarray, y: np.ndarray, c: float, weight: str | None) -> LogisticRegression:
    model = LogisticRegression(C=c, class_weight=weight, max_iter=5000, fit_intercept=False)
    return model.fit(x, y)


def _item_scores(p_yes: np.ndarray, owners: np.ndarray, n_items: int) -> np.ndarray:
    """Per item: the row with the highest effective P(yes) (items with several passages take their best one)."""
    best = np.full(n_items, -2.0)
    rows = np.zeros(n_items, dtype=int)
    for r, k in enumerate(owners):
        if p_yes[r] > best[k]:
            best[k], rows[k] = p_yes[r], r
    return rows


def _pick_threshold(scores: np.ndarray, is_yes: np.ndarray, target: float) -> tuple[float, float, float]:
    """The lowest threshold whose false pass rate is <= target: (threshold, fpr, yes pass rate)."""
    candidates = np.unique(np.round(scores, 6))
    for t in candidates:
        passed = scores >= t
        fpr = float((passed & ~is_yes).sum() / max((~is_yes).sum(), 1))
        if fpr <= target:
            return float(t), fpr, float((passed & is_yes).sum() / max(is_yes.sum(), 1))
    return 1.0, 0.0, 0.0


def _pick_no_threshold(p_no: np.ndarray, gold: np.ndarray, not_yes: np.ndarray) -> float:
    """Among items not passed, the P(no) threshold that best separates partial from no (balanced accuracy)."""
    best_t, best_score = 1.0, -1.0
    for t in np.round(np.linspace(0.05, 0.95, 91), 2):
        pred_no = p_no >= t
        g_no = gold == 2
        g_part = gold == 1
        mask = not_yes
        if not (g_no & mask).any() or not (g_part & mask).any():
            continue
        score = 0.5 * (pred_no[g_no & mask].mean() + (~pred_no[g_part & mask]).mean())
        if score > best_score + 1e-12:
            best_t, best_score = float(t), float(score)
    return best_t


def train(
    data: Path, target_fpr: float, use_vetoes: bool = True, select_on: str = "wice", with_expertqa: bool = False
) -> tuple[dict, dict, dict]:
    items, counts = load_training(data, with_expertqa)
    idf, default_idf = fit_idf(items)
    x, y, groups, owners, rule_vetoed = _rows(items, idf, default_idf)
    mean, scale = _standardize(x)
    used = np.array([name not in EXCLUDED_FEATURES for name in FEATURE_NAMES])
    mean[~used], scale[~used] = 0.0, 1.0
    xs = (x - mean) / scale
    xs[:, ~used] = 0.0
    vetoed = np.zeros(len(y), dtype=bool)
    if use_vetoes:
        vetoed |= rule_vetoed
        for name in VETO_FEATURES:
            vetoed |= x[:, FEATURE_NAMES.index(name)] > 0
    wice_items = np.array([i.source.startswith(select_on) for i in items])
    gold_items = np.array([LABELS[i.label] for i in items])
    folds = list(GroupKFold(n_splits=5).split(xs, y, groups))

    def oof(c: float, weight: str | None) -> np.ndarray:
        proba = np.zeros((len(y), 3))
        for tr, te in folds:
            proba[te] = _fit(xs[tr], y[tr], c, weight).predict_proba(xs[te])
        return proba

    selection = []
    for c in C_GRID:
        for weight in WEIGHT_GRID:
            proba = oof(c, weight)
            p_eff = np.where(vetoed, -1.0, proba[:, 0])
            best_rows = _item_scores(p_eff, owners, len(items))
            scores = p_eff[best_rows][wice_items]
            _, fpr, ypr = _pick_threshold(scores, gold_items[wice_items] == 0, target_fpr)
            selection.append(
                {"C": c, "class_weight": weight, "oof_wice_fpr": round(fpr, 4), "oof_wice_yes_pass": round(ypr, 4)}
            )
    chosen = max(selection, key=lambda s: (s["oof_wice_yes_pass"], -s["oof_wice_fpr"], -s["C"]))
    proba = oof(chosen["C"], chosen["class_weight"])
    p_eff = np.where(vetoed, -1.0, proba[:, 0])
    best_rows = _item_scores(p_eff, owners, len(items))
    t_yes, fpr, ypr = _pick_threshold(p_eff[best_rows][wice_items], gold_items[wice_items] == 0, target_fpr)
    not_passed = p_eff[best_rows] < t_yes
    t_no = _pick_no_threshold(proba[best_rows, 2], gold_items, not_passed)
    model = _fit(xs, y, chosen["C"], chosen["class_weight"])

    offline = {
        "name": "offline",
        "version": f"1.2+f{FEATURE_SET_VERSION}",
        "feature_set_version": FEATURE_SET_VERSION,
        "features": list(FEATURE_NAMES),
        "excluded_features": list(EXCLUDED_FEATURES),
        "classes": ["yes", "partial", "no"],
        "mean": [round(float(v), 8) for v in mean],
        "scale": [round(float(v), 8) for v in scale],
        "coef": [[round(float(v), 8) for v in row] for row in model.coef_],
        "yes_threshold": round(t_yes, 6),
        "no_threshold": t_no,
        "default_idf": default_idf,
        "idf": idf,
    }

    # the lexical baseline: same data, same rule for its thresholds, on its single feature
    cov = x[:, FEATURE_NAMES.index("cov_all")]
    best_cov = np.full(len(items), -1.0)
    for r, k in enumerate(owners):
        best_cov[k] = max(best_cov[k], cov[r])
    lt_yes, lfpr, lypr = _pick_threshold(best_cov[wice_items], gold_items[wice_items] == 0, target_fpr)
    lt_partial = _pick_no_threshold(1.0 - best_cov, gold_items, best_cov < lt_yes)
    lexical = {
        "name": "lexical",
        "version": "1.0",
        "yes_threshold": round(lt_yes, 6),
        "partial_threshold": round(1.0 - lt_partial, 6),
    }
    report = {
        "training": counts,
        "rows": len(y),
        "row_labels": {k: int((y == v).sum()) for k, v in LABELS.items()},
        "selection": selection,
        "chosen": chosen,
        "offline_oof_wice_train": {"fpr": round(fpr, 4), "yes_pass": round(ypr, 4)},
        "lexical_wice_train": {"fpr": round(lfpr, 4), "yes_pass": round(lypr, 4)},
    }
    return offline, lexical, report


def _dump(obj: dict) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the shared data folder (wice/, expertqa/, attributionbench/)")
    parser.add_argument(
        "--target-fpr",
        type=float,
        default=0.12,
        help="out-of-fold false pass rate the yes threshold must meet on WiCE train",
    )
    parser.add_argument(
        "--select-on",
        default="wice",
        choices=["wice", "wice/claim", "wice/oracle"],
        help="which WiCE training items choose the model and the thresholds",
    )
    parser.add_argument(
        "--with-expertqa",
        action="store_true",
        help="also train on ExpertQA val (measured: lowers the out-of-fold WiCE yes pass rate; off by default)",
    )
    parser.add_argument(
        "--no-vetoes",
        action="store_true",
        help="measure without the deterministic vetoes (reports only; the judge applies them)",
    )
    parser.add_argument("--check", action="store_true", help="compare with the shipped files; write nothing")
    args = parser.parse_args()
    offline, lexical, report = train(
        _data_dir(args.data), args.target_fpr, not args.no_vetoes, args.select_on, args.with_expertqa
    )
    print(json.dumps(report, indent=1))
    if args.no_vetoes:
        return 0
    outputs = {PARAMS / "offline.v1.json": _dump(offline), PARAMS / "lexical.v1.json": _dump(lexical)}
    status = 0
    for path, text in outputs.items():
        if args.check:
            same = path.exists() and path.read_text(encoding="utf-8") == text
            print(f"{path.name}: {'identical' if same else 'DIFFERENT'}")
            status |= 0 if same else 1
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
