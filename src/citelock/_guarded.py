"""The records :meth:`citelock.Citelock.answer` returns: :class:`GuardedAnswer` and its :class:`GenerationStats`.

Their JSON Schema is ``schemas/guarded_answer.v1.json``; :mod:`citelock.pipeline` builds them and re-exports them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock.constraint import SpanPolicy
from citelock.guard import ClaimOutcome, Decision, JudgeAccounting
from citelock.records import Answer, DroppedChunk, Finding, GuardReport
from citelock.render import RenderStyle

__all__ = ["GUARDED_ANSWER_SCHEMA_VERSION", "GenerationStats", "GuardedAnswer", "guarded_answer_json_schema"]

GUARDED_ANSWER_SCHEMA_VERSION: Literal["1"] = "1"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GenerationStats(_Record):
    """Accounting of one generation.

    Attributes:
        enforced: The backend enforced the constraint during decoding (verified after the fact).
        prompt_tokens: Prompt tokens, if known.
        completion_tokens: Generated tokens, if known.
        latency_s: Wall time of the backend call.
        first_token_s: Time to first token, if measured.
        tokens_per_s: Decoding speed, if measured.
        finish_reason: ``stop``, ``length`` or backend-specific.
        schema_build_ms: Time to build the citation schema (0 when it came from the cache).
        max_tokens: The token budget the backend was given.
        notes: What the backend wants recorded.
    """

    enforced: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    first_token_s: float | None = None
    tokens_per_s: float | None = None
    finish_reason: str | None = None
    schema_build_ms: float | None = None
    max_tokens: int
    notes: tuple[str, ...] = ()


class GuardedAnswer(_Record):
    """An answer with its guard report, as :func:`citelock.answer` returns it (JSON Schema in ``schemas/``).

    Attributes:
        request_id: The request id (the prompt log's key).
        question: The question.
        answer: The parsed answer: claims with ``citations[].chunk_id`` / ``span``.
        report: The guard's report (① provenance, ② coverage, number pre-check).
        findings: The report's findings (also in ``report``), at the top for convenience.
        ok: True when the answer is served whole and clean: ``decision == "pass"`` (one meaning, with or without a
            surface).
        span_policy: The span policy decoding enforced (None when nothing was constrained: the naive baseline).
        requested_policy: The policy the caller asked for.
        downgrade_reason: Why ``span_policy`` is weaker than ``requested_policy``, if it is.
        backend: Backend name.
        model: Model name.
        template: The prompt template used (``name.vVERSION``).
        prompt_sha256: sha256 of the messages as sent.
        dropped: Chunks assembly dropped to meet the budget.
        generation: The generation's accounting.
        render_style: How ``rendered`` shows citations.
        rendered: The answer text with its citation markers rendered, without the dropped claims (and the
            footnotes only they used), with marked claims followed by ``(unverified: REASON, ...)``. For a
            blocked answer it is the whole answer, for inspection: do not serve it.
        surface: The surface policy's name (None when the guard ran the free checks only).
        decision: ``pass``, ``repaired`` or ``block``. Without a surface: ``pass`` when the free checks found
            nothing, else ``block`` (rendered whole, for inspection).
        accounting: Support-judge calls made and saved (all zero without a surface).
        removed: The claims dropped from ``rendered`` (``on_fail="drop_claim"``), with their reason codes.
        marked: The claims ``rendered`` marks unverified (``on_fail="mark"``), with their reason codes.
        trimmed: The claims served without some of their citations (``on_fail="drop_claim"``, another citation
            of the claim passed every check): ``removed_citations`` and the reason codes of the removed ones.
        abstained_before_generation: The pipeline abstained without calling the model: no assembled chunk was
            relevant enough to the question (the surface's ``abstain_below``); ``rendered`` is the abstention.
    """

    schema_version: Literal["1"] = GUARDED_ANSWER_SCHEMA_VERSION
    request_id: str
    question: str
    answer: Answer
    report: GuardReport
    findings: tuple[Finding, ...]
    ok: bool
    span_policy: SpanPolicy | None
    requested_policy: SpanPolicy | None
    downgrade_reason: str | None = None
    backend: str
    model: str
    template: str
    prompt_sha256: str
    dropped: tuple[DroppedChunk, ...] = ()
    generation: GenerationStats
    render_style: RenderStyle
    rendered: str = Field(description="the answer text with citation markers rendered per render_style")
    surface: str | None = None
    decision: Decision | None = None
    accounting: JudgeAccounting | None = None
    removed: tuple[ClaimOutcome, ...] = ()
    marked: tuple[ClaimOutcome, ...] = ()
    trimmed: tuple[ClaimOutcome, ...] = ()
    abstained_before_generation: bool = False

    @property
    def served(self) -> bool:
        """True unless the guard blocked the answer (``pass`` or ``repaired``)."""
        return self.decision != "block"


def guarded_answer_json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`GuardedAnswer` (for ``schemas/``)."""
    return GuardedAnswer.model_json_schema()
