"""Guard ③, support: does the one cited passage support the claim? Routing, escalation, best-evidence diagnosis.

The judge sees the claim text and the cited chunk's body exactly as sent (normalized), nothing else: not the
question, not the other chunks, not the rest of the answer. Its verdict is routed to ``pass``, ``review`` or
``fail``: with a :class:`~citelock.judges.Routing` by the verdict's ``score`` and the routing's two thresholds;
without one by the label alone (``yes`` passes; ``partial`` and ``no`` fail).

- ``pass``: no finding.
- ``review``: a stronger judge decides when one is given (``escalate``; its verdict is routed by its own
  routing, or by its label), else an ``UNCERTAIN_SUPPORT`` finding sends the citation to a person.
- ``fail``: the claim is judged against every *other* assembled chunk, in prompt order, until one routes to
  ``pass``: that is ``WRONG_CHUNK`` (re-cite, not re-answer; the supporting chunk is in
  ``Finding.related_chunk_id``). Each other chunk goes through the same two tiers as the citation: a verdict
  routed to ``review`` is escalated to the stronger judge when one is given, so a citation the stronger judge
  failed is not diagnosed by the weaker judge alone. When no chunk passes, the finding is ``PARTIAL_SUPPORT``
  (the deciding verdict said ``partial``) or ``UNSUPPORTED``, and its detail names the chunks the judges were
  unsure about (``verdicts["diagnosis"] = "unsure:c2,c3"``).

A judge that raises (or returns something that is not a :class:`Verdict`, or no score where the surface routes
by score) never crashes the guard: the error becomes a ``CHECK_ERROR`` finding, and the policy decides whether
the answer fails closed.

:func:`judge_support` takes one citation at a time through the steps, each a method of :class:`Judging`: judge and
route, escalate, then review (``UNCERTAIN_SUPPORT``) or diagnose and fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from citelock.errors import InputError, UsageError
from citelock.guard._policy import require_routing_for
from citelock.guard._result import SupportCheck
from citelock.judges import Judge
from citelock.judges._routing import Route, Routing
from citelock.prompt import PromptIndex
from citelock.records import Finding, Layer, PlacedChunk, PromptRecord, ReasonCode, Verdict, VerdictLabel

__all__ = ["Judging", "SupportRun", "SupportTarget", "judge_support"]


@dataclass(frozen=True)
class SupportTarget:
    """One citation to judge: where it sits in the answer and the claim text."""

    claim_index: int
    citation_index: int
    chunk_id: str
    claim: str
    span: str | None = None


@dataclass(frozen=True)
class SupportRun:
    """The support layer's result for one answer.

    Attributes:
        checks: One :class:`SupportCheck` per target, in target order.
        findings: ``UNSUPPORTED`` / ``WRONG_CHUNK`` / ``PARTIAL_SUPPORT`` / ``UNCERTAIN_SUPPORT`` /
            ``CHECK_ERROR`` findings.
        calls: Judge calls on (claim, cited passage) pairs.
        diagnosis_calls: Judge calls on (claim, other chunk) pairs during best-evidence diagnosis.
        errors: Judge calls that raised.
        reviews: Citations the judge's score routed to ``review``.
        escalations: Calls to the stronger judge: on those, and on other chunks routed to ``review`` during
            diagnosis.
        cache_hits: Verdicts of ``judge`` that came from its cache (:attr:`Verdict.cached`).
    """

    checks: tuple[SupportCheck, ...]
    findings: tuple[Finding, ...]
    calls: int
    diagnosis_calls: int
    errors: int
    reviews: int = 0
    escalations: int = 0
    cache_hits: int = 0


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


def _route(verdict: Verdict, routing: Routing | None) -> Route:
    """Route a verdict: by score with a routing, else by label (``yes`` passes, ``partial``/``no`` fail)."""
    if routing is None:
        return "pass" if verdict.passed else "fail"
    if verdict.score is None:
        raise _JudgeFailure(
            f"the judge {verdict.judge} {verdict.version} gave no score, but the surface routes its verdicts "
            f"by score (pass_at {routing.pass_at}, fail_below {routing.fail_below})"
        )
    return routing.route(verdict.score)


def _where(verdict: Verdict, routing: Routing | None) -> str:
    """Why a verdict routed where it did, for a finding's detail."""
    if routing is None or verdict.score is None:
        return f"{verdict.judge} said {verdict.label}"
    return (
        f"{verdict.judge} score {verdict.score:.3f} against thresholds fail_below {routing.fail_below:.3f}, "
        f"pass_at {routing.pass_at:.3f}"
    )


def judge_support(
    record: PromptRecord,
    targets: list[SupportTarget],
    judge: Judge,
    *,
    diagnose: bool = True,
    routing: Routing | None = None,
    escalate: Judge | None = None,
    escalate_routing: Routing | None = None,
    index: PromptIndex | None = None,
) -> SupportRun:
    """Judge each target citation against its one cited passage; route, escalate and diagnose.

    Args:
        record: The logged prompt the answer was generated from.
        targets: The citations to judge (normally those that passed provenance ① and the number check).
        judge: The support judge; it receives ``(claim text, cited chunk body as sent)`` and nothing else.
        diagnose: Run best-evidence diagnosis on failing citations (``WRONG_CHUNK`` vs the others).
        routing: Thresholds for ``judge``'s scores; None routes by label (``yes`` passes, else fails).
        escalate: A stronger judge for citations routed to ``review``; None sends them to the review queue
            (``UNCERTAIN_SUPPORT``).
        escalate_routing: Thresholds for ``escalate``'s scores; None routes its verdicts by label.
        index: The :class:`PromptIndex` of ``record`` when the caller has built it already (:meth:`Guard.run`
            builds one per request and passes it down); None builds it here.

    Returns:
        A :class:`SupportRun` with one check per target and the findings.

    Raises:
        InputError: a target cites a chunk that is not in this prompt (only ①-survivors can be judged).
        UsageError: a routing calibrated for another judge (name or version) than the one it would route;
            an ``index`` built for another record.
    """
    require_routing_for(routing, judge)
    if escalate is not None:
        require_routing_for(escalate_routing, escalate, "escalation judge")
    if index is None:
        index = PromptIndex.build(record)
    elif index.record is not record:
        raise UsageError(
            f"index= was built for prompt {index.record.request_id!r}, but the record is {record.request_id!r}: "
            "pass PromptIndex.build(record), or no index"
        )
    judging = Judging(index, judge, routing, escalate, escalate_routing)
    for target in targets:
        judging.support(target, diagnose=diagnose)
    return judging.result()


@dataclass
class _Routed:
    """A citation's verdicts after the judge and (for a ``review``) the stronger judge."""

    first: Verdict
    deciding: Verdict
    deciding_routing: Routing | None
    route: Route
    fields: dict[str, object]
    verdicts: dict[str, str]
    escalation_error: str | None = None


@dataclass
class _Diagnosis:
    """Best-evidence diagnosis of a failing citation: the first other chunk that passed, or why none did."""

    related: str | None = None
    labels: dict[str, VerdictLabel] = field(default_factory=dict)
    error: str | None = None
    unsure_about: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """The ``verdicts["diagnosis"]`` value of the finding."""
        if self.error:
            return "error"
        if self.related:
            return f"yes:{self.related}"
        if self.unsure_about:
            return "unsure:" + ",".join(self.unsure_about)
        return "no other chunk supports it"


_RAN = {"provenance": "pass", "numbers": "pass"}  # the cheaper checks every judged citation passed


class Judging:
    """One answer's support layer: the judges, their memos and counters, and the checks and findings so far."""

    def __init__(
        self,
        index: PromptIndex,
        judge: Judge,
        routing: Routing | None,
        escalate: Judge | None,
        escalate_routing: Routing | None,
    ) -> None:
        self.index = index
        self.record = index.record
        self.judge = judge
        self.routing = routing
        self.escalate = escalate
        self.escalate_routing = escalate_routing
        self.memo: dict[tuple[str, str], Verdict] = {}
        self.strong_memo: dict[tuple[str, str], Verdict] = {}
        self.checks: list[SupportCheck] = []
        self.findings: list[Finding] = []
        self.calls = self.diagnosis_calls = self.errors = self.reviews = self.escalations = self.cache_hits = 0

    def result(self) -> SupportRun:
        """The run so far as a :class:`SupportRun`."""
        return SupportRun(
            checks=tuple(self.checks),
            findings=tuple(self.findings),
            calls=self.calls,
            diagnosis_calls=self.diagnosis_calls,
            errors=self.errors,
            reviews=self.reviews,
            escalations=self.escalations,
            cache_hits=self.cache_hits,
        )

    def support(self, target: SupportTarget, *, diagnose: bool) -> None:
        """One citation through the steps: judge and route, escalate, then review or diagnose and fail."""
        placed = self.index.by_id.get(target.chunk_id)
        if placed is None:
            raise InputError(
                f"claim {target.claim_index} citation {target.citation_index} cites {target.chunk_id!r}, "
                f"which is not in prompt {self.record.request_id!r}; "
                "only citations that passed provenance can be judged"
            )
        routed = self.judged(target, placed)
        if routed is None:
            return
        if routed.route == "pass":
            self.checks.append(_check(target, placed, status="judged", **routed.fields))
        elif routed.route == "review":
            self.checks.append(_check(target, placed, status="judged", **routed.fields))
            self.review(target, placed, routed)
        else:
            diagnosis = self.diagnose(target) if diagnose else None
            self.fail(target, placed, routed, diagnosis)

    def verdict(self, claim: str, placed: PlacedChunk, *, diagnosis: bool) -> Verdict:
        """The judge's verdict on (claim, chunk as sent), once per pair (diagnosis reuses the citation's)."""
        key = (claim, placed.id)
        if key not in self.memo:
            if diagnosis:
                self.diagnosis_calls += 1
            else:
                self.calls += 1
            self.memo[key] = _call(self.judge, claim, self.index.body(placed))
            self.cache_hits += self.memo[key].cached
        return self.memo[key]

    def judged(self, target: SupportTarget, placed: PlacedChunk) -> _Routed | None:
        """Judge and route the citation, escalating a ``review``; None when the judge failed (recorded)."""
        try:
            verdict = self.verdict(target.claim, placed, diagnosis=False)
            route = _route(verdict, self.routing)
        except _JudgeFailure as exc:
            self.errors += 1
            self.checks.append(_check(target, placed, status="error", error=str(exc)))
            self.findings.append(
                self.finding(
                    target,
                    self.index.body(placed),
                    ReasonCode.CHECK_ERROR,
                    f"the support judge {self.judge.name} {self.judge.version} failed: {exc}",
                    {**_RAN, "support": "error"},
                    judge_version=f"{self.judge.name} {self.judge.version}",
                )
            )
            return None
        verdicts = {**_RAN, "support": verdict.label, "route": route}
        if verdict.score is not None:
            verdicts["score"] = f"{verdict.score:.4f}"
        fields: dict[str, object] = {
            "label": verdict.label,
            "raw": verdict.raw,
            "judge": verdict.judge,
            "version": verdict.version,
            "score": verdict.score,
        }
        routed = _Routed(verdict, verdict, self.routing, route, fields, verdicts)
        if route == "review":
            self.reviews += 1
            if self.escalate is not None:
                self.escalate_review(target, placed, routed, self.escalate)
        routed.fields["route"] = routed.route
        return routed

    def escalated(self, strong: Judge, claim: str, placed: PlacedChunk) -> tuple[Verdict, Route]:
        """The stronger judge's verdict (once per claim and chunk) and where its routing sends it."""
        key = (claim, placed.id)
        if key not in self.strong_memo:
            self.escalations += 1
            self.strong_memo[key] = _call(strong, claim, self.index.body(placed))
        return self.strong_memo[key], _route(self.strong_memo[key], self.escalate_routing)

    def escalate_review(self, target: SupportTarget, placed: PlacedChunk, routed: _Routed, strong: Judge) -> None:
        """Let the stronger judge decide a ``review``; its failure is recorded and the citation stays in review."""
        try:
            verdict, routed.route = self.escalated(strong, target.claim, placed)
        except _JudgeFailure as exc:
            self.errors += 1
            routed.escalation_error = f"the escalation judge {strong.name} {strong.version} failed: {exc}"
            routed.verdicts["escalation"] = "error"
            return
        routed.deciding, routed.deciding_routing = verdict, self.escalate_routing
        routed.fields.update(
            escalation_judge=f"{verdict.judge} {verdict.version}",
            escalation_label=verdict.label,
            escalation_score=verdict.score,
        )
        routed.verdicts.update(escalation=verdict.label, route=routed.route)

    def review(self, target: SupportTarget, placed: PlacedChunk, routed: _Routed) -> None:
        """A citation still in review: ``UNCERTAIN_SUPPORT`` (and ``CHECK_ERROR`` if the escalation failed)."""
        passage = self.index.body(placed)
        unsure = _where(routed.deciding, routed.deciding_routing)
        if routed.deciding is not routed.first:
            unsure = f"{_where(routed.first, self.routing)}; the stronger judge was unsure too: {unsure}"
        elif routed.escalation_error is None and self.escalate is None:
            unsure += "; no stronger judge is configured"
        self.findings.append(
            self.finding(
                target,
                passage,
                ReasonCode.UNCERTAIN_SUPPORT,
                f"the judge's score fell between the surface's thresholds ({unsure}): "
                "a person or a stronger judge must decide",
                routed.verdicts,
                judge_raw=routed.deciding.raw,
                judge_version=f"{routed.deciding.judge} {routed.deciding.version}",
            )
        )
        if routed.escalation_error is not None:
            self.findings.append(
                self.finding(
                    target,
                    passage,
                    ReasonCode.CHECK_ERROR,
                    routed.escalation_error,
                    routed.verdicts,
                    judge_raw=routed.first.raw,
                    judge_version=f"{routed.first.judge} {routed.first.version}",
                )
            )

    def diagnose(self, target: SupportTarget) -> _Diagnosis:
        """Judge the claim against every other assembled chunk, in prompt order, until one routes to ``pass``."""
        out = _Diagnosis()
        for other in self.index.by_id.values():
            if other.id == target.chunk_id:
                continue
            try:
                verdict = self.verdict(target.claim, other, diagnosis=True)
                route = _route(verdict, self.routing)
            except _JudgeFailure as exc:
                self.errors += 1
                out.error = f"judging against {other.id}: {exc}"
                break
            if route == "review" and self.escalate is not None:
                # the same two tiers as the citation itself: an unsure first verdict goes to the stronger judge
                try:
                    verdict, route = self.escalated(self.escalate, target.claim, other)
                except _JudgeFailure as exc:
                    self.errors += 1
                    out.error = f"the escalation judge, judging against {other.id}: {exc}"
                    break
            out.labels[other.id] = verdict.label
            if route == "pass":
                out.related = other.id
                break
            if route == "review":
                out.unsure_about.append(other.id)
        return out

    def fail(self, target: SupportTarget, placed: PlacedChunk, routed: _Routed, diagnosis: _Diagnosis | None) -> None:
        """A failing citation: ``WRONG_CHUNK``, ``PARTIAL_SUPPORT`` or ``UNSUPPORTED`` (and a failed diagnosis)."""
        diag = diagnosis or _Diagnosis()
        if diagnosis is not None:
            routed.verdicts["diagnosis"] = diagnosis.summary
        self.checks.append(
            _check(
                target, placed, status="judged", related_chunk_id=diag.related, diagnosis=diag.labels, **routed.fields
            )
        )
        why = _where(routed.deciding, routed.deciding_routing)
        if routed.deciding is not routed.first:
            why = f"escalated: {_where(routed.first, self.routing)}; then {why}"
        if diag.related is not None:
            reason = ReasonCode.WRONG_CHUNK
            detail = f"the cited passage does not support the claim ({why}); {diag.related} does: re-cite"
        elif routed.deciding.label == "partial":
            reason = ReasonCode.PARTIAL_SUPPORT
            detail = f"the cited passage supports only part of the claim ({why})"
        else:
            reason = ReasonCode.UNSUPPORTED
            elsewhere = ""
            if diagnosis is not None and not diagnosis.error:
                elsewhere = (
                    f", and no other assembled chunk passed (unsure about {', '.join(diag.unsure_about)}: a person "
                    "may find support there)"
                    if diag.unsure_about
                    else ", nor does any other assembled chunk"
                )
            detail = f"the cited passage does not support the claim{elsewhere} ({why})"
        passage = self.index.body(placed)
        self.findings.append(
            self.finding(
                target,
                passage,
                reason,
                detail,
                routed.verdicts,
                related_chunk_id=diag.related,
                judge_raw=routed.deciding.raw,
                judge_version=f"{routed.deciding.judge} {routed.deciding.version}",
            )
        )
        if diag.error is not None:
            self.findings.append(
                self.finding(
                    target,
                    passage,
                    ReasonCode.CHECK_ERROR,
                    f"best-evidence diagnosis failed, so {reason.value} may really be WRONG_CHUNK: " + diag.error,
                    {**routed.verdicts, "diagnosis": "error"},
                    judge_raw=routed.first.raw,
                    judge_version=f"{routed.first.judge} {routed.first.version}",
                )
            )

    def finding(
        self,
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
        """A support finding about one citation."""
        return Finding(
            request_id=self.record.request_id,
            prompt_sha256=self.record.sha256,
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
