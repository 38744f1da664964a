"""Guarded streaming against buffering and against unguarded streaming, on the bundled model and a real server.

For each target (the bundled SmolLM2-135M-Instruct in process through ``LocalBackend``, and the same model behind
a local llama-cpp-python server through ``OpenAIBackend``), one question over the first chunks of
``examples/corpus.jsonl``, greedy decoding, claims of at most ``--max-text-chars`` characters (short claims make
an answer of several, where streaming shows), one run of each mode:

- ``citelock stream``: :meth:`Citelock.stream` with ``show="after_checks"``. A claim is *verified* when its
  ``claim.checked`` event arrives (its free checks are done, whatever they found).
- ``buffer-then-guard``: :meth:`Citelock.answer`, what guardrail products do: the whole answer, then the guard;
  a reader sees nothing, verified or not, before everything is done.
- ``unguarded stream``: the backend's raw ``stream()``; its "first claim" is the moment the delta that closed the
  first claim's JSON object arrived (found afterwards by replaying the recorded deltas, so it costs nothing).

The first table's last column is measured inside the citelock run itself: the time its first claim was verified
over the time the delta that completed that claim arrived from the backend in that same run (a timing proxy
records every delta's arrival). Goal: at most 1.1x. The second table is the per-delta verification cost (every
``Session.step`` over the unguarded run's deltas, replayed and timed) beside the mean time between tokens, and its
share of decode time (goal: under 2%).

The third table (``--judge-server``) runs ``show="after_judge"`` on a high-stakes surface whose judge is the
``llm`` judge on a *second* llama-cpp-python server (one server cannot take the judge's requests while it streams
the answer: llama-cpp-python interrupts a running request when a new one arrives) and reports, per claim, the
seconds from its free checks to its judge's verdict.

Usage::

    python benchmarks/bench_stream.py                 # both targets (starts a server on 127.0.0.1)
    python benchmarks/bench_stream.py --targets local --max-tokens 160 --judge-server
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from citelock import Citelock, Generation, Guard, SchemaOptions, SurfacePolicy
from citelock._request import Request
from citelock.backends import Backend
from citelock.records import PromptRecord
from citelock.stream._incremental import JsonReader
from citelock.stream._session import Session

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "When did the Aurora Bridge open, and how long is it?"


def chunks(n: int) -> list[dict[str, Any]]:
    """The first ``n`` chunks of the example corpus."""
    rows = [json.loads(line) for line in (ROOT / "examples" / "corpus.jsonl").read_text().splitlines() if line]
    return rows[:n]


class Timed:
    """A backend proxy recording when each streamed delta arrived (seconds since :meth:`reset`)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.limits = inner.limits
        self.model = inner.model
        self.arrivals: list[tuple[float, str]] = []
        self.started = time.perf_counter()

    def reset(self) -> None:
        """Start a new run's clock."""
        self.arrivals = []
        self.started = time.perf_counter()

    def generate(self, record: PromptRecord, schema: Any, *, max_tokens: int) -> Generation:
        """The inner backend's generate."""
        result: Generation = self.inner.generate(record, schema, max_tokens=max_tokens)
        return result

    def stream(self, record: PromptRecord, schema: Any, *, max_tokens: int) -> Iterator[str | Generation]:
        """The inner backend's stream, each delta's arrival recorded."""
        for item in self.inner.stream(record, schema, max_tokens=max_tokens):
            if isinstance(item, str):
                self.arrivals.append((time.perf_counter() - self.started, item))
            yield item


def first_claim_closed(deltas: list[tuple[float, str]]) -> tuple[int, float] | None:
    """The index and arrival time of the delta that completed the first claim."""
    reader = JsonReader()
    for n, (at, piece) in enumerate(deltas):
        if any(c.done for c in reader.feed(piece)):
            return n, at
    return None


@dataclass
class Run:
    """One mode's timings (seconds from the request)."""

    mode: str
    ttft: float | None
    first_verified: float | None
    whole: float
    tokens: int = 0
    in_run_ratio: float | None = None
    deltas: list[tuple[float, str]] = field(default_factory=list)


def citelock_stream(client: Citelock, timed: Timed, rows: list[dict[str, Any]], max_tokens: int) -> Run:
    """Time :meth:`Citelock.stream` (after_checks)."""
    timed.reset()
    first_verified = None
    tokens = 0
    for event in client.stream(QUESTION, rows, max_tokens=max_tokens, show="after_checks"):
        if event.type == "claim.checked" and first_verified is None:
            first_verified = time.perf_counter() - timed.started
        if event.type == "done":
            tokens = event.answer.generation.completion_tokens or 0
    whole = time.perf_counter() - timed.started
    closed = first_claim_closed(timed.arrivals)
    ratio = first_verified / closed[1] if closed is not None and first_verified is not None else None
    ttft = timed.arrivals[0][0] if timed.arrivals else None
    return Run("citelock stream", ttft, first_verified, whole, tokens, ratio)


def buffered(client: Citelock, timed: Timed, rows: list[dict[str, Any]], max_tokens: int) -> Run:
    """Time :meth:`Citelock.answer`: nothing is visible before the whole answer is guarded."""
    timed.reset()
    answer = client.answer(QUESTION, rows, max_tokens=max_tokens)
    whole = time.perf_counter() - timed.started
    return Run("buffer-then-guard", whole, whole, whole, answer.generation.completion_tokens or 0)


def unguarded(client: Citelock, timed: Timed, rows: list[dict[str, Any]], max_tokens: int) -> tuple[Run, Any]:
    """Time the backend's raw stream (the prompt prepared as the pipeline prepares it)."""
    prep = client._prepare(Request(QUESTION, tuple(rows), max_tokens=max_tokens), timed)
    timed.reset()
    for item in timed.stream(prep.record, prep.schema, max_tokens=prep.max_tokens):
        if isinstance(item, Generation):
            break
    whole = time.perf_counter() - timed.started
    deltas = list(timed.arrivals)
    closed = first_claim_closed(deltas)
    ttft = deltas[0][0] if deltas else None
    run = Run("unguarded stream", ttft, closed[1] if closed else None, whole, len(deltas), None, deltas)
    return run, prep


def verification_cost(run: Run, prep: Any) -> tuple[float, float, float]:
    """Mean µs per ``Session.step`` over the recorded deltas, mean ms between tokens, and the share of decode time."""
    session = Session(
        record=prep.record,
        guard=Guard(),
        show="after_checks",
        on_diverge="cut",
        free_text=prep.schema is None,
        span_policy=prep.schema.policy if prep.schema is not None else None,
    )
    costs = []
    for _, piece in run.deltas:
        tick = time.perf_counter()
        session.step(piece)
        costs.append(time.perf_counter() - tick)
    tick = time.perf_counter()
    session.end()
    costs[-1] += time.perf_counter() - tick
    session.close()
    times = [at for at, _ in run.deltas]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    decode = times[-1] - times[0]
    return statistics.mean(costs) * 1e6, statistics.mean(gaps) * 1000, 100 * sum(costs) / decode


def judge_latency(
    judge_url: str, backend: Backend, rows: list[dict[str, Any]], max_tokens: int, options: SchemaOptions
) -> list[float]:
    """Seconds from each judged claim's free checks to its judge verdict (after_judge, llm judge on a server)."""
    from citelock.judges import make_judge

    surface = SurfacePolicy(name="bench-legal", stakes="high", on_fail="drop_claim")
    judge = make_judge("llm", base_url=judge_url)
    client = Citelock(backend, guard=Guard(surface, judge), policy="substring", options=options)
    checked: dict[int, float] = {}
    added: list[float] = []
    started = time.perf_counter()
    for event in client.stream(QUESTION, rows, max_tokens=max_tokens, show="after_judge"):
        now = time.perf_counter() - started
        if event.type == "claim.checked" and event.judging:
            checked[event.claim_index] = now
        elif event.type == "claim.judged" and event.claim_index in checked:
            added.append(now - checked[event.claim_index])
    return added


def fmt(value: float | None) -> str:
    """Seconds with two decimals, or a dash."""
    return "—" if value is None else f"{value:.2f}"


def _tables() -> tuple[Table, Table, Table]:
    timing = Table(title="seconds from the request, one run each")
    for column in (
        "target",
        "mode",
        "TTFT",
        "first claim verified",
        "whole answer",
        "tokens",
        "verified / its last token",
    ):
        timing.add_column(column, justify="left" if column in ("target", "mode") else "right")
    cost = Table(title="per-delta verification cost beside decoding")
    for column in ("target", "deltas", "µs per delta", "ms between tokens", "share of decode time"):
        cost.add_column(column, justify="left" if column == "target" else "right")
    judged = Table(title="after_judge, high stakes, llm judge on a second server: added latency per claim")
    for column in ("target", "claims judged", "mean s", "max s"):
        judged.add_column(column, justify="left" if column == "target" else "right")
    return timing, cost, judged


def main() -> None:
    """Run the benchmark and print the tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--targets", default="local,server", help="comma-separated: local, server")
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--judge-server", action="store_true", help="also time after_judge with the llm judge")
    parser.add_argument(
        "--max-text-chars", type=int, default=60, help="a claim's longest text: short claims make several of them"
    )
    args = parser.parse_args()
    from citelock.runtime._server import ManagedServer

    rows = chunks(args.chunks)
    timing, cost, judged = _tables()
    servers: list[ManagedServer] = []
    judge_url = None
    try:
        if args.judge_server:
            servers.append(ManagedServer(n_ctx=4096))
            servers[-1].start()
            judge_url = servers[-1].base_url
        for target in args.targets.split(","):
            if target == "local":
                from citelock.backends import LocalBackend

                inner: Any = LocalBackend()
            else:
                from citelock.backends import OpenAIBackend

                servers.append(ManagedServer(n_ctx=4096))
                servers[-1].start()
                inner = OpenAIBackend(base_url=servers[-1].base_url, server="llama-cpp-python")
            timed = Timed(inner)
            options = SchemaOptions(max_text_chars=args.max_text_chars, max_span_chars=args.max_text_chars)
            client = Citelock(timed, policy="substring", options=options)  # type: ignore[arg-type]
            buffered(client, timed, rows, args.max_tokens)  # warm-up: model load, grammar compile, prompt cache
            raw, prep = unguarded(client, timed, rows, args.max_tokens)
            for run in (
                citelock_stream(client, timed, rows, args.max_tokens),
                buffered(client, timed, rows, args.max_tokens),
                raw,
            ):
                ratio = f"{run.in_run_ratio:.3f}x" if run.in_run_ratio is not None else "—"
                timing.add_row(
                    target, run.mode, fmt(run.ttft), fmt(run.first_verified), fmt(run.whole), str(run.tokens), ratio
                )
            micros, gap_ms, share = verification_cost(raw, prep)
            cost.add_row(target, str(len(raw.deltas)), f"{micros:.0f}", f"{gap_ms:.1f}", f"{share:.3f}%")
            if judge_url is not None:
                added = judge_latency(judge_url, inner, rows, args.max_tokens, options)
                judged.add_row(
                    target,
                    str(len(added)),
                    fmt(statistics.mean(added) if added else None),
                    fmt(max(added, default=None)),
                )
    finally:
        for server in servers:
            server.stop()
    console = Console(width=120)
    console.print(timing, cost, *([judged] if judge_url is not None else []))
    console.print(
        "buffer-then-guard shows nothing before the whole answer is guarded: its TTFT and first verified claim are "
        "the whole answer's time. For the unguarded stream, 'first claim verified' is when its first claim's last "
        "token arrived, unverified."
    )


if __name__ == "__main__":
    main()
