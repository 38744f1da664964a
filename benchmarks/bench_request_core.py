"""The request core: ``Citelock.stream`` consumed to the end against ``Citelock.answer`` on the same output.

``FakeBackend`` (no model: what is measured is citelock's own work), a high-stakes surface (free checks, the
lexical judge on every citation, the free relevance check), answers of ``--claims`` claims each citing its own
sentence. One run: per size, ``--rounds`` rounds alternate the two paths on the same scripted output; the table
gives the median of each and their ratio side by side (goal: stream at most 1.3x answer), and, per request, how
often the prompt's index was built (goal: 1 on every path) and how many claim checks ran (goal: one per claim),
counted by wrapping ``PromptIndex.build`` and the guard's per-claim check.

Usage::

    python benchmarks/bench_request_core.py                      # 10 and 40 claims, 7 rounds
    python benchmarks/bench_request_core.py --claims 10 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

import citelock.guard._fold as fold_module
from citelock import Citelock, FakeBackend, Guard, SchemaOptions, SurfacePolicy
from citelock.judges import LexicalJudge
from citelock.prompt import PromptIndex

QUESTION = "How long are the harbour tunnel sections and when did they open?"
SURFACE = SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")


def _chunks(n: int) -> list[dict[str, str]]:
    return [
        {"id": f"c-{k}", "text": f"Harbour tunnel section {k} is {100 + k} meters long. It opened in {1900 + k}."}
        for k in range(n)
    ]


def _output(n: int) -> str:
    claims = [
        {
            "text": f"Harbour tunnel section {k} is {100 + k} meters long.",
            "citations": [{"chunk_id": f"c-{k}", "span": f"Harbour tunnel section {k} is {100 + k} meters long."}],
        }
        for k in range(n)
    ]
    return json.dumps({"claims": claims}, separators=(",", ":"))


class _Counts:
    """Counts index builds and per-claim checks while installed."""

    def __init__(self) -> None:
        self.builds = self.checks = 0
        self._build = PromptIndex.build
        self._check = fold_module.check_claim

    def __enter__(self) -> _Counts:
        build, check = self._build, self._check

        def counted_build(record: Any) -> PromptIndex:
            self.builds += 1
            return build(record)

        def counted_check(*args: Any, **kwargs: Any) -> Any:
            self.checks += 1
            return check(*args, **kwargs)

        PromptIndex.build = staticmethod(counted_build)  # type: ignore[method-assign,assignment]
        fold_module.check_claim = counted_check  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        PromptIndex.build = self._build  # type: ignore[method-assign]
        fold_module.check_claim = self._check


def _timed(run: Callable[[], Any]) -> tuple[float, Any, int, int]:
    with _Counts() as counts:
        started = time.perf_counter()
        out = run()
        elapsed = time.perf_counter() - started
    return elapsed, out, counts.builds, counts.checks


def measure(n: int, rounds: int) -> dict[str, Any]:
    """Medians of ``answer`` and ``stream`` (consumed to the end) at ``n`` claims, and the per-request counts."""
    chunks, output = _chunks(n), _output(n)
    client = Citelock(
        FakeBackend([output] * (2 * rounds + 2)),
        guard=Guard(SURFACE, LexicalJudge()),
        options=SchemaOptions(max_claims=n, max_citations=1, max_text_chars=80, max_span_chars=80),
    )
    client.answer(QUESTION, chunks)  # warm-up: imports, the constraint cache
    list(client.stream(QUESTION, chunks))
    answer_s: list[float] = []
    stream_s: list[float] = []
    counts: dict[str, tuple[int, int]] = {}
    same = True
    for _ in range(rounds):
        t_answer, whole, builds, checks = _timed(lambda: client.answer(QUESTION, chunks, request_id="r"))
        t_stream, events, s_builds, s_checks = _timed(lambda: list(client.stream(QUESTION, chunks, request_id="r")))
        answer_s.append(t_answer)
        stream_s.append(t_stream)
        counts = {"answer": (builds, checks), "stream": (s_builds, s_checks)}
        streamed = events[-1].answer
        same = same and streamed.result == whole.result and streamed.decision == whole.decision
    return {
        "claims": n,
        "answer_ms": statistics.median(answer_s) * 1000,
        "stream_ms": statistics.median(stream_s) * 1000,
        "counts": counts,
        "same": same,
        "judge_calls": whole.result.accounting.judge_calls,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", default="10,40", help="answer sizes, comma-separated (default: 10,40)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per size (default: 7)")
    args = parser.parse_args(argv)
    table = Table(title="stream consumed to the end vs answer (FakeBackend, high stakes, lexical judge; one run)")
    for column in (
        "claims",
        "answer ms",
        "stream ms",
        "stream / answer",
        "index builds (answer, stream)",
        "claim checks (answer, stream)",
        "judge calls",
        "same result",
    ):
        table.add_column(column, justify="right")
    for n in (int(x) for x in args.claims.split(",")):
        row = measure(n, args.rounds)
        (a_builds, a_checks), (s_builds, s_checks) = row["counts"]["answer"], row["counts"]["stream"]
        table.add_row(
            str(n),
            f"{row['answer_ms']:.2f}",
            f"{row['stream_ms']:.2f}",
            f"{row['stream_ms'] / row['answer_ms']:.2f}x",
            f"{a_builds}, {s_builds}",
            f"{a_checks}, {s_checks}",
            str(row["judge_calls"]),
            "yes" if row["same"] else "NO",
        )
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
