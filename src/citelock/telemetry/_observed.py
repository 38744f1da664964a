"""The fields telemetry reads of a guard's result: small protocols, so telemetry imports nothing of the guard.

A :class:`citelock.GuardResult` satisfies :class:`GuardOutcome` (the guard sits above telemetry and hands its
results down to it); telemetry never builds, runs or edits one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from citelock.records import GuardReport

__all__ = ["Accounting", "GuardOutcome", "SupportOutcome"]


class SupportOutcome(Protocol):
    """One citation's support check, as far as its evaluation event reads it."""

    @property
    def claim_index(self) -> int: ...
    @property
    def citation_index(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def route(self) -> str | None: ...
    @property
    def score(self) -> float | None: ...
    @property
    def judge(self) -> str | None: ...
    @property
    def version(self) -> str | None: ...


class Accounting(Protocol):
    """The judge's accounting, as far as the guard span reads it."""

    @property
    def citations(self) -> int: ...
    @property
    def judge_calls(self) -> int: ...
    @property
    def diagnosis_calls(self) -> int: ...
    @property
    def escalations(self) -> int: ...


class GuardOutcome(Protocol):
    """A guard run's result, as far as telemetry reads it (:class:`citelock.GuardResult` is one)."""

    @property
    def decision(self) -> str: ...
    @property
    def surface(self) -> str | None: ...
    @property
    def report(self) -> GuardReport: ...
    @property
    def support(self) -> Sequence[SupportOutcome]: ...
    @property
    def accounting(self) -> Accounting: ...
