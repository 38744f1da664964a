"""A scripted backend for unit tests (yours and ours): returns the outputs you give it, in order.

It imports nothing and loads no model, so a test of code built around :func:`citelock.answer` runs in
milliseconds. It records every call (the prompt record, the schema and ``max_tokens``) so a test can assert what
would have been sent. Given no script at all, it answers every request by citing each chunk's first sentence
under the request's schema (:func:`first_sentences`), like pydantic-ai's ``TestModel``. Its async methods are
native (no worker thread): :meth:`FakeBackend.agenerate` and :meth:`FakeBackend.astream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from citelock.backends._first_sentences import first_sentences
from citelock.backends._protocol import Generation
from citelock.constraint import BackendLimits, CitationSchema
from citelock.errors import RuntimeFailure, UsageError
from citelock.records import PromptRecord

__all__ = ["FakeBackend", "FakeCall"]

_PIECE = re.compile(r"\w+|\W", re.UNICODE)

Script = Callable[[PromptRecord, CitationSchema | None], str | Mapping[str, Any]]


@dataclass(frozen=True)
class FakeCall:
    """One call the fake received."""

    record: PromptRecord
    schema: CitationSchema | None
    max_tokens: int


class FakeBackend:
    """A backend that returns scripted outputs.

    Args:
        outputs: The outputs to return, in order (strings, or mappings dumped as compact JSON), or a function
            ``(record, schema) -> output`` called for every request. None (the default, zero-config): every
            request is answered by :func:`first_sentences`, one claim per chunk citing the chunk's first sentence
            that the request's schema allows (prose with ``[id]`` markers when no schema is sent).
        limits: The limits to advertise. The default advertises every span policy; pass
            ``BackendLimits(policies=())`` to behave like the naive free-text baseline (no schema is sent and
            the output is parsed as prose with ``[id]`` markers).
        enforced: Whether to claim the constraint was enforced during decoding. Defaults to True when the
            limits allow a policy, so :func:`citelock.answer` verifies the output against the schema and a
            scripted output that breaks it raises :class:`citelock.ConstraintViolationError`, exactly as a real
            constrained backend whose constraint failed would.
        name: Backend name reported on the answer.
        model: Model name reported on the answer.

    Attributes:
        calls: Every call received (record, schema, ``max_tokens``).
        streamed: Deltas handed out by :meth:`stream` so far (where a streaming consumer stopped).

    Example:
        >>> fake = FakeBackend(['{"claims":[{"text":"It opened in 1932.",'
        ...                     '"citations":[{"chunk_id":"c-1","span":"opened in 1932"}]}]}'])
        >>> any_request = FakeBackend()  # cites each chunk's first sentence, under whatever schema is sent
    """

    def __init__(
        self,
        outputs: Iterable[str | Mapping[str, Any]] | Script | None = None,
        *,
        limits: BackendLimits | None = None,
        enforced: bool | None = None,
        name: str = "fake",
        model: str = "scripted",
    ) -> None:
        self.name = name
        self.model = model
        self.limits = limits or BackendLimits()
        self.enforced = self.limits.constrains if enforced is None else enforced
        self.calls: list[FakeCall] = []
        if outputs is None:
            outputs = first_sentences
        elif isinstance(outputs, str | bytes | Mapping):
            raise UsageError(
                "FakeBackend outputs: expected an iterable of outputs or a function (record, schema) -> output, "
                f"got one {type(outputs).__name__}; wrap a single output in a list"
            )
        self._script: Script | None = outputs if callable(outputs) else None
        self._queue: list[str | Mapping[str, Any]] = [] if callable(outputs) else list(outputs)
        self._lock = threading.Lock()
        self.streamed = 0

    @property
    def remaining(self) -> int:
        """Scripted outputs not yet returned (0 for a function script and for the zero-config mode)."""
        return len(self._queue)

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Generation:
        """Return the next scripted output.

        Raises:
            RuntimeFailure: the script is exhausted.
            UsageError: ``max_tokens`` is not positive.
        """
        started = time.perf_counter()
        text = self._next(record, schema, max_tokens)
        return self._generation(text, schema, time.perf_counter() - started)

    @staticmethod
    def deltas(text: str) -> list[str]:
        """How :meth:`stream` splits an output into deltas: each run of word characters, and every other character."""
        return _PIECE.findall(text)

    def stream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> Iterator[str | Generation]:
        """The next scripted output as deltas (see :meth:`deltas`), then its :class:`Generation`.

        :attr:`streamed` counts the deltas handed out, so a test can assert where a consumer stopped.

        Raises:
            RuntimeFailure: the script is exhausted.
            UsageError: ``max_tokens`` is not positive.
        """
        return self._deltas(record, schema, max_tokens)

    def _deltas(
        self, record: PromptRecord, schema: CitationSchema | None, max_tokens: int
    ) -> Generator[str | Generation, None, None]:
        started = time.perf_counter()
        text = self._next(record, schema, max_tokens)
        for piece in self.deltas(text):
            self.streamed += 1
            yield piece
        yield self._generation(text, schema, time.perf_counter() - started)

    async def agenerate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Generation:
        """:meth:`generate` on the event loop itself (no worker thread): the same output and accounting.

        Raises:
            RuntimeFailure: the script is exhausted.
            UsageError: ``max_tokens`` is not positive.
        """
        return self.generate(record, schema, max_tokens=max_tokens)

    async def astream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> AsyncIterator[str | Generation]:
        """:meth:`stream` on the event loop itself (no worker thread): the same deltas, then the :class:`Generation`.

        The loop gets a turn between deltas, as with a real network stream, so a consumer's task can be cancelled
        mid-answer; closing the iterator (``aclose()``) stops it where it is (:attr:`streamed` tells where).

        Raises:
            RuntimeFailure: the script is exhausted.
            UsageError: ``max_tokens`` is not positive.
        """
        with contextlib.closing(self._deltas(record, schema, max_tokens)) as items:
            for item in items:
                yield item
                await asyncio.sleep(0)

    def _next(self, record: PromptRecord, schema: CitationSchema | None, max_tokens: int) -> str:
        if max_tokens < 1:
            raise UsageError(f"max_tokens must be positive, got {max_tokens}")
        with self._lock:
            self.calls.append(FakeCall(record, schema, max_tokens))
            if self._script is not None:
                output = self._script(record, schema)
            elif self._queue:
                output = self._queue.pop(0)
            else:
                raise RuntimeFailure(
                    f"FakeBackend script exhausted after {len(self.calls) - 1} outputs; give it more outputs"
                )
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, separators=(",", ":"))

    def _generation(self, text: str, schema: CitationSchema | None, latency_s: float) -> Generation:
        return Generation(
            text=text,
            backend=self.name,
            model=self.model,
            enforced=self.enforced and schema is not None,
            completion_tokens=len(text.split()),
            latency_s=latency_s,
            finish_reason="stop",
        )
