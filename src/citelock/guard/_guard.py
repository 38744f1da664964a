"""The guard's one entry point: ``Guard(policy, judge).run(record, answer) -> GuardResult``.

A :class:`Guard` holds configuration (the surface policy, the support judge, an optional stronger judge for
reviews) and checks it once, when it is built: a routing calibrated for another judge, or a policy that needs a
judge it cannot get, fails there, before any prompt is logged or any model is called. :meth:`Guard.run` parses
the answer once and returns a :class:`GuardResult`; it writes nothing (the pipeline persists).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from citelock.errors import UsageError
from citelock.guard._policy import GuardResult, SurfacePolicy, free_result, resolve_routing, run_policy
from citelock.guard._run import check
from citelock.judges import Judge, default_judge
from citelock.judges._routing import Routing, shipped_routing
from citelock.prompt._parse import parse_answer
from citelock.records import Answer, PromptRecord
from citelock.telemetry._hook import instrumented

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

    Raises:
        UsageError: ``judge``/``escalate`` without a policy; the policy's routing was calibrated for another
            judge or judge version.
    """

    def __init__(
        self,
        policy: SurfacePolicy | None = None,
        judge: Judge | None = None,
        *,
        escalate: Judge | None = None,
        ordering: bool = True,
        numbers: bool = True,
    ) -> None:
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
        self.routing: Routing | None = resolve_routing(policy, judge) if policy is not None else None
        self.escalate_routing: Routing | None = (
            shipped_routing(escalate.name, escalate.version) if escalate is not None else None
        )

    def __repr__(self) -> str:
        surface = self.policy.name if self.policy is not None else None
        judge = f"{self.judge.name} {self.judge.version}" if self.judge is not None else None
        return f"Guard(surface={surface!r}, judge={judge!r})"

    @instrumented  # OpenTelemetry spans and evaluation events when the otel extra is installed
    def run(
        self,
        record: PromptRecord,
        answer: Answer | Mapping[str, Any] | str,
        *,
        store: Collection[str] | None = None,
    ) -> GuardResult:
        """Guard one answer against the prompt it was generated from, exactly as sent.

        Args:
            record: The logged prompt (:func:`citelock.serialize`, :func:`citelock.record_from_messages` or the
                prompt log).
            answer: The answer, parsed or in any shape :func:`citelock.parse_answer` accepts (parsed once).
            store: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.

        Returns:
            A :class:`GuardResult`: the report, the decision, what happens to each claim and, with a policy,
            every citation's support route and the judge's accounting.

        Raises:
            ParseError: the answer cannot be parsed (unusable input, not a finding).
        """
        parsed = parse_answer(answer)
        if self.policy is None:
            return free_result(record, parsed, check(record, parsed, store=store, numbers=self.numbers))
        return run_policy(
            record,
            parsed,
            policy=self.policy,
            judge=self.judge,
            routing=self.routing,
            escalate=self.escalate,
            escalate_routing=self.escalate_routing,
            store=store,
            ordering=self.ordering,
        )
