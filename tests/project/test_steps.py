"""citelock._steps and citelock._around: the one body the sync/async twins share, run blocking or awaited."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from citelock._around import Around
from citelock._steps import Step, arun_steps, run_steps, step


def _work(seen: list[str]) -> Generator[Step, Any, tuple[int, str]]:
    first = yield step(lambda: threading.current_thread().name)
    seen.append(first)

    async def native() -> int:
        return 41

    second = yield Step(lambda: 40, native)
    try:
        yield step(int, "not a number")
    except ValueError as exc:  # a step's error is raised where it was yielded
        seen.append(type(exc).__name__)
    return second + 1, first


def test_blocking_runner_runs_each_step_in_place_and_raises_errors_where_yielded() -> None:
    seen: list[str] = []
    result = run_steps(_work(seen))
    assert result == (41, threading.current_thread().name)
    assert seen == [threading.current_thread().name, "ValueError"]


def test_async_runner_awaits_native_steps_and_runs_the_others_in_a_thread() -> None:
    seen: list[str] = []
    value, where = asyncio.run(arun_steps(_work(seen)))
    assert value == 42  # the native coroutine (41) was awaited, not the blocking call (40)
    assert where != threading.current_thread().name  # the blocking step ran in a worker thread
    assert seen[1] == "ValueError"


def test_an_error_nobody_catches_leaves_the_runner() -> None:
    def failing() -> Generator[Step, Any, None]:
        yield step(int, "x")

    with pytest.raises(ValueError):
        run_steps(failing())
    with pytest.raises(ValueError):
        asyncio.run(arun_steps(failing()))


def test_around_wraps_every_read_and_the_close_blocking_and_async() -> None:
    entered: list[str] = []

    @contextmanager
    def around() -> Iterator[None]:
        entered.append("in")
        yield

    def items() -> Iterator[int]:
        yield from (1, 2)

    reader: Around[int] = Around(items(), around)
    assert list(reader) == [1, 2]
    reader.close()
    assert entered == ["in"] * 4  # two items, the end of the iteration, the close

    async def aitems() -> Any:
        for n in (3, 4):
            yield n

    async def consume() -> list[int]:
        areader: Around[int] = Around(aitems(), around)
        got = [n async for n in areader]
        await areader.aclose()
        return got

    entered.clear()
    assert asyncio.run(consume()) == [3, 4]
    assert entered == ["in"] * 4
