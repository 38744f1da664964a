"""Reason codes and the one table that says what each means: the ground every other layer reads.

A finding carries a :class:`ReasonCode` (a stable string, part of the public API) and the :class:`Layer` of
the guard that produced it. :data:`REASONS` holds, for every code, the layer that emits it, its family, a
one-line description, whether the support judge decides it, and what a developer or reviewer does about it.
Every set of codes in the package (the span codes the evals count, the judged codes the review queue turns
into calibration samples), every description (a provenance finding's detail, the CLI, the docs' table,
the JSON Schemas of the records) derives from this table, so a new code is one enum member plus one entry.

This module imports nothing from citelock: it is the lowest layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Literal, get_args

__all__ = [
    "FAMILIES",
    "REASONS",
    "Layer",
    "ReasonCode",
    "ReasonFamily",
    "ReasonInfo",
    "codes_in",
    "judged_codes",
    "reason_table",
]


class ReasonCode(StrEnum):
    """Stable reason codes (public API); what each means and what to do: ``citelock.reasons.REASONS``."""

    ID_NOT_IN_PROMPT = "ID_NOT_IN_PROMPT"
    STALE_ID = "STALE_ID"
    FABRICATED_ID = "FABRICATED_ID"
    SPAN_TRUNCATED = "SPAN_TRUNCATED"
    SPAN_NOT_IN_CHUNK = "SPAN_NOT_IN_CHUNK"
    SPAN_ONLY_IN_QUESTION = "SPAN_ONLY_IN_QUESTION"
    SPAN_ONLY_IN_HISTORY = "SPAN_ONLY_IN_HISTORY"
    SPAN_IN_OTHER_CHUNK = "SPAN_IN_OTHER_CHUNK"
    SPAN_STITCHED = "SPAN_STITCHED"
    UNCITED_CLAIM = "UNCITED_CLAIM"
    ANSWER_TRUNCATED = "ANSWER_TRUNCATED"
    UNSUPPORTED = "UNSUPPORTED"
    WRONG_CHUNK = "WRONG_CHUNK"
    PARTIAL_SUPPORT = "PARTIAL_SUPPORT"
    UNCERTAIN_SUPPORT = "UNCERTAIN_SUPPORT"
    NUMBER_MISMATCH = "NUMBER_MISMATCH"
    OFF_QUESTION = "OFF_QUESTION"
    CHECK_ERROR = "CHECK_ERROR"
    AUDIT_SAMPLE = "AUDIT_SAMPLE"


class Layer(StrEnum):
    """Which guard layer produced a finding."""

    PROVENANCE = "provenance"
    COVERAGE = "coverage"
    NUMBERS = "numbers"
    SUPPORT = "support"
    RELEVANCE = "relevance"


ReasonFamily = Literal["id", "span", "coverage", "number", "support", "relevance", "error"]
"""What kind of failure a code names: a cited id, a cited span, a missing citation, a number, the support
judge's decision, an answer that does not address the question, or a check that could not run."""

FAMILIES: tuple[ReasonFamily, ...] = get_args(ReasonFamily)
"""Every :data:`ReasonFamily`, in table order."""


@dataclass(frozen=True)
class ReasonInfo:
    """What one reason code means.

    Attributes:
        layer: The guard layer that emits it; None for a code any layer emits (the finding then carries the
            layer whose check raised).
        family: What kind of failure it names (see :data:`ReasonFamily`).
        description: One line: what is wrong. A provenance finding's ``detail`` defaults to it.
        judged: True when the support judge's verdict decides it (a reviewer's ``accept`` of such a finding
            becomes a calibration sample).
        fix: One line: what a developer or reviewer does about it.
    """

    layer: Layer | None
    family: ReasonFamily
    description: str
    judged: bool
    fix: str


def _info(layer: Layer | None, family: ReasonFamily, description: str, fix: str, *, judged: bool = False) -> ReasonInfo:
    return ReasonInfo(layer=layer, family=family, description=description, judged=judged, fix=fix)


_P, _S = Layer.PROVENANCE, Layer.SUPPORT
REASONS: Mapping[ReasonCode, ReasonInfo] = MappingProxyType(
    {
        ReasonCode.ID_NOT_IN_PROMPT: _info(
            _P,
            "id",
            "the cited id is not one of this prompt's chunks",
            "re-answer citing this prompt's ids; pass the store's ids (known_ids=) to tell STALE_ID from FABRICATED_ID",
        ),
        ReasonCode.STALE_ID: _info(
            _P,
            "id",
            "a real id not assembled into this prompt: in the chunk store, or carried by an earlier turn of the chat",
            "re-answer from this prompt; if the answer needs that chunk, raise the budget or fix the ranking",
        ),
        ReasonCode.FABRICATED_ID: _info(
            _P,
            "id",
            "the cited id exists neither in this prompt nor in the chunk store",
            "the model invented it: constrain the ids to the prompt's (citelock.answer) or re-answer",
        ),
        ReasonCode.SPAN_TRUNCATED: _info(
            _P,
            "span",
            "the chunk's body was cut in the prompt and the span lies in the lost part",
            "raise the context budget or chunk smaller: the model cited text it never saw",
        ),
        ReasonCode.SPAN_NOT_IN_CHUNK: _info(
            _P,
            "span",
            "the span is not verbatim in the cited chunk's body as sent",
            "constrain spans to the chunk's text (span policy quote or substring) or re-answer quoting exactly",
        ),
        ReasonCode.SPAN_ONLY_IN_QUESTION: _info(
            _P,
            "span",
            "the span occurs in the prompt only outside the context (e.g. the question)",
            "the model quoted the question, not a source: re-answer citing a passage",
        ),
        ReasonCode.SPAN_ONLY_IN_HISTORY: _info(
            _P,
            "span",
            "the span occurs in the prompt only in earlier turns of the conversation, not in this turn's chunks",
            "the model quoted the conversation, not evidence: re-answer citing a passage retrieved for this turn",
        ),
        ReasonCode.SPAN_IN_OTHER_CHUNK: _info(
            _P,
            "span",
            "the span is verbatim in a different assembled chunk",
            "re-cite the chunk the finding names (related_chunk_id); the claim can stay",
        ),
        ReasonCode.SPAN_STITCHED: _info(
            _P,
            "span",
            "the span joins pieces of the sources that are never contiguous (each piece is verbatim, the whole is not)",
            "quote one contiguous passage, or cite each piece as its own span (an ellipsis is not verbatim)",
        ),
        ReasonCode.UNCITED_CLAIM: _info(
            Layer.COVERAGE,
            "coverage",
            "a factual claim carries no citation",
            "cite the chunk that supports it or drop it (pleasantries, headings, questions are never flagged)",
        ),
        ReasonCode.ANSWER_TRUNCATED: _info(
            Layer.COVERAGE,
            "coverage",
            "the answer stopped before it was complete (a streamed answer cancelled, cut or diverged)",
            "only the claims complete before the cut were checked; ask again (the rest was never generated)",
        ),
        ReasonCode.NUMBER_MISMATCH: _info(
            Layer.NUMBERS,
            "number",
            "a number in none of the claim's verified cited passages (an uncited claim: in no chunk, "
            "nor in the question)",
            "correct the number from the passage, or cite the passage that states it",
        ),
        ReasonCode.UNSUPPORTED: _info(
            _S,
            "support",
            "the judge routed the citation to fail: the cited passage does not support the claim",
            "drop or rewrite the claim, or retrieve a passage that supports it",
            judged=True,
        ),
        ReasonCode.PARTIAL_SUPPORT: _info(
            _S,
            "support",
            "the judge routed the citation to fail: the cited passage supports only part of the claim",
            "narrow the claim to what the passage says, or cite a passage for the rest",
            judged=True,
        ),
        ReasonCode.WRONG_CHUNK: _info(
            _S,
            "support",
            "the cited passage fails the judge but another assembled chunk passes it",
            "re-cite the chunk the finding names (related_chunk_id), not re-answer",
            judged=True,
        ),
        ReasonCode.UNCERTAIN_SUPPORT: _info(
            _S,
            "support",
            "the judge's score fell between the surface's two thresholds and no stronger judge settled it",
            "a person decides in the review queue (accept = supported), or configure a judge to escalate to",
            judged=True,
        ),
        ReasonCode.AUDIT_SAMPLE: _info(
            _S,
            "support",
            "not a failure: a judged citation drawn for a person to label (the answer was served as decided)",
            "label it: accept = the passage supports the claim, reject = it does not (the judge's live error rates)",
            judged=True,
        ),
        ReasonCode.OFF_QUESTION: _info(
            Layer.RELEVANCE,
            "relevance",
            "the answer as a whole does not address the question: no claim holds what was asked",
            "retrieve passages that answer this question (or abstain); the claims may be true, but of another question",
        ),
        ReasonCode.CHECK_ERROR: _info(
            None,
            "error",
            "a check or judge raised instead of deciding; blocks on fail-closed (high-stakes) surfaces",
            "read the finding's detail for the error, fix its cause (input, judge, server) and guard again",
        ),
    }
)
"""Every :class:`ReasonCode` -> what it means, in the guard's order (provenance, coverage, numbers, support)."""


def _check_table() -> None:
    missing = [code.value for code in ReasonCode if code not in REASONS]
    if missing:
        raise RuntimeError(f"citelock.reasons.REASONS has no entry for {', '.join(missing)}: add one per code")


_check_table()


def codes_in(family: ReasonFamily) -> frozenset[ReasonCode]:
    """The codes of one family, e.g. ``codes_in("span")``.

    Raises:
        ValueError: ``family`` is not one of :data:`FAMILIES`.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown reason family {family!r}; expected one of {', '.join(FAMILIES)}")
    return frozenset(code for code, info in REASONS.items() if info.family == family)


def judged_codes() -> frozenset[ReasonCode]:
    """The codes the support judge's verdict decides (the review queue's calibratable findings)."""
    return frozenset(code for code, info in REASONS.items() if info.judged)


_LAYER_LABELS: Mapping[Layer | None, str] = {
    Layer.PROVENANCE: "① provenance",
    Layer.COVERAGE: "② coverage",
    Layer.NUMBERS: "numbers",
    Layer.SUPPORT: "③ support",
    Layer.RELEVANCE: "relevance",
    None: "any",
}


def reason_table() -> str:
    """The docs' reason-code table (Markdown): one row per code, in :data:`REASONS` order."""
    rows = ["| layer | code | meaning | what to do |", "|---|---|---|---|"]
    previous = ""
    for code, info in REASONS.items():
        label = _LAYER_LABELS[info.layer]
        cells = ("" if label == previous else label, f"`{code.value}`", info.description, info.fix)
        previous = label
        rows.append("|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|")
    return "\n".join(rows) + "\n"


def _code_docstring() -> str:
    lines = [
        (ReasonCode.__doc__ or "").strip(),
        "",
        *(f"- ``{code.value}`` ({info.layer or 'any layer'}): {info.description}." for code, info in REASONS.items()),
    ]
    return "\n".join(lines)


# The enum's docstring lists every code's meaning from the table: help(), the API docs and the JSON Schemas
# of the records (pydantic takes an enum's description from its docstring) all read it.
ReasonCode.__doc__ = _code_docstring()
