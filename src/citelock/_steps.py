"""A request's steps written once, as a generator, and run either blocking or awaited.

A public call that exists twice (``answer`` / ``aanswer``, a wrapped ``create`` on a sync and an async client)
writes its work once, as a generator that yields a :class:`Step` wherever it needs I/O or a blocking call and
receives the step's result (or has its error raised where it yielded, so the ``with`` blocks around it see it).
:func:`run_steps` runs every step where it is; :func:`arun_steps` awaits a step's ``native`` coroutine when it
has one and runs the others in a worker thread, so the event loop is never blocked. The two runners are the
only code that differs between the twins.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar

__all__ = ["Step", "Steps", "arun_steps", "run_steps", "step"]

_R = TypeVar("_R")


@dataclass(frozen=True)
class Step:
    """One blocking call of a request; ``native``: the coroutine an async caller awaits instead (None: a thread)."""

    call: Callable[[], Any]
    native: Callable[[], Awaitable[Any]] | None = None

    async def acall(self) -> Any:
        """The step without blocking the event loop."""
        if self.native is not None:
            return await self.native()
        return await asyncio.to_thread(self.call)


def step(call: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Step:
    """``call(*args, **kwargs)`` as a step (blocking; an async caller runs it in a worker thread)."""
    return Step(functools.partial(call, *args, **kwargs))


class Steps(Generic[_R]):
    """A generator of steps, advanced one step at a time with the previous step's outcome (no I/O here)."""

    def __init__(self, steps: Generator[Step, Any, _R]) -> None:
        self._steps = steps
        self._value: Any = None
        self._error: BaseException | None = None
        self.result: _R

    def __iter__(self) -> Steps[_R]:
        return self

    def __next__(self) -> Step:
        value, error = self._value, self._error
        self._value, self._error = None, None
        try:
            return self._steps.throw(error) if error is not None else self._steps.send(value)
        except StopIteration as done:
            self.result = done.value
            raise StopIteration from None

    def __enter__(self) -> Steps[_R]:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        """The step just run failed: its error is raised where it was yielded (not here)."""
        self._error = exc
        return exc is not None

    def settle(self, value: Any) -> None:
        """The value of the step just run (sent where it was yielded)."""
        self._value = value


def run_steps(steps: Generator[Step, Any, _R]) -> _R:
    """Run every step of ``steps`` where it is (blocking); return the generator's result."""
    run = Steps(steps)
    for current in run:
        with run:
            run.settle(current.call())
    return run.result


async def arun_steps(steps: Generator[Step, Any, _R]) -> _R:
    """Run the steps without blocking the event loop (``native`` awaited, the others in a worker thread)."""
    run = Steps(steps)
    for current in run:
        with run:
            run.settle(await current.acall())
    return run.result
