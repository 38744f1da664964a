"""Rendering: an answer's claims with their citation markers as footnotes, links or nothing.

A citation that failed guard ① is never shown as a source; a surface's dropped claims and removed citations are
left out and its marked claims are followed by ``(unverified: REASON)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from citelock.errors import UsageError
from citelock.guard import ClaimOutcome
from citelock.records import Answer, Context, GuardReport

__all__ = ["ABSTENTION_TEXT", "RenderStyle", "render_answer", "require_style"]

RenderStyle = Literal["footnotes", "links", "none"]
"""How citation markers appear in a rendered answer."""

ABSTENTION_TEXT = "The sources provided do not answer this question."
"""How an abstention (:attr:`Answer.abstained`) is rendered."""


def require_style(style: str) -> None:
    """Raise :class:`~citelock.UsageError` unless ``style`` is a :data:`RenderStyle`."""
    if style not in ("footnotes", "links", "none"):
        raise UsageError(f"render style must be 'footnotes', 'links' or 'none', got {style!r}")


def render_answer(
    answer: Answer,
    report: GuardReport,
    context: Context,
    *,
    style: RenderStyle = "footnotes",
    outcomes: Sequence[ClaimOutcome] | None = None,
) -> str:
    """Render an answer's claims with their citation markers.

    ``footnotes`` puts ``[n]`` after each claim and lists the cited passages below; ``links`` puts
    ``[chunk-id](source)`` after each claim (``#chunk-id`` when the chunk has no source); ``none`` prints the
    claims only. A citation that failed guard ① is never shown as a source: it is marked ``unverified`` with
    its reason code. An abstention renders as :data:`ABSTENTION_TEXT` in every style.

    With ``outcomes`` (a surface's :attr:`~citelock.GuardResult.claims`), a claim whose action is
    ``drop`` is left out, and so are the footnotes only it used (the others are numbered without gaps); a claim
    whose action is ``mark`` is followed by ``(unverified: REASON, ...)``; a served claim's
    ``removed_citations`` are left out (with the footnotes only they used).
    """
    require_style(style)
    if answer.abstained:
        return ABSTENTION_TEXT
    verdicts = {(c.claim_index, c.citation_index): c for c in report.citations}
    actions = {o.claim_index: o for o in outcomes or ()}
    sources = {chunk.id: chunk.source for chunk in context.chunks}
    parts: list[str] = []
    notes: list[str] = []
    numbers: dict[tuple[str, str | None], int] = {}
    for ci, claim in enumerate(answer.claims):
        outcome = actions.get(ci)
        if outcome is not None and outcome.action == "drop":
            continue
        markers: list[str] = []
        removed = set(outcome.removed_citations) if outcome is not None else set()
        for xi, cite in enumerate(claim.citations):
            if xi in removed:  # failed, and the claim is served on another citation: not shown at all
                continue
            check_ = verdicts.get((ci, xi))
            failed = check_ is not None and not check_.passed
            reason = check_.reason.value if failed and check_ is not None and check_.reason else ""
            if style == "links":
                if failed:
                    markers.append(f"[{cite.chunk_id}: unverified, {reason}]")
                else:
                    markers.append(f"[{cite.chunk_id}]({sources.get(cite.chunk_id) or '#' + cite.chunk_id})")
            elif style == "footnotes":
                key = (cite.chunk_id, cite.span)
                if key not in numbers:
                    numbers[key] = len(numbers) + 1
                    quote = f": “{cite.span}”" if cite.span else ""
                    where = f" ({sources[cite.chunk_id]})" if sources.get(cite.chunk_id) else ""
                    status = f" [unverified: {reason}]" if failed else ""
                    notes.append(f"[{numbers[key]}] {cite.chunk_id}{where}{quote}{status}")
                markers.append(f"[{numbers[key]}]")
        text = claim.text.strip()
        if markers and style == "links":
            text = f"{text} {' '.join(markers)}"
        elif markers:
            text = text + "".join(markers)
        if outcome is not None and outcome.action == "mark":
            text += f" (unverified: {', '.join(r.value for r in outcome.reasons)})"
        parts.append(text)
    body = " ".join(parts)
    if style == "footnotes" and notes:
        body += "\n\n" + "\n".join(notes)
    return body
