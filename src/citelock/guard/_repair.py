"""The repair decision: what a surface serves of a checked answer, claim by claim, and what it refuses.

A *failing* claim has a finding that is not merely recorded: provenance ①, ``UNCITED_CLAIM``,
``NUMBER_MISMATCH``, ``UNSUPPORTED`` / ``PARTIAL_SUPPORT`` / ``WRONG_CHUNK``, and ``UNCERTAIN_SUPPORT`` when the
surface does not serve unverified claims (high stakes by default). ``on_fail`` says what happens to it:
``block`` refuses the whole answer, ``drop_claim`` serves the answer without it, ``mark`` serves it visibly
marked unverified. Under ``drop_claim`` a claim that cites several chunks loses only its failing citations when
another of its citations passed every check and no claim-level check (coverage, numbers) failed: it is served
without them (:attr:`ClaimOutcome.removed_citations`). Every finding is queued either way.

An ``OFF_QUESTION`` finding is about the whole answer: on ``fail`` it blocks the answer (``block`` and
``drop_claim``: dropping every claim leaves nothing) or, under ``mark``, marks every claim; on ``review`` it is
served as is when the surface serves unverified answers, else treated as ``fail``.

A check or judge that raised is a ``CHECK_ERROR`` finding. On a fail-closed surface (high stakes by default)
that blocks the answer; elsewhere it is recorded and does not block. Without a surface (``Guard()``, the free
checks alone) every finding fails its claim and the answer passes only when clean (:func:`decide_free`).
"""

from __future__ import annotations

from citelock.guard._policy import SurfacePolicy
from citelock.guard._result import ClaimAction, ClaimOutcome, Decision
from citelock.records import Answer, GuardReport, Layer, ReasonCode

__all__ = ["decide", "decide_free"]


def decide(policy: SurfacePolicy, answer: Answer, report: GuardReport) -> tuple[Decision, tuple[ClaimOutcome, ...]]:
    """Decide per claim (serve / drop / mark / block) and for the answer (pass / repaired / block).

    Args:
        policy: The surface's policy (``on_fail``, ``serve_unverified``, ``fail_closed``).
        answer: The parsed answer.
        report: The guard's report on it, support findings included.

    Returns:
        The answer's decision and one :class:`ClaimOutcome` per claim, in answer order.
    """
    failing: dict[int, list[ReasonCode]] = {}
    noted: dict[int, list[ReasonCode]] = {}
    claim_level: set[int] = set()  # claims with a failing finding about the claim itself, not one citation
    failed_citations: dict[int, set[int]] = {}
    refuse = off_question = False
    for f in report.findings:
        if f.reason == ReasonCode.CHECK_ERROR and not policy.fail_closed:
            noted.setdefault(f.claim_index, []).append(f.reason)
            continue
        if f.reason == ReasonCode.OFF_QUESTION:  # answer-level: the answer does not address the question
            review = f.verdicts.get("relevance") == "review"
            if review and policy.serve_unverified:
                continue  # queued for review, served as is
            if policy.on_fail == "mark":
                off_question = True
            else:
                refuse = True
            continue
        if f.claim_index < 0:  # a whole-answer failure (the deterministic guard itself failed)
            refuse = True
            continue
        if f.reason == ReasonCode.CHECK_ERROR:  # fail closed: this claim could not be checked
            refuse = True
        if f.reason == ReasonCode.UNCERTAIN_SUPPORT and policy.serve_unverified:
            noted.setdefault(f.claim_index, []).append(f.reason)
            continue
        failing.setdefault(f.claim_index, []).append(f.reason)
        if f.citation_index is None or f.layer in (Layer.COVERAGE, Layer.NUMBERS):  # numbers: over all citations
            claim_level.add(f.claim_index)
        else:
            failed_citations.setdefault(f.claim_index, set()).add(f.citation_index)
    action: ClaimAction = "block" if policy.on_fail == "block" else "drop" if policy.on_fail == "drop_claim" else "mark"
    outcomes: list[ClaimOutcome] = []
    for ci, claim in enumerate(answer.claims):
        reasons = failing.get(ci)
        if off_question:  # mark: every claim is served marked (the answer as a whole is off-question)
            reasons = [*(reasons or []), ReasonCode.OFF_QUESTION]
            claim_level.add(ci)
        bad = failed_citations.get(ci, set())
        if reasons and action == "drop" and ci not in claim_level and len(bad) < len(claim.citations):
            # another citation of this claim passed every check: serve the claim without the failing ones
            outcomes.append(
                ClaimOutcome(
                    claim_index=ci,
                    claim=claim.text,
                    action="serve",
                    reasons=tuple(dict.fromkeys([*reasons, *noted.get(ci, [])])),
                    removed_citations=tuple(sorted(bad)),
                )
            )
            continue
        outcomes.append(
            ClaimOutcome(
                claim_index=ci,
                claim=claim.text,
                action=action if reasons else "serve",
                reasons=tuple(dict.fromkeys(reasons or noted.get(ci, []))),
            )
        )
    factual = {c.claim_index for c in report.claims if c.factual}
    dropped = any(o.action == "drop" for o in outcomes)
    left = any(o.action != "drop" and o.claim_index in factual for o in outcomes)
    decision: Decision
    if refuse or any(o.action == "block" for o in outcomes) or (dropped and not left):
        decision = "block"
    elif any(o.action in ("drop", "mark") or o.removed_citations for o in outcomes):
        decision = "repaired"
    else:
        decision = "pass"
    return decision, tuple(outcomes)


def decide_free(answer: Answer, report: GuardReport) -> tuple[Decision, tuple[ClaimOutcome, ...]]:
    """The decision of the free checks alone (no surface): every finding fails its claim, a clean answer passes."""
    claims = tuple(
        ClaimOutcome(
            claim_index=ci,
            claim=claim.text,
            action="block" if reasons else "serve",
            reasons=reasons,
        )
        for ci, claim in enumerate(answer.claims)
        for reasons in [tuple(dict.fromkeys(f.reason for f in report.findings if f.claim_index == ci))]
    )
    return ("pass" if report.ok else "block"), claims
