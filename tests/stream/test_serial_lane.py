"""The stream's judge lane: calls run one at a time in submission order on the shared pool; close cancels the rest."""

from __future__ import annotations

import threading

import pytest

from citelock.stream._serial import SerialLane


def test_calls_run_one_at_a_time_in_the_order_submitted() -> None:
    lane = SerialLane()
    seen: list[int] = []
    running = 0
    overlap = False
    guard = threading.Lock()

    def call(n: int) -> int:
        nonlocal running, overlap
        with guard:
            running += 1
            overlap = overlap or running > 1
        seen.append(n)
        with guard:
            running -= 1
        return n * n

    futures = [lane.submit(lambda n=n: call(n)) for n in range(50)]
    assert [f.result(timeout=10) for f in futures] == [n * n for n in range(50)]
    assert seen == list(range(50)) and not overlap


def test_an_exception_reaches_the_caller_and_the_lane_goes_on() -> None:
    lane = SerialLane()

    def boom() -> int:
        raise ValueError("judge failed")

    failed = lane.submit(boom)
    after = lane.submit(lambda: 7)
    with pytest.raises(ValueError, match="judge failed"):
        failed.result(timeout=10)
    assert after.result(timeout=10) == 7


def test_close_cancels_the_calls_not_started() -> None:
    lane = SerialLane()
    release = threading.Event()
    started = threading.Event()

    def blocking() -> str:
        started.set()
        release.wait(10)
        return "ran"

    first = lane.submit(blocking)
    assert started.wait(10)
    queued = [lane.submit(lambda: "never") for _ in range(3)]
    lane.close()
    release.set()
    assert first.result(timeout=10) == "ran"  # the call running finishes
    assert all(f.cancelled() for f in queued)
    assert lane.submit(lambda: "late").cancelled()  # nothing runs once the lane is closed
