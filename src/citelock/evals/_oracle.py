"""The seeded corpus's own entailment as a judge: a labeled stand-in, never a substitute for a real judge.

The seeded corpus is built so that support is decidable by string matching (see
:mod:`citelock.evals._defects`): a claim is supported by a passage iff it is one of the passage's sentences.
:class:`SeededEntailmentJudge` implements exactly that rule behind the :class:`~citelock.judges.Judge`
protocol. It sees only ``(claim, passage)``, like every judge, so it is id-blind. Reports that use it say
"stand-in" next to every number it produced.
"""

from __future__ import annotations

import re

from citelock.records import Verdict
from citelock.text import normalize

__all__ = ["SeededEntailmentJudge"]

_SENTENCE_END = re.compile(r"(?<=[.!?”\"])\s+(?=[A-Z\u00c0-\u024f\u0141])")


class SeededEntailmentJudge:
    """The seeded rule: ``yes``, ``partial`` or ``no`` from the passage's sentences.

    ``yes`` iff the claim is a sentence of the passage; ``partial`` iff a sentence of the passage is a strict
    prefix of the claim extended by a clause (``"X, and Y."`` over ``"X."``); ``no`` otherwise.

    This is the entailment of the seeded defect benchmark, stated as code. It is only valid on that corpus.
    """

    name = "seeded-entailment"
    version = "1"
    stand_in = True

    def judge(self, claim: str, passage: str) -> Verdict:
        """Judge ``claim`` against ``passage`` by the seeded rule."""
        text = normalize(claim)
        sentences = {normalize(s) for s in _SENTENCE_END.split(normalize(passage)) if s.strip()}
        if text in sentences:
            return Verdict(label="yes", raw="yes", judge=self.name, version=self.version)
        stem = text.rstrip(".")
        for sentence in sentences:
            head = sentence.rstrip(".")
            if head and stem.startswith(head + ",") and len(stem) > len(head) + 2:
                return Verdict(label="partial", raw="partial", judge=self.name, version=self.version)
        return Verdict(label="no", raw="no", judge=self.name, version=self.version)
