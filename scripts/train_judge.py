"""Fit the offline support judge and the lexical baseline, and their shipped routings; write their JSON.

What trains on what (nothing else is read):

- WiCE dev, only claim ids in the *train* half of ``citelock.evals.wice_split`` (claim_dev rows with the full
  cited page, and oracle_dev rows, one short chunk each, labeled with their claim's label).
- ExpertQA val claims with passage text (URL-only evidence is no passage) and a Complete/Partial/Incomplete
  label, only questions in the *train* half of ``citelock.evals.item_split`` and minus every question that also
  occurs in AttributionBench dev (AttributionBench's ExpertQA part reuses ExpertQA claims; they are dropped so
  that AttributionBench stays a pure evaluation set). AttributionBench is read only for that question list.
- The token IDF table comes from the sentences of the same training passages.

Model selection (C, class weights) uses grouped 5-fold cross-validation on the training data only (groups:
WiCE claim id, ExpertQA question), by the out-of-fold AUC of the item score (yes vs not yes) over all training
items. The shipped routings (``routing.offline.json``, ``routing.lexical.json``) are fitted by conformal risk
control (``citelock.evals.fit_routing``; false pass <= 5%, false fail <= 20%) on the training items: for the
offline judge on its *out-of-fold* scores (a model never scores the items it was fitted on), for the lexical
score (no parameters) on its scores. Each judge's label thresholds are its routing's: label ``yes`` is
exactly route ``pass``. The held-out halves and AttributionBench are never read for fitting.

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

from citelock.evals._datasets import LabeledItem, item_split, read_dataset, wice_split
from citelock.evals._routing_fit import fit_routing
from citelock.judges._features import (
    FEATURE_NAMES,
    FEATURE_SET_VERSION,
    content_tokens,
    extract_features,
    quote_addition,
    split_passage,
    verbatim_in,
)
from citelock.judges._lexical import lexical_overlap
from citelock.judges._offline import VETO_FEATURES, VETO_SCORE_CAP

REPO = Path(__file__).resolve().parent.parent
PARAMS = REPO / "src" / "citelock" / "judges" / "params"
LABELS = {"yes": 0, "partial": 1, "no": 2}
C_GRID = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
WEIGHT_GRID: tuple[str | None, ...] = (None, "balanced")
MIN_DF = 2
# Not given to the model: passage length tracks the dataset (short ExpertQA passages are mostly "yes"), so it
# would learn "long page -> not supported", which is an artifact, not evidence.
EXCLUDED_FEATURES = ("log_passage_sents",)
OFFLINE_VERSION = f"1.3+f{FEATURE_SET_VERSION}"
LEXICAL_VERSION = "1.1"
TARGET_FALSE_PASS = 0.05
TARGET_FALSE_FAIL = 0.2


def _data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("CITELOCK_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def load_training(data: Path) -> tuple[list[LabeledItem], dict[str, int]]:
    wice_claim = [
        i for i in read_dataset("wice", data / "wice" / "claim_dev.jsonl").items if wice_split(i.id) == "train"
    ]
    wice_oracle = [
        i for i in read_dataset("wice", data / "wice" / "oracle_dev.jsonl").items if wice_split(i.id) == "train"
    ]
    ab_questions = {i.group for i in read_dataset("attributionbench", data / "attributionbench" / "dev.jsonl").items}
    expert_all = [
        i for i in read_dataset("expertqa", data / "expertqa" / "val.jsonl").items if item_split(i) == "train"
    ]
    expert = [i for i in expert_all if i.group not in ab_questions]
    counts = {
        "wice_claim_train": len(wice_claim),
        "wice_oracle_train_claims": len(wice_oracle),
        "expertqa_train": len(expert),
        "expertqa_train_dropped_overlap_with_attributionbench": len(expert_all) - len(expert),
    }
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


def _auc(scores: np.ndarray, is_yes: np.ndarray) -> float:
    """ROC AUC of yes vs not yes (ties count half), exact by ranks."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    n_pos, n_neg = int(is_yes.sum()), int((~is_yes).sum())
    return float((ranks[is_yes].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _rates(scores: np.ndarray, is_yes: np.ndarray, pass_at: float, fail_below: float) -> dict[str, float]:
    passed, failed = scores >= pass_at, scores < fail_below
    return {
        "false_pass_rate": round(float((passed & ~is_yes).sum() / (~is_yes).sum()), 4),
        "yes_pass_rate": round(float((passed & is_yes).sum() / is_yes.sum()), 4),
        "false_fail_rate": round(float((failed & is_yes).sum() / is_yes.sum()), 4),
        "review_rate": round(float((~passed & ~failed).mean()), 4),
    }


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


def _item_best(values: np.ndarray, owners: np.ndarray, n_items: int) -> np.ndarray:
    """Per item, the row index with the highest value (items with several passages take their best one)."""
    best = np.full(n_items, -np.inf)
    rows = np.zeros(n_items, dtype=int)
    for r, k in enumerate(owners):
        if values[r] > best[k]:
            best[k], rows[k] = values[r], r
    return rows


def _routing_json(routing) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(routing.model_dump_json())


def train(data: Path) -> tuple[dict, dict, dict, dict, dict]:
    items, counts = load_training(data)
    idf, default_idf = fit_idf(items)
    x, y, groups, owners, rule_vetoed = _rows(items, idf, default_idf)
    verbatim = np.array([verbatim_in(items[k].claim, p) for k in range(len(items)) for p in items[k].passages])
    mean, scale = _standardize(x)
    used = np.array([name not in EXCLUDED_FEATURES for name in FEATURE_NAMES])
    mean[~used], scale[~used] = 0.0, 1.0
    xs = (x - mean) / scale
    xs[:, ~used] = 0.0
    vetoed = rule_vetoed.copy()
    for name in VETO_FEATURES:
        vetoed |= x[:, FEATURE_NAMES.index(name)] > 0
    gold_items = np.array([LABELS[i.label] for i in items])
    is_yes = gold_items == 0
    gold_names = [i.label for i in items]
    folds = list(GroupKFold(n_splits=5).split(xs, y, groups))

    def oof(c: float, weight: str | None) -> np.ndarray:
        proba = np.zeros((len(y), 3))
        for tr, te in folds:
            proba[te] = _fit(xs[tr], y[tr], c, weight).predict_proba(xs[te])
        return proba

    def effective(p_yes: np.ndarray) -> np.ndarray:
        """The judge's score per row: 1.0 for a verbatim claim, P(yes) capped for a vetoed pair."""
        return np.where(verbatim, 1.0, np.where(vetoed, np.minimum(p_yes, VETO_SCORE_CAP), p_yes))

    selection = []
    for c in C_GRID:
        for weight in WEIGHT_GRID:
            score = effective(oof(c, weight)[:, 0])
            item_scores = score[_item_best(score, owners, len(items))]
            selection.append({"C": c, "class_weight": weight, "oof_auc": round(_auc(item_scores, is_yes), 4)})
    chosen = max(selection, key=lambda s: (s["oof_auc"], -s["C"]))
    proba = oof(chosen["C"], chosen["class_weight"])
    score = effective(proba[:, 0])
    best_rows = _item_best(score, owners, len(items))
    # rounded so that the last-bit noise of BLAS kernels across machines cannot change the shipped files
    oof_scores = np.round(score[best_rows], 10)
    routing = fit_routing(
        oof_scores,
        gold_names,
        judge="offline",
        judge_version=OFFLINE_VERSION,
        target_false_pass=TARGET_FALSE_PASS,
        target_false_fail=TARGET_FALSE_FAIL,
        source="scripts/train_judge.py: out-of-fold scores on the training items (WiCE dev train half, "
        "ExpertQA val train half minus AttributionBench questions)",
    )
    t_no = _pick_no_threshold(proba[best_rows, 2], gold_items, oof_scores < routing.pass_at)
    model = _fit(xs, y, chosen["C"], chosen["class_weight"])

    offline = {
        "name": "offline",
        "version": OFFLINE_VERSION,
        "feature_set_version": FEATURE_SET_VERSION,
        "features": list(FEATURE_NAMES),
        "excluded_features": list(EXCLUDED_FEATURES),
        "classes": ["yes", "partial", "no"],
        "mean": [round(float(v), 8) for v in mean],
        "scale": [round(float(v), 8) for v in scale],
        "coef": [[round(float(v), 8) for v in row] for row in model.coef_],
        "yes_threshold": routing.pass_at,
        "no_threshold": t_no,
        "default_idf": default_idf,
        "idf": idf,
    }

    # the lexical baseline: the same items, its routing fitted by the same rule on its own score
    overlap = np.array([lexical_overlap(items[k].claim, p) for k in range(len(items)) for p in items[k].passages])
    lex_scores = overlap[_item_best(overlap, owners, len(items))]
    lex_routing = fit_routing(
        lex_scores,
        gold_names,
        judge="lexical",
        judge_version=LEXICAL_VERSION,
        target_false_pass=TARGET_FALSE_PASS,
        target_false_fail=TARGET_FALSE_FAIL,
        source="scripts/train_judge.py: scores on the training items (WiCE dev train half, "
        "ExpertQA val train half minus AttributionBench questions)",
    )
    lexical = {
        "name": "lexical",
        "version": LEXICAL_VERSION,
        "yes_threshold": min(1.0, lex_routing.pass_at),
        "partial_threshold": max(0.0, lex_routing.fail_below),
    }
    window = x[:, FEATURE_NAMES.index("cov_win3")]
    report = {
        "training": counts,
        "rows": len(y),
        "row_labels": {k: int((y == v).sum()) for k, v in LABELS.items()},
        "item_labels": {k: int((gold_items == v).sum()) for k, v in LABELS.items()},
        "selection": selection,
        "chosen": chosen,
        "offline_oof_training": {
            "auc": round(_auc(oof_scores, is_yes), 4),
            **_rates(oof_scores, is_yes, routing.pass_at, routing.fail_below),
        },
        "lexical_training": {
            "auc": round(_auc(lex_scores, is_yes), 4),
            **_rates(lex_scores, is_yes, lex_routing.pass_at, lex_routing.fail_below),
        },
        "best_window_overlap_training_auc": round(_auc(window[_item_best(window, owners, len(items))], is_yes), 4),
        "routing_offline": {"pass_at": routing.pass_at, "fail_below": routing.fail_below},
        "routing_lexical": {"pass_at": lex_routing.pass_at, "fail_below": lex_routing.fail_below},
    }
    return offline, lexical, _routing_json(routing), _routing_json(lex_routing), report


def _dump(obj: dict) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the shared data folder (wice/, expertqa/, attributionbench/)")
    parser.add_argument("--check", action="store_true", help="compare with the shipped files; write nothing")
    args = parser.parse_args()
    offline, lexical, routing, lex_routing, report = train(_data_dir(args.data))
    print(json.dumps(report, indent=1))
    outputs = {
        PARAMS / "offline.v1.json": _dump(offline),
        PARAMS / "lexical.v1.json": _dump(lexical),
        PARAMS / "routing.offline.json": _dump(routing),
        PARAMS / "routing.lexical.json": _dump(lex_routing),
    }
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
