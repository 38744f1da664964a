"""The backend protocol: everything that generates an answer fits behind it.

A backend takes the logged prompt (the messages exactly as sent) and, when it can constrain, the per-request
citation schema, and returns the raw output with accounting. It never parses or guards: that is done the
same way for every backend, after the fact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from citelock.records import Generation, PromptRecord

if TYPE_CHECKING:
    from citelock.constraint import BackendLimits, CitationSchema

__all__ = ["AsyncBackend", "Backend", "Generation"]


@runtime_checkable
class Backend(Protocol):
    """A generator of answers.

    Attributes:
        name: Backend name.
        limits: What this backend's constraint engine accepts (enum counts, sizes, span policies).
    """

    name: str
    limits: BackendLimits

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Generation:
        """Generate for ``record`` (messages exactly as logged), constrained by ``schema`` when given.

        The contract, for implementers:

        - ``schema`` is None exactly when ``limits.policies`` is empty (a free-text backend); otherwise it has
          already been fitted to ``limits`` (see :func:`citelock.fit_schema`) and the backend sends
          ``schema.grammar`` (grammar engines) or ``schema.json_schema`` (JSON Schema engines) as it is.
        - Set ``Generation.enforced`` only when decoding was actually constrained; the caller then verifies the
          output with :meth:`CitationSchema.parse_output` and a broken constraint is a loud
          :class:`citelock.ConstraintViolationError`.
        - Report ``finish_reason="length"`` when ``max_tokens`` cut the output.
        - Import SDKs inside methods; raise :class:`citelock.MissingExtraError` when an extra is missing.
        """
        ...


@runtime_checkable
class AsyncBackend(Backend, Protocol):
    """A backend that can also generate without blocking the event loop (used by :func:`citelock.aanswer`).

    Backends without ``agenerate`` still work with ``aanswer``: their ``generate`` runs in a worker thread.
    """

    async def agenerate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Generation:
        """Async :meth:`Backend.generate`."""
        ...
