"""The ``gen_ai.evaluation.result`` events of one guard result, as plain attribute dicts (no OpenTelemetry here).

One event per citation, one per uncited claim and one per answer, named and attributed after the OpenTelemetry
GenAI semantic conventions :data:`SEMCONV_VERSION` (``model/gen-ai/events.yaml``, stability "development"):

- ``citelock.provenance``: a citation the support judge did not decide (it failed provenance ①, or it was not
  judged). Label: its reason code when it failed, else ``pass``.
- ``citelock.numbers``: a citation whose claim failed the number pre-check (label ``NUMBER_MISMATCH``).
- ``citelock.support``: a judged citation. Label: the reason code when it failed (``UNSUPPORTED``,
  ``WRONG_CHUNK``, ``PARTIAL_SUPPORT``, ``UNCERTAIN_SUPPORT``, ``CHECK_ERROR``), else its route (``pass``).
  Score: the judge's score when it gives one.
- ``citelock.coverage``: a factual claim with no citation (label ``UNCITED_CLAIM``).
- ``citelock.answer``: the answer. Label: the decision (``pass``, ``repaired``, ``block``). Score: the share of
  citations with no finding.

Scores are in [0, 1]: 1.0 for a citation with no finding, 0.0 for a failing one (a judge's own score replaces
both when it gives one). ``gen_ai.response.id`` is the id of the evaluated response when the caller knows it,
else citelock's request id (the prompt log's key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from citelock.records import Finding, GuardReport, Layer

if TYPE_CHECKING:
    from citelock.telemetry._observed import GuardOutcome

__all__ = ["EVALUATION_EVENT", "SEMCONV_VERSION", "Attributes", "evaluation_events", "review_event"]

SEMCONV_VERSION = "1.41.0"
"""The semantic-conventions release whose GenAI YAML citelock follows (the last one that holds model/gen-ai/)."""

EVALUATION_EVENT = "gen_ai.evaluation.result"

Attributes = dict[str, str | int | float | bool]

_NAME = "gen_ai.evaluation.name"
_VALUE = "gen_ai.evaluation.score.value"
_LABEL = "gen_ai.evaluation.score.label"
_EXPLANATION = "gen_ai.evaluation.explanation"
_RESPONSE = "gen_ai.response.id"


def _citation_layer(findings: list[Finding], judged: bool) -> str:
    layers = {f.layer for f in findings}
    if Layer.PROVENANCE in layers:
        return "citelock.provenance"
    if Layer.SUPPORT in layers or judged:
        return "citelock.support"
    if Layer.NUMBERS in layers:
        return "citelock.numbers"
    return "citelock.provenance"


def evaluation_events(result: GuardOutcome | GuardReport, *, response_id: str | None = None) -> list[Attributes]:
    """The attributes of every ``gen_ai.evaluation.result`` event for one guarded answer.

    Args:
        result: A :class:`citelock.GuardResult` (:meth:`citelock.Guard.run`) or a :class:`citelock.GuardReport`
            (:func:`citelock.check`, the free checks alone).
        response_id: The evaluated response's id (``gen_ai.response.id``); default: the request id.

    Returns:
        One dict per event: the citations in answer order, then the uncited claims, then the answer.
    """
    report = result if isinstance(result, GuardReport) else result.report
    support = {} if isinstance(result, GuardReport) else {(s.claim_index, s.citation_index): s for s in result.support}
    base: Attributes = {_RESPONSE: response_id or report.request_id, "citelock.request_id": report.request_id}
    surface = None if isinstance(result, GuardReport) else result.surface
    if surface:
        base["citelock.surface"] = surface
    by_citation: dict[tuple[int, int], list[Finding]] = {}
    number_claims: dict[int, Finding] = {}
    for f in report.findings:
        if f.layer == Layer.NUMBERS:
            number_claims[f.claim_index] = f
        elif f.citation_index is not None:
            by_citation.setdefault((f.claim_index, f.citation_index), []).append(f)
    events: list[Attributes] = []
    failed = 0
    for c in report.citations:
        key = (c.claim_index, c.citation_index)
        findings = list(by_citation.get(key, []))
        if c.passed and c.claim_index in number_claims:
            findings.append(number_claims[c.claim_index])
        check = support.get(key)
        judged = check is not None and check.status in ("judged", "error")
        event: Attributes = {**base, _NAME: _citation_layer(findings, judged)}
        event.update({"citelock.claim_index": c.claim_index, "citelock.citation_index": c.citation_index})
        event["citelock.chunk_id"] = c.chunk_id
        if findings:
            failed += 1
            event[_LABEL] = findings[0].reason.value
            event[_EXPLANATION] = "; ".join(f.detail or f.reason.value for f in findings)
            event[_VALUE] = 0.0
        else:
            event[_LABEL] = check.route if check is not None and check.route else "pass"
            event[_VALUE] = 1.0
        if check is not None and check.score is not None:
            event[_VALUE] = float(check.score)
        if check is not None and check.judge:
            event["citelock.judge"] = f"{check.judge} {check.version}"
        events.append(event)
    for f in report.findings:
        if f.layer == Layer.COVERAGE:
            events.append(
                {
                    **base,
                    _NAME: "citelock.coverage",
                    _LABEL: f.reason.value,
                    _VALUE: 0.0,
                    _EXPLANATION: f.detail,
                    "citelock.claim_index": f.claim_index,
                }
            )
    decision = ("pass" if report.ok else "block") if isinstance(result, GuardReport) else result.decision
    answer: Attributes = {**base, _NAME: "citelock.answer", _LABEL: decision}
    if report.citations:
        answer[_VALUE] = (len(report.citations) - failed) / len(report.citations)
    reasons = [f"{f.reason.value} (claim {f.claim_index})" for f in report.findings]
    answer[_EXPLANATION] = f"{len(reasons)} finding(s): {', '.join(reasons)}" if reasons else "no findings"
    answer["citelock.findings"] = len(report.findings)
    events.append(answer)
    return events


def review_event(
    entry: Mapping[str, Any], outcome: str, *, reviewer: str | None, note: str | None = None
) -> Attributes:
    """The ``gen_ai.evaluation.result`` event of a reviewer's outcome on one queue entry (a HUMAN evaluation).

    Args:
        entry: The queue entry's fields (``id``, ``request_id``, ``reason``, ``claim_index``, ``citation_index``,
            ``chunk_id``).
        outcome: ``accept`` (the finding was wrong: the citation stands), ``repair`` or ``escalate``.
        reviewer: Who decided.
        note: The reviewer's note, the event's explanation.
    """
    score = {"accept": 1.0, "repair": 0.0, "escalate": 0.0}.get(outcome)
    event: Attributes = {
        _NAME: "citelock.review",
        _LABEL: outcome,
        _RESPONSE: str(entry["request_id"]),
        "citelock.request_id": str(entry["request_id"]),
        "citelock.annotator.kind": "HUMAN",
        "citelock.entry_id": str(entry["id"]),
        "citelock.reason": str(getattr(entry["reason"], "value", entry["reason"])),
    }
    if score is not None:
        event[_VALUE] = score
    if note:
        event[_EXPLANATION] = note
    if reviewer:
        event["citelock.reviewer"] = reviewer
    for key in ("claim_index", "citation_index", "chunk_id"):
        if entry.get(key) is not None:
            event[f"citelock.{key}"] = entry[key]
    return event
