"""Abstention that happens: the answer the pipeline gives instead of generating when nothing relevant was assembled.

Per surface (a guard with a policy whose ``relevance`` is on and whose ``abstain_below`` is set), when no
assembled chunk is relevant enough to the question (:func:`citelock.guard.should_abstain`), the client does not
call the model: :func:`early_abstention` returns the abstention as a :class:`Generation` (no tokens, the note
:data:`ABSTAIN_NOTE`), which the pipeline parses, guards, renders and persists like any answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from citelock.constraint import BackendLimits, CitationSchema
from citelock.guard._guard import Guard
from citelock.guard._relevance import should_abstain
from citelock.records import Context, Generation, PromptRecord

__all__ = ["ABSTAIN_NOTE", "ABSTENTION_TEXT", "Abstaining", "early_abstention"]

ABSTAIN_NOTE = "abstained before generating: no assembled chunk is relevant enough to the question"
"""The generation note that marks a pre-generation abstention."""

ABSTENTION_TEXT = "The sources do not answer this question."
"""What a pre-generation abstention renders."""


def early_abstention(
    guard: Guard, context: Context, backend: object, admits_nothing: bool = False
) -> Generation | None:
    """The abstention the pipeline returns instead of generating, or None to generate.

    Args:
        guard: The client's guard (only a surface policy abstains by itself).
        context: The assembled context (the question and the chunks as assembled).
        backend: The backend that would have generated (its name and model are recorded).
        admits_nothing: The request's ranked grammar admits no sentence the guard would serve at the surface's
            stakes (:attr:`citelock.guard._ranked.RankedRequest.admits_nothing`): abstaining then is the only
            answer the guard would not refuse.
    """
    policy = guard.policy
    if policy is None or policy.abstain_below is None or policy.relevance == "off":
        return None
    if not admits_nothing and not should_abstain(
        context.question, [c.text for c in context.chunks], policy.abstain_below
    ):
        return None
    name = str(getattr(backend, "name", "unknown"))
    return Generation(
        text='{"claims":[],"abstained":true}',
        backend=name,
        model=str(getattr(backend, "model", "") or name),
        enforced=False,
        prompt_tokens=0,
        completion_tokens=0,
        finish_reason="abstained",
        notes=(ABSTAIN_NOTE,),
    )


@dataclass
class Abstaining:
    """Stands in for the backend of a stream the pipeline abstains on (the stream is the abstention, one step)."""

    name: str
    limits: BackendLimits
    generation: Generation

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Generation:
        """The abstention, whatever was asked."""
        return self.generation
