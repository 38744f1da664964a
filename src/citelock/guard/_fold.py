"""One request's guard as a fold over its claims: a claim is checked once, when it completes.

:class:`GuardFold` holds what a guard run builds once per request (the prompt's index, the support layer with
its judge memos) and the per-claim results so far. :meth:`GuardFold.check` runs one claim's free checks,
:meth:`GuardFold.support` its support judge ③; :meth:`GuardFold.result` folds the claims not seen yet and
assembles the answer's :class:`~citelock.guard.GuardResult` from the per-claim results plus the answer-level
checks (relevance), without checking any claim again. :meth:`citelock.Guard.run` is this fold over a whole answer;
a stream feeds it claim by claim as they complete, and its final result is the same value.
"""

from __future__ import annotations

from collections.abc import Collection
from threading import Lock
from typing import Literal, Protocol

from citelock.guard._checks import ClaimChecks, check_claim, combine_checks
from citelock.guard._policy import SurfacePolicy, require_routing_for
from citelock.guard._result import ClaimOutcome, GuardResult, SupportCheck
from citelock.guard._support import Judging
from citelock.guard._targets import Selection, combine_selections, judged_text, select_claim_targets
from citelock.judges import Judge
from citelock.judges._routing import Routing
from citelock.prompt import PromptIndex
from citelock.records import Answer, Claim, ClaimCheck, Finding, GuardReport, PromptRecord, ReasonCode

__all__ = ["ClaimSupport", "GuardFold"]


class _Guard(Protocol):
    """What the fold reads of its :class:`~citelock.Guard` (the guard module imports this one, not the reverse)."""

    policy: SurfacePolicy | None
    judge: Judge | None
    escalate: Judge | None
    routing: Routing | None
    escalate_routing: Routing | None
    ordering: bool
    numbers: bool

    def _assemble(self, fold: GuardFold, parsed: Answer) -> GuardResult: ...


_QUOTING = ("quote", "quote_sentence")

ClaimSupport = tuple[tuple[SupportCheck, ...], tuple[Finding, ...]]
"""One claim's support layer: a :class:`SupportCheck` per citation and the claim's support findings."""


class GuardFold:
    """The guard of one request, claim by claim (see the module docstring).

    Args:
        guard: The :class:`~citelock.Guard` (its policy, judges, routings, relevance).
        record: The logged prompt.
        known_ids: Ids of the whole chunk store.
        index: The prompt's :class:`PromptIndex`, when the request built it already (None: built here).
    """

    def __init__(
        self,
        guard: _Guard,
        record: PromptRecord,
        *,
        known_ids: Collection[str] | None = None,
        index: PromptIndex | None = None,
    ) -> None:
        self.guard = guard
        self.record = record
        self.known_ids = known_ids
        self.index = index if index is not None and index.record is record else PromptIndex.build(record)
        self.claims: list[Claim] = []
        self.checks: list[ClaimChecks] = []
        self.supports: dict[int, Selection] = {}
        self.error: Exception | None = None
        self.format: str | None = None
        self.span_policy: str | None = None
        self._lock = Lock()
        policy = guard.policy
        self.judging: Judging | None = None
        if policy is not None and guard.judge is not None:
            require_routing_for(guard.routing, guard.judge)
            if guard.escalate is not None:
                require_routing_for(guard.escalate_routing, guard.escalate, "escalation judge")
            self.judging = Judging(self.index, guard.judge, guard.routing, guard.escalate, guard.escalate_routing)
        self.numbers = True if policy is not None else guard.numbers

    def check(self, claim: Claim, *, answer_format: str = "structured", span_policy: str | None = None) -> ClaimChecks:
        """The free checks of the answer's next claim (once; a guard with a policy records a failing check)."""
        n = len(self.checks)
        if n == 0:
            self.format, self.span_policy = answer_format, span_policy
        fmt: Literal["structured", "free_text"] = "free_text" if answer_format == "free_text" else "structured"
        try:
            checked = check_claim(
                self.index,
                claim,
                n,
                answer_format=fmt,
                span_policy=span_policy,
                known_ids=self.known_ids,
                numbers=self.numbers,
            )
        except Exception as exc:  # with a policy, a failing check is a CHECK_ERROR finding (Guard.run's rule)
            if self.guard.policy is None:
                raise
            self.error = self.error or exc
            coverage = ClaimCheck(claim_index=n, factual=False, kind="error", cited=bool(claim.citations))
            checked = ClaimChecks(n, (), coverage, ())
        self.claims.append(claim)
        self.checks.append(checked)
        return checked

    def support(self, n: int) -> ClaimSupport:
        """Claim ``n``'s support layer: which citations the surface judges, and their verdicts (once per claim).

        Thread-safe, and calls for the claims of one answer must come in claim order where a judge runs (the
        stream sends them to one worker): the judge memo and the findings then follow the answer's order.
        """
        policy = self.guard.policy
        if policy is None or self.error is not None:
            return (), ()
        with self._lock:
            if n in self.supports:
                raise RuntimeError(f"claim {n}'s support was already judged")  # a bug, not an input problem
            checked = self.checks[n]
            number_failed = any(f.reason == ReasonCode.NUMBER_MISMATCH for f in checked.findings)
            selection = select_claim_targets(
                policy,
                judged_text(self.claims[n].text, self.span_policy),
                checked.citations,
                number_failed,
                self.index,
                ordering=self.guard.ordering,
            )
            self.supports[n] = selection
            if not selection.targets or self.judging is None:
                return selection.skipped, ()
            judging = self.judging
            at_check, at_finding = len(judging.checks), len(judging.findings)
            for target in selection.targets:
                judging.support(target, diagnose=policy.diagnose)
            return (*selection.skipped, *judging.checks[at_check:]), tuple(judging.findings[at_finding:])

    def outcome(self, n: int, support: ClaimSupport) -> ClaimOutcome:
        """What the surface does with claim ``n`` on its own findings (answer-level checks come with the result)."""
        from citelock.guard._repair import decide, decide_free

        if not self.checks[n].findings and not support[1]:  # nothing against it: served as is, on every surface
            return ClaimOutcome(claim_index=n, claim=self.claims[n].text, action="serve", reasons=())
        findings = tuple(f.model_copy(update={"claim_index": 0}) for f in (*self.checks[n].findings, *support[1]))
        alone = Answer(claims=(self.claims[n],))
        coverage = self.checks[n].coverage.model_copy(update={"claim_index": 0})
        report = GuardReport(
            request_id=self.record.request_id,
            prompt_sha256=self.record.sha256,
            ok=not findings,
            layers=(),
            citations=(),
            claims=(coverage,),
            findings=findings,
        )
        policy = self.guard.policy
        _, outcomes = decide(policy, alone, report) if policy is not None else decide_free(alone, report)
        return outcomes[0].model_copy(update={"claim_index": n})

    def matches(self, record: PromptRecord, parsed: Answer, known_ids: Collection[str] | None) -> bool:
        """True when this fold's claims so far are ``parsed``'s first claims, for the same prompt and store ids."""
        if record is not self.record or known_ids is not self.known_ids or len(self.claims) > len(parsed.claims):
            return False
        # the per-claim checks read the format and whether the policy quotes (a quote claim's text is its span),
        # nothing else of the policy: an unenforced output that held "id" or "none" keeps a fold checked under "span"
        quoting = self.span_policy in _QUOTING, parsed.span_policy in _QUOTING
        if self.claims and (self.format != parsed.format or quoting[0] != quoting[1]):
            return False
        return all(a == b for a, b in zip(self.claims, parsed.claims, strict=False))

    def result(self, parsed: Answer) -> GuardResult:
        """The answer's result: the claims not folded yet are checked (and judged), then the answer is assembled."""
        for claim in parsed.claims[len(self.checks) :]:
            self.check(claim, answer_format=parsed.format, span_policy=parsed.span_policy)
        for n in range(len(parsed.claims)):
            if n not in self.supports:
                self.support(n)
        return self.guard._assemble(self, parsed)

    def report(self) -> GuardReport:
        """The free checks' report of the claims folded so far (provenance, coverage, numbers)."""
        return combine_checks(self.record, self.checks, numbers=self.numbers)

    def selection(self) -> Selection:
        """The support layer's selection over the claims folded so far, in claim order."""
        return combine_selections([self.supports[n] for n in sorted(self.supports)])
