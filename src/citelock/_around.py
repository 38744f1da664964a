"""An iterator read one step at a time inside a context manager, blocking or async: one class for both.

A stream's reader sometimes needs every read wrapped (the trace's context current while the stream's driver
runs; a read error turned into the stream's cut) and the source closed when it stops. :class:`Around` is that
wrapper for a blocking iterator and for an async one; the only difference is ``next`` / ``anext``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Generic, TypeVar

__all__ = ["Around"]

_T = TypeVar("_T")


class Around(Generic[_T]):
    """``inner``'s items, each read inside ``around()``.

    Closing it closes ``inner`` (``close()``, or ``aclose()`` / an async ``close()`` for an async one), inside
    ``around()`` too when ``close_inside``.
    """

    def __init__(
        self, inner: Any, around: Callable[[], AbstractContextManager[Any]], *, close_inside: bool = True
    ) -> None:
        self._inner = inner
        self._around = around
        self._close_inside = close_inside

    def __iter__(self) -> Around[_T]:
        return self

    def __aiter__(self) -> Around[_T]:
        return self

    def __next__(self) -> _T:
        with self._around():
            item: _T = next(self._inner)
        return item

    async def __anext__(self) -> _T:
        with self._around():
            item: _T = await anext(self._inner)
        return item

    def close(self) -> None:
        """Close the blocking source (it stops generating)."""
        with self._closing():
            close = getattr(self._inner, "close", None)
            if close is not None:
                close()

    async def aclose(self) -> None:
        """Close the async source: its ``aclose()``, else its (async) ``close()``."""
        with self._closing():
            close = getattr(self._inner, "aclose", None) or getattr(self._inner, "close", None)
            if close is not None:
                await close()

    def _closing(self) -> AbstractContextManager[Any]:
        return self._around() if self._close_inside else nullcontext()
