"""Guard ③, support: does the one cited passage support the claim? Plus best-evidence diagnosis.

The judge sees the claim text and the cited chunk's body exactly as sent (normalized), nothing else: not the
question, not the other chunks, not the rest of the answer. ``yes`` passes; ``partial`` and ``no`` fail. For a
failing citation the claim is then judged against every *other* assembled chunk, in prompt order, until one
says ``yes``: that is ``WRONG_CHUNK`` (re-cite, not re-answer; the supporting chunk is in
``Finding.related_chunk_id``). When none does, the finding is ``PARTIAL_SUPPORT`` (the cited passage said
``partial``) or ``UNSUPPORTED`` (it said ``no``).

A judge that raises (or returns something that is not a :class:`Verdict`) never crashes the guard: the error
becomes a ``CHECK_ERROR`` finding, and the policy decides whether the answer fails closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock._errors import InputError
from citelock._records import Finding, Layer, PlacedChunk, PromptRecord, ReasonCode, Verdict, VerdictLabel
from citelock.guard._provenance import PromptIndex
from citelock.judges import Judge

__all__ = ["SupportCheck", "SupportRun", "SupportStatus", "SupportTarget", "judge_support"]

SupportStatus = Literal["judged", "error", "skipped_ordering", "skipped_sampling", "no_passage"]
"""What happened to one citation in the support layer.

``judged``: the judge gave a verdict. ``error``: the judge raised (a ``CHECK_ERROR`` finding).
``skipped_ordering``: not judged because a cheaper check (provenance ① or numbers) already failed it.
``skipped_sampling``: not judged because the surface's sample left it out.
``no_passage``: the cited id is not in the prompt, so there is no passage to judge.
"""


class SupportCheck(BaseModel):
    """Guard ③ outcome for one citation, stored with every guard result (metrics read these).

    Attributes:
        claim_index: Position of the claim in the answer.
        citation_index: Position of the citation in the claim.
        chunk_id: The cited chunk id.
        status: See :data:`SupportStatus`.
        label: The judge's label for (claim, cited passage), when judged.
        raw: The judge's raw answer, when judged.
        judge: The judge's name, when judged.
        version: The judge's version, when judged.
        error: The error message, when the judge raised.
        related_chunk_id: For a failing verdict, the other assembled chunk that does support the claim.
        diagnosis: Labels of the other chunks judged in the best-evidence diagnosis, by chunk id.
        rank: The cited chunk's retrieval rank, if known.
        strategy: The cited chunk's chunking strategy, if known.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim_index: int
    citation_index: int
    chunk_id: str
    status: SupportStatus
    label: VerdictLabel | None = None
    raw: str | None = None
    judge: str | None = None
    version: str | None = None
    error: str | None = None
    related_chunk_id: str | None = None
    diagnosis: dict[str, VerdictLabel] = Field(default_factory=dict)
    rank: int | None = None
    strategy: str | None = None

    @property
    def supported(self) -> bool | None:
        """True for a ``yes`` verdict, False for ``partial``/``no``, None when not judged."""
        return None if self.label is None else self.label == "yes"


@dataclass(frozen=True)
class SupportTarget:
    """One citation to judge: where it sits in the answer and the claim text."""

    claim_index: int
    citation_index: int
    chunk_id: str
    claim: str
    span: str | None = None


@dataclass
class _Outcome:
    checks: list[SupportCheck] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    calls: int = 0
    diagnosis_calls: int = 0
    errors: int = 0


@dataclass(frozen=True)
class SupportRun:
    """The support layer's result for one answer.

    Attributes:
        checks: One :class:`SupportCheck` per target, in target order.
        findings: ``UNSUPPORTED`` / ``WRONG_CHUNK`` / ``PARTIAL_SUPPORT`` / ``CHECK_ERROR`` findings.
        calls: Judge calls on (claim, cited passage) pairs.
        diagnosis_calls: Judge calls on (claim, other chunk) pairs during best-evidence diagnosis.
        errors: Judge calls that raised.
    """

    checks: tuple[SupportCheck, ...]
    findings: tuple[Finding, ...]
    calls: int
    diagnosis_calls: int
    errors: int


class _JudgeFailure(Exception):
    pass


def _call(judge: Judge, claim: str, passage: str) -> Verdict:
    try:
        verdict = judge.judge(claim, passage)
    except Exception as exc:  # a judge may fail in any way; it becomes a CHECK_ERROR finding
        raise _JudgeFailure(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(verdict, Verdict):
        raise _JudgeFailure(f"the judge returned {type(verdict).__name__}, expected a citelock Verdict")
    return verdict


def _finding(
    record: PromptRecord,
    target: SupportTarget,
    passage: str,
    reason: ReasonCode,
    detail: str,
    verdicts: dict[str, str],
    *,
    related_chunk_id: str | None = None,
    judge_raw: str | None = None,
    judge_version: str | None = None,
) -> Finding:
    return Finding(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        reason=reason,
        layer=Layer.SUPPORT,
        claim_index=target.claim_index,
        claim=target.claim,
        citation_index=target.citation_index,
        chunk_id=target.chunk_id,
        span=target.span,
        passage=passage,
        related_chunk_id=related_chunk_id,
        detail=detail,
        verdicts=verdicts,
        judge_raw=judge_raw,
        judge_version=judge_version,
    )


def judge_support(
    record: PromptRecord,
    targets: list[SupportTarget],
    judge: Judge,
    *,
    diagnose: bool = True,
) -> SupportRun:
    """Judge each target citation against its one cited passage; diagnose the failures.

    Args:
        record: The logged prompt the answer was generated from.
        targets: The citations to judge (normally those that passed provenance ① and the number check).
        judge: The support judge; it receives ``(claim text, cited chunk body as sent)`` and nothing else.
        diagnose: Run best-evidence diagnosis on failing verdicts (``WRONG_CHUNK`` vs the others).

    Returns:
        A :class:`SupportRun` with one check per target and the findings.

    Raises:
        InputError: a target cites a chunk that is not in this prompt (only ①-survivors can be judged).
    """
    index = PromptIndex.build(record)
    out = _Outcome()
    memo: dict[tuple[str, str], Verdict] = {}

    def verdict_for(claim: str, placed: PlacedChunk, *, diagnosis: bool) -> Verdict:
        key = (claim, placed.id)
        if key not in memo:
            if diagnosis:
                out.diagnosis_calls += 1
            else:
                out.calls += 1
            memo[key] = _call(judge, claim, index.body(placed))
        return memo[key]

    for target in targets:
        placed = index.by_id.get(target.chunk_id)
        if placed is None:
            raise InputError(
                f"claim {target.claim_index} citation {target.citation_index} cites {target.chunk_id!r}, "
                f"which is not in prompt {record.request_id!r}; "
                "only citations that passed provenance can be judged"
            )
        passage = index.body(placed)
        ran = {"provenance": "pass", "numbers": "pass"}
        try:
            verdict = verdict_for(target.claim, placed, diagnosis=False)
        except _JudgeFailure as exc:
            out.errors += 1
            out.checks.append(_check(target, placed, status="error", error=str(exc)))
            out.findings.append(
                _finding(
                    record,
                    target,
                    passage,
                    ReasonCode.CHECK_ERROR,
                    f"the support judge {judge.name} {judge.version} failed: {exc}",
                    {**ran, "support": "error"},
                    judge_version=f"{judge.name} {judge.version}",
                )
            )
            continue
        verdict_fields = {"label": verdict.label, "raw": verdict.raw, "judge": verdict.judge}
        if verdict.passed:
            out.checks.append(_check(target, placed, status="judged", version=verdict.version, **verdict_fields))
            continue
        verdicts = {**ran, "support": verdict.label}
        related: str | None = None
        diagnosis: dict[str, VerdictLabel] = {}
        diagnosis_error: str | None = None
        if diagnose:
            for other in index.by_id.values():
                if other.id == target.chunk_id:
                    continue
                try:
                    other_verdict = verdict_for(target.claim, other, diagnosis=True)
                except _JudgeFailure as exc:
                    out.errors += 1
                    diagnosis_error = f"judging against {other.id}: {exc}"
                    break
                diagnosis[other.id] = other_verdict.label
                if other_verdict.passed:
                    related = other.id
                    break
            if diagnosis_error:
                verdicts["diagnosis"] = "error"
            else:
                verdicts["diagnosis"] = f"yes:{related}" if related else "no other chunk supports it"
        out.checks.append(
            _check(
                target,
                placed,
                status="judged",
                version=verdict.version,
                related_chunk_id=related,
                diagnosis=diagnosis,
                **verdict_fields,
            )
        )
        if related is not None:
            reason = ReasonCode.WRONG_CHUNK
            detail = f"the cited passage does not support the claim ({verdict.label}); {related} does: re-cite"
        elif verdict.label == "partial":
            reason, detail = ReasonCode.PARTIAL_SUPPORT, "the cited passage supports only part of the claim"
        else:
            reason = ReasonCode.UNSUPPORTED
            detail = "the cited passage does not support the claim" + (
                ", nor does any other assembled chunk" if diagnose and not diagnosis_error else ""
            )
        judge_version = f"{verdict.judge} {verdict.version}"
        out.findings.append(
            _finding(
                record,
                target,
                passage,
                reason,
                detail,
                verdicts,
                related_chunk_id=related,
                judge_raw=verdict.raw,
                judge_version=judge_version,
            )
        )
        if diagnosis_error is not None:
            out.findings.append(
                _finding(
                    record,
                    target,
                    passage,
                    ReasonCode.CHECK_ERROR,
                    f"best-evidence diagnosis failed, so {reason.value} may really be WRONG_CHUNK: " + diagnosis_error,
                    {**verdicts, "diagnosis": "error"},
                    judge_raw=verdict.raw,
                    judge_version=judge_version,
                )
            )
    return SupportRun(
        checks=tuple(out.checks),
        findings=tuple(out.findings),
        calls=out.calls,
        diagnosis_calls=out.diagnosis_calls,
        errors=out.errors,
    )


def _check(target: SupportTarget, placed: PlacedChunk, **fields: object) -> SupportCheck:
    return SupportCheck.model_validate(
        {
            "claim_index": target.claim_index,
            "citation_index": target.citation_index,
            "chunk_id": target.chunk_id,
            "rank": placed.chunk.rank,
            "strategy": placed.chunk.strategy,
            **fields,
        }
    )
