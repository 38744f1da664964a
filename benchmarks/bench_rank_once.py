"""CPU per request of a request's ranking plus its early abstention, for a new question and a repeated one.

The gateway bench's 10 chunks and question. For each span policy, ``rank`` (what ``prepare`` ranks) and then
``should_abstain`` over the chunks in the prompt's order (what the early abstention asks), timed with the process
CPU clock: *new question* clears the ranking's and the abstention's caches before each request (where the code has
them), *repeated request* does not. It runs on older code too (no caches: both columns time the same work), so
the same command in a checkout of the previous commit gives the other row. It also times wrap's locate-and-rank
step (``_placed``, where the code has it) with one record build and with the two-step path.

Usage::

    python benchmarks/bench_rank_once.py --requests 60
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gateway import QUESTION, chunks_of  # noqa: E402

from citelock._request import rank  # noqa: E402
from citelock._wrap import _request as wrap_request  # noqa: E402
from citelock.guard import _near_miss, _relevance  # noqa: E402
from citelock.records import Chunk, Context  # noqa: E402


def _clear() -> None:
    for name, module in (("_scores", _near_miss), ("_should_abstain", _relevance)):
        cached = getattr(module, name, None)
        if cached is not None:
            cached.cache_clear()


def _cpu_ms(step: Callable[[], object], requests: int) -> float:
    step()
    started = time.process_time()
    for _ in range(requests):
        step()
    return (time.process_time() - started) / requests * 1000


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()
    chunks = tuple(Chunk(**c) for c in chunks_of(10))
    question = QUESTION["content"]
    context = Context(question=question, chunks=chunks)
    by_id = {c.id: c for c in chunks}

    def asked(policy: str, cold: bool) -> Callable[[], object]:
        def step() -> object:
            if cold:
                _clear()
            ranked = rank(context, policy, None, None)
            order = [c.id for c in ranked.chunks] if ranked is not None else list(by_id)
            return _relevance.should_abstain(question, [by_id[i].text for i in order], 0.3)

        return step

    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; 2 cores")
    print("| policy | new question CPU ms | repeated request CPU ms |")
    print("|---|---:|---:|")
    for policy in ("substring", "quote"):
        cold, warm = _cpu_ms(asked(policy, True), args.requests), _cpu_ms(asked(policy, False), args.requests)
        print(f"| {policy} | {cold:.2f} | {warm:.2f} |")
    placed = getattr(wrap_request, "_placed", None)
    if placed is not None:
        messages = [QUESTION]

        def locate() -> object:
            return placed(messages, chunks, question, lambda c: rank(c, "substring", None, None))

        once = _cpu_ms(locate, args.requests * 5)
        hold_none = wrap_request._hold_none
        wrap_request._hold_none = lambda _m, _c: False  # the two-step path
        twice = _cpu_ms(locate, args.requests * 5)
        wrap_request._hold_none = hold_none
        print(f"wrap locate-and-rank (scores cached): one record build {once:.2f} ms, two {twice:.2f} ms")
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
