"""The judge protocol: ``judge(claim, passage) -> Verdict``, and nothing else goes in.

A judge sees the claim and the one cited passage, never the question, the other chunks or the answer's
reasoning; that isolation is what makes a verdict about *this* citation. ``partial`` fails.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from citelock.records import Verdict

__all__ = ["Judge"]


@runtime_checkable
class Judge(Protocol):
    """A support judge.

    Attributes:
        name: Stable identifier (part of the verdict cache key).
        version: Bumped whenever verdicts may change (prompt, parameters, model).
    """

    name: str
    version: str

    def judge(self, claim: str, passage: str) -> Verdict:
        """Does ``passage`` alone entail ``claim``? Returns yes, partial or no."""
        ...
