"""The guard's one entry point: ``Guard(policy, judge).run(record, answer) -> GuardResult``.

A :class:`Guard` holds configuration (the surface policy, the support judge, an optional stronger judge for
reviews) and checks it once, when it is built: a routing calibrated for another judge, or a policy that needs a
judge it cannot get, fails there, before any prompt is logged or any model is called. :meth:`Guard.run` parses
the answer once, builds the prompt's index once, and hands both down the one route of a request:

    the free checks (:mod:`._checks`) -> the citations to judge (:mod:`._targets`) -> support ③ (:mod:`._support`)
    -> the repair decision (:mod:`._repair`) -> a :class:`GuardResult` (:mod:`._result`)

It writes nothing (the pipeline persists). An observer above it (telemetry's spans and evaluation events) may
watch each run through :mod:`citelock._observe`; the guard does not know who.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Collection, Mapping
from typing import Any, Protocol

from citelock._observe import guard_observer
from citelock.errors import UsageError
from citelock.guard._audit_step import build_audit
from citelock.guard._fold import GuardFold
from citelock.guard._policy import SurfacePolicy, resolve_routing
from citelock.guard._relevance import RelevanceCheck, RelevanceMode, add_relevance
from citelock.guard._repair import decide, decide_free
from citelock.guard._result import GuardResult, JudgeAccounting, SupportCheck, iso_week
from citelock.guard._support import SupportRun
from citelock.judges import Judge, RelevanceJudge, default_judge
from citelock.judges._routing import Routing, shipped_routing
from citelock.prompt import PromptIndex, parse_for_record
from citelock.records import Answer, Finding, GuardReport, Layer, PromptRecord, ReasonCode


class GuardSource(Protocol):
    """What :meth:`Guard.from_config` reads: a :class:`citelock.Config` (named here, not imported: it is above)."""

    def guard(self, surface: str | None = None) -> Guard:
        """The guard of ``surface``."""
        ...


__all__ = ["Guard"]


class Guard:
    """The residual guard, configured once and run on every answer.

    Example:
        >>> guard = Guard()  # the free checks: provenance ①, coverage ②, numbers
        >>> guard.run(record, answer).report.findings  # doctest: +SKIP
        >>> legal = Guard(SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim"))
        >>> legal.run(record, answer).decision  # doctest: +SKIP

    Args:
        policy: The surface policy (:class:`SurfacePolicy`). None runs the free checks only (no judge): the
            decision is ``pass`` when they find nothing, else ``block``.
        judge: The support judge ③. None with a policy that judges anything (high stakes, or a low-stakes
            sample) uses :func:`citelock.judges.default_judge`.
        escalate: A stronger judge for citations the judge's routing sends to ``review`` (None: they go to the
            review queue as ``UNCERTAIN_SUPPORT``). Its shipped routing applies when one ships for its version,
            else its label decides.
        ordering: Judge only citations that passed the cheaper checks (the default); False exists to measure
            what ordering saves.
        numbers: Run the ``NUMBER_MISMATCH`` pre-check (free-check mode only; a policy always runs it).
        relevance: Without a policy: ``free`` (the default) runs the free relevance check (``OFF_QUESTION``)
            whenever the prompt record knows the question, ``off`` does not. With a policy, its ``relevance``
            decides.
        relevance_judge: The relevance judge (:class:`citelock.judges.RelevanceJudge`) of a surface whose
            ``relevance`` is ``judged``: it settles the answers the free relevance check does not pass.

    Raises:
        UsageError: ``judge``/``escalate`` without a policy; the policy's routing was calibrated for another
            judge or judge version.
    """

    @classmethod
    def from_config(cls, config: GuardSource, surface: str | None = None) -> Guard:
        """The guard of a surface of the config file: ``config.guard(surface)`` (see :class:`citelock.Config`).

        Args:
            config: A loaded :class:`~citelock.Config`.
            surface: The surface (default: the config's ``default_surface``; with neither, the free checks).

        Raises:
            UsageError: ``config`` is not a loaded config, or it has no such surface.
        """
        make = getattr(config, "guard", None)
        if not callable(make):
            raise UsageError(f"config must be a citelock.Config (Config.load()), got {type(config).__name__}")
        guard = make(surface)
        if not isinstance(guard, Guard):  # pragma: no cover - Config.guard returns a Guard
            raise UsageError(f"config.guard() returned {type(guard).__name__}, not a Guard")
        return guard

    def __init__(
        self,
        policy: SurfacePolicy | None = None,
        judge: Judge | None = None,
        *,
        escalate: Judge | None = None,
        ordering: bool = True,
        numbers: bool = True,
        relevance: RelevanceMode = "free",
        relevance_judge: RelevanceJudge | None = None,
    ) -> None:
        if relevance not in ("off", "free", "judged"):
            raise UsageError(f"relevance must be off, free or judged, got {relevance!r}")
        mode = policy.relevance if isinstance(policy, SurfacePolicy) else relevance
        if mode == "judged" and not isinstance(relevance_judge, RelevanceJudge):
            raise UsageError(
                "relevance='judged' needs relevance_judge=citelock.judges.RelevanceJudge(completer), got "
                f"{type(relevance_judge).__name__}"
            )
        if policy is not None and not isinstance(policy, SurfacePolicy):
            raise UsageError(f"policy must be a citelock.SurfacePolicy or None, got {type(policy).__name__}")
        if policy is None and (judge is not None or escalate is not None):
            raise UsageError("judge= and escalate= take effect with a policy: Guard(SurfacePolicy(...), judge=...)")
        for role, value in (("judge", judge), ("escalate", escalate)):
            if value is not None and not isinstance(value, Judge):
                raise UsageError(
                    f"{role} must implement citelock.judges.Judge (name, version, judge(claim, passage)), "
                    f"got {type(value).__name__}"
                )
        if policy is not None and judge is None and (policy.stakes == "high" or policy.sample_rate > 0):
            judge = default_judge()
        self.policy = policy
        self.judge = judge
        self.escalate = escalate
        self.ordering = ordering
        self.numbers = numbers
        self.relevance: RelevanceMode = mode
        self.relevance_judge = relevance_judge if mode == "judged" else None
        self.routing: Routing | None = resolve_routing(policy, judge) if policy is not None else None
        self.escalate_routing: Routing | None = (
            shipped_routing(escalate.name, escalate.version) if escalate is not None else None
        )

    def __repr__(self) -> str:
        surface = self.policy.name if self.policy is not None else None
        judge = f"{self.judge.name} {self.judge.version}" if self.judge is not None else None
        return f"Guard(surface={surface!r}, judge={judge!r})"

    def with_judges(self, *, judge: Judge | None = None, escalate: Judge | None = None) -> Guard:
        """A copy of this guard with its support judge and/or stronger judge swapped, every other setting kept.

        The copy keeps every field (policy, routings, ordering, numbers, relevance and its judge, and any field
        added later), so a wrapper such as a memoizing or tracing judge never loses the caller's configuration.
        The swapped judges must answer as the originals do (same name and version): the routings are not
        resolved again.

        Args:
            judge: The support judge to use instead (None: keep this guard's).
            escalate: The stronger judge to use instead (None: keep this guard's).

        Returns:
            A new :class:`Guard`; this one is unchanged.

        Raises:
            UsageError: a replacement that does not implement :class:`citelock.judges.Judge`, or one given where
                this guard has no judge in that role.
        """
        for role, value, current in (("judge", judge, self.judge), ("escalate", escalate, self.escalate)):
            if value is None:
                continue
            if not isinstance(value, Judge):
                raise UsageError(f"{role} must implement citelock.judges.Judge, got {type(value).__name__}")
            if current is None:
                raise UsageError(f"this guard has no {role} to swap; build a Guard with one")
        twin = copy.copy(self)
        twin.judge = judge if judge is not None else self.judge
        twin.escalate = escalate if escalate is not None else self.escalate
        return twin

    def fold(
        self, record: PromptRecord, *, known_ids: Collection[str] | None = None, index: PromptIndex | None = None
    ) -> GuardFold:
        """This guard's run over one request, claim by claim (a stream feeds it as its claims complete).

        Args:
            record: The logged prompt.
            known_ids: Ids of the whole chunk store.
            index: The prompt's :class:`~citelock.prompt.PromptIndex` when the request built it already.

        Returns:
            A :class:`~citelock.guard._fold.GuardFold`; pass it to :meth:`run` as ``fold=`` to assemble the result
            from the claims it checked.
        """
        return GuardFold(self, record, known_ids=known_ids, index=index)

    def run(
        self,
        record: PromptRecord,
        answer: Answer | Mapping[str, Any] | str,
        *,
        known_ids: Collection[str] | None = None,
        fold: GuardFold | None = None,
    ) -> GuardResult:
        """Guard one answer against the prompt it was generated from, exactly as sent.

        Args:
            record: The logged prompt (:func:`citelock.serialize`, :func:`citelock.record_from_messages` or the
                prompt log).
            answer: The answer, parsed or in any shape :func:`citelock.parse_answer` accepts (parsed once, under
                the rule the record's call applied: :func:`citelock.prompt.parse_for_record`).
            known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
            fold: The request's :meth:`fold` that already checked the answer's first claims (a stream's): the
                result is assembled from them, and only the claims it has not seen are checked. A fold whose
                claims are not the answer's is not used.

        Returns:
            A :class:`GuardResult`: the report, the decision, what happens to each claim and, with a policy,
            every citation's support route and the judge's accounting.

        Raises:
            ParseError: the answer cannot be parsed (unusable input, not a finding).
        """
        observer = guard_observer()  # telemetry's spans and evaluation events, when it watches
        if observer is None:
            return _run(self, record, answer, known_ids=known_ids, fold=fold)
        result: GuardResult = observer(functools.partial(_run, fold=fold), self, record, answer, known_ids)
        return result

    def _assemble(self, fold: GuardFold, parsed: Answer) -> GuardResult:
        """The answer's result from the fold's per-claim results plus the answer-level checks (relevance)."""
        record, index = fold.record, fold.index
        if self.policy is None:
            report = fold.report()
            relevance: RelevanceCheck | None = None
            if self.relevance != "off":
                report, relevance = add_relevance(index, parsed, report, judge=self.relevance_judge)
            decision, claims = decide_free(parsed, report)
            return GuardResult(
                decision=decision,
                week=iso_week(record),
                report=report,
                accounting=JudgeAccounting(citations=len(report.citations)),
                claims=claims,
                relevance=relevance,
                abstention="model" if parsed.abstained else None,
            )
        return self._assemble_policy(self.policy, fold, parsed)

    def _assemble_policy(self, policy: SurfacePolicy, fold: GuardFold, parsed: Answer) -> GuardResult:
        """The free checks' report, relevance, then support ③ as the fold judged it, then the decision."""
        record, index = fold.record, fold.index
        relevance: RelevanceCheck | None = None
        try:
            if fold.error is not None:
                raise fold.error
            report = fold.report()
            if policy.relevance != "off":
                report, relevance = add_relevance(
                    index, parsed, report, policy.relevance_routing, judge=self.relevance_judge, stakes=policy.stakes
                )
        except Exception as exc:  # a failing check is a finding, and the policy decides what it blocks
            report = _errored_report(record, exc)
            return self._result(policy, record, parsed, report, JudgeAccounting(errors=1))
        selection = fold.selection()
        run: SupportRun | None = None
        if selection.targets and fold.judging is not None:
            run = fold.judging.result()
        accounting = JudgeAccounting(
            citations=len(report.citations),
            saved_by_ordering=selection.saved_by_ordering,
            saved_by_sampling=selection.saved_by_sampling,
            no_passage=selection.no_passage,
        )
        checks = selection.skipped
        if run is not None:
            accounting = accounting.model_copy(
                update={
                    "judge_calls": run.calls,
                    "diagnosis_calls": run.diagnosis_calls,
                    "cache_hits": run.cache_hits,
                    "errors": run.errors,
                    "reviews": run.reviews,
                    "escalations": run.escalations,
                }
            )
            checks = (*checks, *run.checks)
            findings = (*report.findings, *run.findings)
            report = report.model_copy(
                update={"findings": findings, "ok": not findings, "layers": (*report.layers, Layer.SUPPORT)}
            )
        support = tuple(sorted(checks, key=lambda s: (s.claim_index, s.citation_index)))
        result = self._result(policy, record, parsed, report, accounting, support)
        if relevance is not None or parsed.abstained:
            result = result.model_copy(
                update={"relevance": relevance, "abstention": "model" if parsed.abstained else None}
            )
        texts = {
            (t.claim_index, t.citation_index): (t.claim, index.body(index.by_id[t.chunk_id])) for t in selection.targets
        }
        audit = build_audit(
            surface=policy.name,
            stakes=policy.stakes,
            plan=policy.audit,
            routing=self.routing,
            own_routing=policy.routing is not None,
            request_id=record.request_id,
            checks=result.support,
            texts=texts,
        )
        return result if audit is None else result.model_copy(update={"audit": audit})

    @staticmethod
    def _result(
        policy: SurfacePolicy,
        record: PromptRecord,
        parsed: Answer,
        report: GuardReport,
        accounting: JudgeAccounting,
        support: tuple[SupportCheck, ...] = (),
    ) -> GuardResult:
        decision, claims = decide(policy, parsed, report)
        return GuardResult(
            surface=policy.name,
            policy=policy,
            decision=decision,
            week=iso_week(record),
            report=report,
            support=support,
            accounting=accounting,
            claims=claims,
        )


def _run(
    guard: Guard,
    record: PromptRecord,
    answer: Answer | Mapping[str, Any] | str,
    *,
    known_ids: Collection[str] | None,
    fold: GuardFold | None = None,
) -> GuardResult:
    """:meth:`Guard.run`'s work, with ``guard`` (the caller's, or an observer's copy of it)."""
    parsed = parse_for_record(answer, record)
    if fold is None or not fold.matches(record, parsed, known_ids):
        fold = GuardFold(guard, record, known_ids=known_ids, index=fold.index if fold is not None else None)
    return fold.result(parsed)


def _errored_report(record: PromptRecord, exc: Exception) -> GuardReport:
    """The report of a deterministic guard that raised: one whole-answer ``CHECK_ERROR`` finding."""
    finding = Finding(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        reason=ReasonCode.CHECK_ERROR,
        layer=Layer.PROVENANCE,
        claim_index=-1,
        claim="",
        detail=f"the deterministic guard failed on this answer: {type(exc).__name__}: {exc}",
        verdicts={"provenance": "error"},
    )
    return GuardReport(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        ok=False,
        layers=(),
        citations=(),
        claims=(),
        findings=(finding,),
    )
