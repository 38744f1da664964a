"""The wrapped client's ``stream=True`` call: the caller's own request over SSE, as citelock's stream events.

:class:`CallersStream` is the backend a :class:`~citelock.stream._drive.StreamJob` pulls deltas from: it sends the
arguments :func:`~citelock._wrap._request.prepare` built (the caller's messages and keywords, the injected
constraint) with ``stream=True``, through :meth:`~citelock.backends.OpenAIBackend.stream` / ``astream``, so the
deltas, the verification after the fact and the errors are those of any OpenAI-compatible stream. The events
and the finishing step are :meth:`citelock.Citelock.stream`'s own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from citelock._wrap._request import Prepared
from citelock.backends._openai import OpenAIBackend, OpenAIGeneration
from citelock.constraint._limits import BackendLimits
from citelock.constraint._schema import CitationSchema
from citelock.errors import UsageError
from citelock.records import PromptRecord

__all__ = ["CallersStream"]


class CallersStream:
    """One wrapped call's request, streamed (a backend for exactly this prepared request)."""

    def __init__(self, backend: OpenAIBackend, prepared: Prepared) -> None:
        self.backend = backend
        self.prepared = prepared
        self.name = backend.name
        self.limits: BackendLimits = backend.limits

    @property
    def model(self) -> str:
        """The model the call names."""
        return str(self.prepared.arguments["model"])

    @property
    def transport(self) -> Any:
        """The wrapped client's transport (its ``is_async`` picks ``stream`` or ``astream``)."""
        return self.backend.transport

    def _request(self, record: PromptRecord) -> tuple[dict[str, Any], dict[str, Any] | None, tuple[str, ...]]:
        if record.request_id != self.prepared.record.request_id:
            raise UsageError("a wrapped stream sends only the request it was prepared for")
        return self.prepared.arguments, self.prepared.sent, self.prepared.removed

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> OpenAIGeneration:
        """Not used: a wrapped ``stream=True`` call always streams."""
        raise UsageError("a wrapped stream=True call streams; call create() without stream= for one response")

    def stream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> Iterator[str | OpenAIGeneration]:
        """The caller's request over SSE: its content deltas, then the verified generation."""
        return self.backend.stream(record, schema, max_tokens=max_tokens, request=self._request(record))

    def astream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> AsyncIterator[str | OpenAIGeneration]:
        """:meth:`stream` on an ``AsyncOpenAI`` client."""
        return self.backend.astream(record, schema, max_tokens=max_tokens, request=self._request(record))
