"""Guarded streaming against buffering and against unguarded streaming, on the bundled model and a real server.

For each target (the bundled SmolLM2-135M-Instruct in process through ``LocalBackend``, and the same model behind
a local llama-cpp-python server through ``OpenAIBackend``), one question over the first chunks of
``examples/corpus.jsonl``, greedy decoding (so every mode generates the same answer), one run of each mode:

- ``citelock stream``: :meth:`Citelock.stream` with ``show="after_checks"``; the first verified claim is the
  first ``claim.shown`` event (its free checks passed).
- ``buffer-then-guard``: :meth:`Citelock.answer`, what guardrail products do: the whole answer, then the guard;
  a reader sees the first verified claim only when everything is done.
- ``unguarded stream``: the backend's raw ``stream()``; "first claim complete" is the delta at which the first
  claim's JSON object closed (found afterwards by replaying the recorded deltas, so it costs the run nothing).

Columns: time to first token (TTFT), time to the first claim a reader may see as verified (for the unguarded
stream: the moment that claim's last token arrived, unverified), time to the whole answer, and the ratio of the
first verified claim to the unguarded stream's first complete claim (goal: at most 1.1). The second table is the
per-delta verification cost (every ``Session.step`` of the recorded deltas, replayed and timed) beside the mean
time between two tokens of the unguarded stream, and its share of decode time (goal: under 2%).

With ``--judge-server``, the third table runs ``show="after_judge"`` on a high-stakes surface whose judge is the
``llm`` judge on the same server and reports, per claim, how long after its free checks its judge verdict arrived.

Usage::

    python benchmarks/bench_stream.py                 # both targets (starts a server on 127.0.0.1)
    python benchmarks/bench_stream.py --targets local --max-tokens 160
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

from citelock import Citelock, Generation, Guard, SurfacePolicy
from citelock.backends import Backend
from citelock.stream._incremental import JsonReader
from citelock.stream._session import Session

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "When did the Aurora Bridge open, and how long is it?"


def chunks(n: int) -> list[dict[str, Any]]:
    """The first ``n`` chunks of the example corpus."""
    rows = [json.loads(line) for line in (ROOT / "examples" / "corpus.jsonl").read_text().splitlines() if line]
    return rows[:n]


@dataclass
class Run:
    """One mode's timings (seconds from the request)."""

    mode: str
    ttft: float | None
    first_verified: float | None
    whole: float
    deltas: list[tuple[float, str]] = field(default_factory=list)
    tokens: int = 0


def citelock_stream(client: Citelock, chunk_rows: list[dict[str, Any]], max_tokens: int) -> Run:
    """Time :meth:`Citelock.stream` (after_checks)."""
    started = time.perf_counter()
    first_verified = None
    answer = None
    for event in client.stream(QUESTION, chunk_rows, max_tokens=max_tokens, show="after_checks"):
        if event.type == "claim.shown" and first_verified is None:
            first_verified = time.perf_counter() - started
        if event.type == "done":
            answer = event.answer
    whole = time.perf_counter() - started
    assert answer is not None
    return Run(
        "citelock stream",
        answer.generation.first_token_s,
        first_verified,
        whole,
        tokens=answer.generation.completion_tokens or 0,
    )


def buffered(client: Citelock, chunk_rows: list[dict[str, Any]], max_tokens: int) -> Run:
    """Time :meth:`Citelock.answer`: nothing is visible before the whole answer is guarded."""
    started = time.perf_counter()
    answer = client.answer(QUESTION, chunk_rows, max_tokens=max_tokens)
    whole = time.perf_counter() - started
    verified = whole if answer.ok or answer.decision == "repaired" else None
    return Run("buffer-then-guard", whole, verified, whole, tokens=answer.generation.completion_tokens or 0)


def unguarded(client: Citelock, backend: Backend, chunk_rows: list[dict[str, Any]], max_tokens: int) -> Run:
    """Time the backend's raw stream (the prompt prepared as the pipeline prepares it)."""
    prep = client._prepare(QUESTION, chunk_rows, backend, None, max_tokens, None, None)
    started = time.perf_counter()
    deltas: list[tuple[float, str]] = []
    items: Iterator[Any] = iter(backend.stream(prep.record, prep.schema, max_tokens=prep.max_tokens))  # type: ignore[attr-defined]
    for item in items:
        if isinstance(item, Generation):
            break
        deltas.append((time.perf_counter() - started, item))
    whole = time.perf_counter() - started
    reader = JsonReader()
    first_claim = None
    for at, piece in deltas:
        if any(c.done for c in reader.feed(piece)):
            first_claim = at
            break
    run = Run("unguarded stream", deltas[0][0] if deltas else None, first_claim, whole, deltas, len(deltas))
    run.record = prep.record  # type: ignore[attr-defined]
    run.policy = prep.schema.policy if prep.schema is not None else None  # type: ignore[attr-defined]
    return run


def verification_cost(run: Run) -> tuple[float, float, float]:
    """Mean µs per ``Session.step`` over the recorded deltas, mean ms between tokens, and the share of decode time."""
    session = Session(
        record=run.record,  # type: ignore[attr-defined]
        guard=Guard(),
        show="after_checks",
        on_diverge="cut",
        free_text=False,
        span_policy=run.policy,  # type: ignore[attr-defined]
    )
    costs = []
    for _, piece in run.deltas:
        tick = time.perf_counter()
        session.step(piece)
        costs.append(time.perf_counter() - tick)
    session.close()
    times = [at for at, _ in run.deltas]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    gap = statistics.mean(gaps) if gaps else float("nan")
    decode = times[-1] - times[0] if len(times) > 1 else float("nan")
    return statistics.mean(costs) * 1e6, gap * 1000, 100 * sum(costs) / decode


def judge_latency(base_url: str, backend: Backend, chunk_rows: list[dict[str, Any]], max_tokens: int) -> list[float]:
    """Seconds from each claim's free checks to its judge verdict, after_judge with the llm judge on the server."""
    from citelock.judges import make_judge

    surface = SurfacePolicy(name="bench-legal", stakes="high", on_fail="drop_claim")
    client = Citelock(backend, guard=Guard(surface, make_judge("llm", base_url=base_url)))
    checked: dict[int, float] = {}
    added: list[float] = []
    started = time.perf_counter()
    for event in client.stream(QUESTION, chunk_rows, max_tokens=max_tokens, show="after_judge"):
        now = time.perf_counter() - started
        if event.type == "claim.checked" and event.judging:
            checked[event.claim_index] = now
        elif event.type == "claim.judged" and event.claim_index in checked:
            added.append(now - checked[event.claim_index])
    return added


def fmt(value: float | None) -> str:
    """Seconds with two decimals, or a dash."""
    return "—" if value is None else f"{value:.2f}"


def main() -> None:
    """Run the benchmark and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="local,server", help="comma-separated: local, server")
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--judge-server", action="store_true", help="also time after_judge with the llm judge")
    args = parser.parse_args()
    console = Console()
    rows = chunks(args.chunks)
    timing = Table(title="time to first token / first verified claim / whole answer (s), one run each")
    for column in ("target", "mode", "TTFT", "first verified claim", "whole answer", "tokens", "vs unguarded claim"):
        timing.add_column(column, justify="right" if column not in ("target", "mode") else "left")
    cost = Table(title="per-delta verification cost beside decoding")
    for column in ("target", "deltas", "µs per delta", "ms between tokens", "share of decode time"):
        cost.add_column(column, justify="right" if column != "target" else "left")
    judged = Table(title="after_judge on a high-stakes surface, llm judge on the server: added latency per claim")
    for column in ("target", "claims judged", "mean s", "max s"):
        judged.add_column(column, justify="right" if column != "target" else "left")
    server = None
    try:
        for target in args.targets.split(","):
            backend: Backend
            if target == "local":
                from citelock.backends import LocalBackend

                backend = LocalBackend()
            else:
                from citelock.backends import OpenAIBackend
                from citelock.runtime._server import ManagedServer

                server = ManagedServer(n_ctx=4096)
                server.start()
                backend = OpenAIBackend(base_url=server.base_url, server="llama-cpp-python")
            client = Citelock(backend, policy="substring")
            buffered(client, rows, args.max_tokens)  # warm-up: model load, grammar compile, prompt cache
            raw = unguarded(client, backend, rows, args.max_tokens)
            runs = [citelock_stream(client, rows, args.max_tokens), buffered(client, rows, args.max_tokens), raw]
            for run in runs:
                ratio = (
                    f"{run.first_verified / raw.first_verified:.2f}x"
                    if run.first_verified is not None and raw.first_verified
                    else "—"
                )
                shown_ttft = run.ttft if run.mode != "buffer-then-guard" else run.whole
                timing.add_row(
                    target, run.mode, fmt(shown_ttft), fmt(run.first_verified), fmt(run.whole), str(run.tokens), ratio
                )
            micros, gap_ms, share = verification_cost(raw)
            cost.add_row(target, str(len(raw.deltas)), f"{micros:.0f}", f"{gap_ms:.1f}", f"{share:.2f}%")
            if args.judge_server and server is not None and target == "server":
                added = judge_latency(server.base_url, backend, rows, args.max_tokens)
                judged.add_row(
                    target,
                    str(len(added)),
                    fmt(statistics.mean(added) if added else None),
                    fmt(max(added, default=None)),
                )
    finally:
        if server is not None:
            server.stop()
    console.print(timing)
    console.print(cost)
    if args.judge_server:
        console.print(judged)
    console.print(
        "buffer-then-guard shows nothing before the whole answer is guarded: its TTFT and first verified claim are "
        "the whole answer's time. 'vs unguarded claim': first verified claim / the unguarded stream's first "
        "complete claim (unverified)."
    )


if __name__ == "__main__":
    main()
