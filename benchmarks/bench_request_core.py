"""The request core: ``Citelock.stream`` consumed to the end against ``Citelock.answer`` on the same output.

``FakeBackend`` (no model: what is measured is citelock's own work), a high-stakes surface (free checks, the
lexical judge on every citation, the free relevance check), answers of ``--claims`` claims each citing its own
sentence. One run: per size, ``--rounds`` rounds alternate the two paths on the same scripted output; the table
gives the median of each and their ratio side by side (goal: stream at most 1.3x answer), wall-clock and CPU time
of the process (the CPU figure is the one a busy machine disturbs least), and, per request, how often the prompt's
index was built (goal: 1 on every path) and how many claim checks ran (goal: one per claim), counted by wrapping
``PromptIndex.build`` and the guard's per-claim check. ``FakeBackend`` streams one delta per run of word
characters and per other character; the last columns give the deltas and the stream's extra CPU time per delta
(stream minus answer, over the deltas) and the floor: the CPU time of only pulling those deltas from the backend
through a generator that does nothing with them. The ``free text`` rows run the naive baseline's path (no
schema, ``[id]`` markers parsed from prose); ``--cite-tags`` adds rows of the same prose citing with
``<cite id="...">...</cite>`` tags.

Usage::

    python benchmarks/bench_request_core.py                      # 10 and 40 claims, 7 rounds
    python benchmarks/bench_request_core.py --claims 10 --rounds 1
    python benchmarks/bench_request_core.py --no-free-text      # structured answers only
    python benchmarks/bench_request_core.py --cite-tags         # and free text citing with <cite> tags
    python benchmarks/bench_request_core.py --one-delta         # the whole output as one delta: per-claim work only
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

import citelock.guard._fold as fold_module
from citelock import BackendLimits, Citelock, FakeBackend, Guard, SchemaOptions, SurfacePolicy
from citelock.backends import Generation
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


def _free_text(n: int, cite: bool = False) -> str:
    if cite:
        return " ".join(
            f'<cite id="c-{k}">Harbour tunnel section {k} is {100 + k} meters long.</cite>' for k in range(n)
        )
    return " ".join(f"Harbour tunnel section {k} is {100 + k} meters long. [c-{k}]" for k in range(n))


class _WholeOutput(FakeBackend):
    """``FakeBackend`` streaming its whole output as one delta (``--one-delta``): what a stream costs per claim."""

    @staticmethod
    def deltas(text: str) -> list[str]:
        """One delta: the whole output."""
        return [text]


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


def _timed(run: Callable[[], Any]) -> tuple[float, float, Any, int, int]:
    with _Counts() as counts:
        started, cpu = time.perf_counter(), time.process_time()
        out = run()
        elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    return elapsed, used, out, counts.builds, counts.checks


def _floor(output: str, rounds: int, backend: type[FakeBackend] = FakeBackend) -> float:
    """CPU ms to pull the output's deltas from ``FakeBackend.stream`` through a generator that does nothing else."""
    fake = backend([output] * rounds)

    def relay() -> Iterator[Any]:
        for item in fake.stream(None, None, max_tokens=1):  # type: ignore[arg-type]
            yield from ()
            if isinstance(item, Generation):
                break

    used: list[float] = []
    for _ in range(rounds):
        cpu = time.process_time()
        for _ in relay():
            pass
        used.append(time.process_time() - cpu)
    return statistics.median(used) * 1000


def measure(
    n: int, rounds: int, free_text: bool = False, cite: bool = False, one_delta: bool = False
) -> dict[str, Any]:
    """Medians of ``answer`` and ``stream`` (consumed to the end) at ``n`` claims, and the per-request counts.

    ``cite``: the free text cites with ``<cite>`` tags, not ``[id]`` markers. ``one_delta``: each whole output is
    streamed as one delta (the per-claim work alone).
    """
    chunks = _chunks(n)
    free_text = free_text or cite
    output = _free_text(n, cite) if free_text else _output(n)
    backend = _WholeOutput if one_delta else FakeBackend
    fake = backend([output] * (2 * rounds + 2), limits=BackendLimits(policies=()) if free_text else None)
    options = SchemaOptions(max_claims=n, max_citations=1, max_text_chars=80, max_span_chars=80)
    client = Citelock(fake, guard=Guard(SURFACE, LexicalJudge()), options=None if free_text else options)
    client.answer(QUESTION, chunks)  # warm-up: imports, the constraint cache
    list(client.stream(QUESTION, chunks))
    times: dict[str, list[float]] = {"answer": [], "stream": [], "answer_cpu": [], "stream_cpu": []}
    counts: dict[str, tuple[int, int]] = {}
    same = True
    for _ in range(rounds):
        t_answer, c_answer, whole, builds, checks = _timed(lambda: client.answer(QUESTION, chunks, request_id="r"))
        t_stream, c_stream, events, s_builds, s_checks = _timed(
            lambda: list(client.stream(QUESTION, chunks, request_id="r"))
        )
        times["answer"].append(t_answer)
        times["stream"].append(t_stream)
        times["answer_cpu"].append(c_answer)
        times["stream_cpu"].append(c_stream)
        counts = {"answer": (builds, checks), "stream": (s_builds, s_checks)}
        streamed = events[-1].answer
        same = same and streamed.result == whole.result and streamed.decision == whole.decision
    median = {key: statistics.median(values) * 1000 for key, values in times.items()}
    return {
        "claims": n,
        "format": "<cite> text" if cite else "free text" if free_text else "JSON",
        "answer_ms": median["answer"],
        "stream_ms": median["stream"],
        "answer_cpu_ms": median["answer_cpu"],
        "stream_cpu_ms": median["stream_cpu"],
        "deltas": len(backend.deltas(output)),
        "floor_cpu_ms": _floor(output, rounds, backend),
        "counts": counts,
        "same": same,
        "judge_calls": whole.result.accounting.judge_calls,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", default="10,40", help="answer sizes, comma-separated (default: 10,40)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per size (default: 7)")
    parser.add_argument("--no-free-text", action="store_true", help="skip the free-text rows")
    parser.add_argument("--cite-tags", action="store_true", help="add free-text rows citing with <cite> tags")
    parser.add_argument(
        "--one-delta", action="store_true", help="stream each whole output as one delta (the per-claim work alone)"
    )
    args = parser.parse_args(argv)
    title = "stream consumed to the end vs answer (FakeBackend, high stakes, lexical judge; one run)"
    table = Table(title=title + (", each output as one delta" if args.one_delta else ""))
    for column in (
        "answer",
        "claims",
        "answer ms",
        "stream ms",
        "stream / answer",
        "answer CPU ms",
        "stream CPU ms",
        "CPU stream / answer",
        "index builds (answer, stream)",
        "claim checks (answer, stream)",
        "judge calls",
        "same result",
        "deltas",
        "extra CPU µs / delta",
        "floor CPU ms",
    ):
        table.add_column(column, justify="right")
    sizes = [int(x) for x in args.claims.split(",")]
    runs = [(n, False, False) for n in sizes] + ([] if args.no_free_text else [(n, True, False) for n in sizes])
    runs += [(n, True, True) for n in sizes] if args.cite_tags else []
    for n, free_text, cite in runs:
        row = measure(n, args.rounds, free_text, cite, args.one_delta)
        (a_builds, a_checks), (s_builds, s_checks) = row["counts"]["answer"], row["counts"]["stream"]
        extra = (row["stream_cpu_ms"] - row["answer_cpu_ms"]) * 1000 / row["deltas"]
        table.add_row(
            row["format"],
            str(n),
            f"{row['answer_ms']:.2f}",
            f"{row['stream_ms']:.2f}",
            f"{row['stream_ms'] / row['answer_ms']:.2f}x",
            f"{row['answer_cpu_ms']:.2f}",
            f"{row['stream_cpu_ms']:.2f}",
            f"{row['stream_cpu_ms'] / row['answer_cpu_ms']:.2f}x",
            f"{a_builds}, {s_builds}",
            f"{a_checks}, {s_checks}",
            str(row["judge_calls"]),
            "yes" if row["same"] else "NO",
            str(row["deltas"]),
            f"{extra:.1f}",
            f"{row['floor_cpu_ms']:.2f}",
        )
    Console(width=220).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
