"""A backend's stream as one sans-IO run and two short loops: what ``stream`` and ``astream`` share.

A backend's stream reads a source of items (SSE chunks, an engine's text pieces), turns each into the output's
next piece of text and, at the end, into the :class:`~citelock.backends.Generation`. That work is the backend's
:class:`StreamRun` and does no I/O; :func:`relay` and :func:`arelay` are the only loops, one for a blocking
source and one for an async one, and differ in ``for`` / ``async for`` and how the source is closed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, closing
from typing import Any, Protocol, TypeVar

__all__ = ["StreamRun", "arelay", "relay"]

_G_co = TypeVar("_G_co", covariant=True)


class StreamRun(Protocol[_G_co]):
    """A stream's state, fed one source item at a time (no I/O)."""

    def take(self, item: Any) -> str:
        """Take one item of the source; return the output's new text it carries ("" when none)."""
        ...

    def generation(self) -> _G_co:
        """The generation of the whole stream, verified (called once the source is exhausted)."""
        ...


def relay(run: StreamRun[_G_co], source: Any) -> Iterator[str | _G_co]:
    """Every non-empty piece of text ``source`` carries, then the generation; the source is closed at the end.

    ``source``: an iterator with ``close()`` (a generator, the SDK's stream) that stops generating when closed.

    Closing this iterator early closes the source (generation stops).
    """
    with closing(source):
        for item in source:
            if piece := run.take(item):
                yield piece
    yield run.generation()


async def arelay(run: StreamRun[_G_co], source: Any) -> AsyncIterator[str | _G_co]:
    """:func:`relay` over an async iterator with ``aclose()`` (closed with this one, or when its task is cancelled)."""
    async with aclosing(source):
        async for item in source:
            if piece := run.take(item):
                yield piece
    yield run.generation()
