"""The typed events of a guarded stream: every event has a ``type`` string; the last is ``done``.

Shaped like the streaming events of the ``openai`` SDK (``content.delta`` with ``delta`` and ``snapshot``) and
Anthropic's content-block deltas (a citation arrives as its own delta): a consumer switches on ``event.type``.
What a reader may see depends on the surface's show policy (:data:`Show`):

- ``immediately``: ``claim.delta`` / ``citation.*`` events carry the text as it is generated; a claim that then
  fails is ``claim.retracted`` (or marked, under ``on_fail="mark"``).
- ``after_checks`` / ``after_judge``: no text delta is emitted at all; a claim's text first appears in
  ``claim.shown``, after its free checks (and, for ``after_judge``, its judge) passed. A failing claim is
  ``claim.withheld``: nothing unverified is ever on screen.
"""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from citelock.guard import ClaimOutcome, SupportCheck
from citelock.records import Citation, CitationCheck, Claim, Finding, ReasonCode

__all__ = [
    "CitationClosed",
    "CitationDelta",
    "CitationOpened",
    "ClaimChecked",
    "ClaimDelta",
    "ClaimDiverged",
    "ClaimJudged",
    "ClaimRetracted",
    "ClaimShown",
    "ClaimWithheld",
    "Done",
    "Show",
    "StreamEvent",
]

Show = Literal["immediately", "after_checks", "after_judge"]
"""When a reader sees a claim: as it is generated, after its free checks, or after its support judge too."""

AnswerT = TypeVar("AnswerT")


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClaimDelta(_Event):
    """New text of a claim (``immediately`` only).

    Attributes:
        claim_index: The claim's position in the answer.
        delta: The text added since the previous ``claim.delta`` of this claim.
        snapshot: The claim's whole text so far.
    """

    type: Literal["claim.delta"] = "claim.delta"
    claim_index: int
    delta: str
    snapshot: str


class CitationOpened(_Event):
    """A citation of a claim began (``immediately`` only)."""

    type: Literal["citation.opened"] = "citation.opened"
    claim_index: int
    citation_index: int


class CitationDelta(_Event):
    """New text of a citation's ``chunk_id`` or ``span`` (``immediately`` only)."""

    type: Literal["citation.delta"] = "citation.delta"
    claim_index: int
    citation_index: int
    field: Literal["chunk_id", "span"]
    delta: str
    snapshot: str


class CitationClosed(_Event):
    """A citation is complete (``immediately`` only); ``citation`` is what the guard will check."""

    type: Literal["citation.closed"] = "citation.closed"
    claim_index: int
    citation_index: int
    citation: Citation


class ClaimChecked(_Event):
    """A claim is complete and its free checks ran (provenance ①, coverage ②, numbers).

    Attributes:
        claim_index: The claim's position.
        claim: The complete claim.
        passed: No free check failed.
        citations: One provenance check per citation.
        findings: The free checks' findings about this claim.
        judging: A support judge will run on it (a ``claim.judged`` follows).
    """

    type: Literal["claim.checked"] = "claim.checked"
    claim_index: int
    claim: Claim
    passed: bool
    citations: tuple[CitationCheck, ...] = ()
    findings: tuple[Finding, ...] = ()
    judging: bool = False


class ClaimJudged(_Event):
    """A claim's support judge ran (concurrently with the rest of the generation).

    Attributes:
        claim_index: The claim's position.
        passed: The surface serves the claim as verified (``outcome.action == "serve"`` with no reasons).
        support: One support check per citation (route, label, score).
        findings: This claim's findings, free checks and support.
        outcome: What the surface does with the claim (serve, drop, mark, block).
    """

    type: Literal["claim.judged"] = "claim.judged"
    claim_index: int
    passed: bool
    support: tuple[SupportCheck, ...] = ()
    findings: tuple[Finding, ...] = ()
    outcome: ClaimOutcome


class ClaimShown(_Event):
    """A reader may now see this claim (``after_checks`` / ``after_judge``): it passed what the surface waits for.

    Attributes:
        claim_index: The claim's position.
        claim: The claim (text and citations).
    """

    type: Literal["claim.shown"] = "claim.shown"
    claim_index: int
    claim: Claim


class ClaimWithheld(_Event):
    """A claim that failed before it was shown (``after_checks`` / ``after_judge``); it never reaches a reader."""

    type: Literal["claim.withheld"] = "claim.withheld"
    claim_index: int
    reasons: tuple[ReasonCode, ...]


class ClaimRetracted(_Event):
    """A claim already on screen (``immediately``) failed: take it down, or mark it unverified.

    Attributes:
        claim_index: The claim's position.
        reasons: Why.
        action: ``retract`` (remove it) or ``mark`` (the surface's ``on_fail="mark"``: show it marked).
    """

    type: Literal["claim.retracted"] = "claim.retracted"
    claim_index: int
    reasons: tuple[ReasonCode, ...]
    action: Literal["retract", "mark"]


class ClaimDiverged(_Event):
    """A citation stopped being possible mid-generation (an unconstrained backend).

    Its id is no prefix of any assembled id, or its span no longer a substring of its chunk.

    Attributes:
        claim_index: The claim's position.
        citation_index: The citation's position in the claim (None for a ``quote`` claim's own text).
        field: What diverged: ``chunk_id``, ``span`` or ``text`` (a quote).
        value: The value as it stood at the diverging delta.
        reason: The provenance reason it fails with.
        delta_index: 0-based index of the delta at which it diverged.
        tokens: Deltas (tokens) consumed when it diverged.
        action: ``cut`` (generation stopped: the answer would be refused) or ``continue`` (the claim is dropped,
            the stream goes on).
    """

    type: Literal["claim.diverged"] = "claim.diverged"
    claim_index: int
    citation_index: int | None
    field: Literal["chunk_id", "span", "text"]
    value: str
    reason: ReasonCode
    delta_index: int
    tokens: int
    action: Literal["cut", "continue"]


class Done(_Event, Generic[AnswerT]):
    """The last event: the guarded answer, identical to what ``Citelock.answer`` returns for this generation.

    Attributes:
        answer: The :class:`~citelock.GuardedAnswer`.
        cut: The stream was cut before generation finished (a divergence under ``on_diverge="cut"``): the answer
            holds the claims complete by then and an ``ANSWER_TRUNCATED`` finding, and is blocked.
    """

    type: Literal["done"] = "done"
    answer: AnswerT
    cut: bool = False


StreamEvent = Annotated[
    ClaimDelta
    | CitationOpened
    | CitationDelta
    | CitationClosed
    | ClaimChecked
    | ClaimJudged
    | ClaimShown
    | ClaimWithheld
    | ClaimRetracted
    | ClaimDiverged,
    Field(discriminator="type"),
]
"""Every event but :class:`Done` (a union discriminated by ``type``)."""
