"""The offline judge: a multinomial logistic model over lexical, numeric and negation features.

Runs on CPU in numpy, with no download: its parameters ship as JSON (``params/offline.v1.json``), fitted by
``scripts/train_judge.py`` on human-labeled data (WiCE dev train half, ExpertQA val train half minus the
questions that AttributionBench reuses). Long passages are scored sentence-window by sentence-window (see
:mod:`citelock.judges._features`). It is a cheap screen, not an NLI model, and it is *not* the default judge:
on held-out data it ranks about as well as the lexical overlap score (AUC within 0.04) but its shipped routing
exceeds its 5% false-pass target on ExpertQA and AttributionBench, where the lexical routing holds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from citelock.errors import RuntimeFailure
from citelock.judges._features import (
    FEATURE_NAMES,
    FEATURE_SET_VERSION,
    extract_features,
    quote_addition,
    verbatim_in,
)
from citelock.judges._params import load_params
from citelock.records import Verdict

__all__ = ["VETO_FEATURES", "VETO_RULES", "VETO_SCORE_CAP", "OfflineJudge"]

# Deterministic vetoes: a pair with one of these can be partial or no, never yes, whatever the model says.
# A number of the claim that the passage does not contain; a negation in the claim but not in the passage's
# best-matching sentence, or the reverse.
VETO_FEATURES = ("num_missing", "neg_mismatch_win1")
# Deterministic rules outside the feature vector, applied like the vetoes (see _features.quote_addition).
VETO_RULES = ("quote_addition",)
# A vetoed pair's score is P(yes) capped here, so that its score agrees with its label (never ``yes``): the
# shipped routing's pass_at is above the cap (a test checks it), so a vetoed pair routes to review or fail.
VETO_SCORE_CAP = 0.3
_INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}


class OfflineJudge:
    """The offline three-way judge (yes / partial / no).

    Yes when the claim is verbatim in the passage, or when P(yes) >= the fitted threshold and no veto
    applies; else no when P(no) >= its threshold; else partial. Vetoes: a claim number missing from the
    passage, a negation mismatch, a quoted passage sentence plus a clause the passage lacks (partial).

    Args:
        yes_threshold: Override the shipped yes threshold (changes the version string).
    """

    name = "offline"
    inline = True
    """Microseconds of pure Python per call: a stream runs it on its own thread (a worker could not run it sooner)."""

    def __init__(self, yes_threshold: float | None = None) -> None:
        params: dict[str, Any] = load_params("offline.v1")
        if params.get("feature_set_version") != FEATURE_SET_VERSION or tuple(params["features"]) != FEATURE_NAMES:
            raise RuntimeFailure(
                f"offline judge parameters were fitted on feature set {params.get('feature_set_version')!r}, "
                f"but this code computes feature set {FEATURE_SET_VERSION!r}: rerun scripts/train_judge.py"
            )
        self._mean: npt.NDArray[np.float64] = np.asarray(params["mean"], dtype=np.float64)
        self._scale: npt.NDArray[np.float64] = np.asarray(params["scale"], dtype=np.float64)
        self._coef: npt.NDArray[np.float64] = np.asarray(params["coef"], dtype=np.float64)
        excluded = set(params.get("excluded_features", ()))
        self._used = np.array([name not in excluded for name in FEATURE_NAMES])
        self._idf: dict[str, float] = {str(k): float(v) for k, v in params["idf"].items()}
        self._default_idf = float(params["default_idf"])
        self.no_threshold = float(params["no_threshold"])
        self.yes_threshold = float(params["yes_threshold"] if yes_threshold is None else yes_threshold)
        base = str(params["version"])
        self.version = base if yes_threshold is None else f"{base}+t{self.yes_threshold:g}"

    def probabilities(self, claim: str, passage: str) -> dict[str, float]:
        """P(yes), P(partial), P(no) for one pair (the learned model alone, before the vetoes)."""
        return self._model(extract_features(claim, passage, self._idf, self._default_idf).values)

    def _model(self, x: npt.NDArray[np.float64]) -> dict[str, float]:
        logits = self._coef @ np.where(self._used, (x - self._mean) / self._scale, 0.0)
        logits = logits - logits.max()
        p = np.exp(logits)
        p = p / p.sum()
        return {"yes": float(p[0]), "partial": float(p[1]), "no": float(p[2])}

    def judge(self, claim: str, passage: str) -> Verdict:
        """Judge one pair; ``score`` is P(yes), ``raw`` records all three probabilities.

        A claim found verbatim in the passage (up to case, punctuation and citation markers) is ``yes`` with
        score 1.0 whatever the model says: a quote is entailed by its source. A vetoed pair's score is P(yes)
        capped at :data:`VETO_SCORE_CAP`, below the shipped routing's ``pass_at``. The yes threshold is the
        shipped routing's ``pass_at``, so label ``yes`` and route ``pass`` agree.
        """
        if verbatim_in(claim, passage):
            return Verdict(label="yes", raw="verbatim", judge=self.name, version=self.version, score=1.0)
        x = extract_features(claim, passage, self._idf, self._default_idf).values
        p = self._model(x)
        vetoes = [name for name in VETO_FEATURES if x[_INDEX[name]] > 0]
        if quote_addition(claim, passage, self._idf, self._default_idf):
            vetoes.append("quote_addition")
        if p["yes"] >= self.yes_threshold and not vetoes:
            label = "yes"
        elif p["no"] >= self.no_threshold:
            label = "no"
        else:
            label = "partial"
        raw = f"p_yes={p['yes']:.4f} p_partial={p['partial']:.4f} p_no={p['no']:.4f}"
        if vetoes:
            raw += " veto=" + ",".join(vetoes)
        score = min(p["yes"], VETO_SCORE_CAP) if vetoes else p["yes"]
        return Verdict(label=label, raw=raw, judge=self.name, version=self.version, score=score)
