"""The backend protocol: everything that generates an answer fits behind it.

A backend takes the logged prompt (the messages exactly as sent) and, when it can constrain, the per-request
citation schema, and returns the raw output with accounting. It never parses or guards: that is done the
same way for every backend, after the fact.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from citelock.records import Generation, PromptRecord

if TYPE_CHECKING:
    from citelock.constraint import BackendLimits, CitationSchema

__all__ = ["AsyncBackend", "AsyncStreamingBackend", "Backend", "Generation", "StreamingBackend", "stream_in_thread"]


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
          already been fitted to ``limits`` (see :func:`citelock.constraint.fit_schema`) and the backend sends
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


@runtime_checkable
class StreamingBackend(Backend, Protocol):
    """A backend that can hand over its output as it is generated (used by :meth:`citelock.Citelock.stream`).

    Backends without ``stream`` still stream: their whole output arrives as one step.
    """

    def stream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> Iterator[str | Generation]:
        """Yield the output's text deltas as they are generated, then, last, the :class:`Generation`.

        The contract, for implementers: every ``str`` item is the next piece of the output (their concatenation
        is ``Generation.text``); the last item is the same :class:`Generation` :meth:`Backend.generate` would
        return for this output. Closing the iterator early (``close()``) must stop generating.
        """
        ...


@runtime_checkable
class AsyncStreamingBackend(Backend, Protocol):
    """A backend that streams without blocking the event loop (used by :meth:`citelock.Citelock.astream`)."""

    def astream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> AsyncIterator[str | Generation]:
        """Async :meth:`StreamingBackend.stream` (same items; ``aclose()`` stops generating)."""
        ...


_T = TypeVar("_T")


async def stream_in_thread(open_stream: Callable[[], Iterator[_T]], *, ahead: int = 1) -> AsyncIterator[_T]:
    """Iterate a blocking iterator in a worker thread, without blocking the event loop.

    The thread runs at most ``ahead`` items ahead of the consumer (a consumer that stops reading stops the
    generation with it). Closing the async iterator (``aclose()``, a cancelled task) tells the thread to stop;
    it then closes the blocking iterator, which stops generating.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue()
    demand = threading.Semaphore(ahead)
    stop = threading.Event()
    end = object()

    def put(item: tuple[bool, Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening any more
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        items: Iterator[_T] | None = None
        try:
            items = open_stream()
            while True:
                demand.acquire()
                if stop.is_set():
                    break
                try:
                    item = next(items)
                except StopIteration:
                    break
                put((True, item))
        except BaseException as exc:  # handed to the consumer, raised there
            put((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            put((False, end))

    worker = threading.Thread(target=pump, name="citelock-stream", daemon=True)
    worker.start()
    try:
        while True:
            demand.release()
            ok, item = await queue.get()
            if ok:
                yield item
            elif item is end:
                break
            else:
                raise item
    finally:
        stop.set()
        demand.release()
