"""The exception tree.

One root, :class:`CitelockError`. Usage mistakes (bad input, wrong arguments) and runtime failures
(a backend that broke, a store that is corrupt) are separate branches, so callers can tell "fix your call"
from "retry or page someone". Findings about an answer are never exceptions: they are values in a
:class:`~citelock.GuardReport`.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "CitelockError",
    "ConstraintViolationError",
    "InputError",
    "MissingExtraError",
    "ParseError",
    "RuntimeFailure",
    "StoreIntegrityError",
    "UsageError",
]


class CitelockError(Exception):
    """Root of every error citelock raises."""


class UsageError(CitelockError):
    """The caller asked for something citelock cannot do as asked (fix the call, do not retry)."""


class InputError(UsageError, ValueError):
    """Input data is malformed: the message says what was expected, what arrived and where."""


class ParseError(InputError):
    """An answer could not be parsed; ``where`` points at the offending position or field."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{message} (at {where})" if where else message)


class BudgetExceededError(UsageError):
    """The assembled context does not fit the budget and the caller did not allow dropping chunks."""


class MissingExtraError(UsageError, ImportError):
    """An optional dependency is missing; the message names the exact ``pip install`` to run."""

    def __init__(self, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(f'this feature needs the optional dependency {module!r}: pip install "citelock[{extra}]"')


class RuntimeFailure(CitelockError):
    """Something failed at run time (backend, store, model); retrying may or may not help."""


class StoreIntegrityError(RuntimeFailure):
    """A stored record no longer matches its hash, or the store refused an append-only violation."""


class ConstraintViolationError(RuntimeFailure):
    """A backend claimed to constrain decoding but its output broke the constraint."""
