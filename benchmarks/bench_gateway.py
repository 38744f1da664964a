"""The gateway's added latency and throughput beside a direct call to the same fake upstream.

A fake OpenAI-compatible upstream (a real HTTP server on 127.0.0.1, a fixed ``--latency-ms`` per reply, an answer
citing one of the 10 chunks verbatim) is called two ways, in the same run, with the same messages:

- ``direct``: ``POST /v1/chat/completions`` straight to the upstream (what a team's service does today);
- ``gateway``: the same body plus ``citelock: {chunks}`` to ``citelock gateway --workers N`` (a real process)
  in front of it, free checks only (a low-stakes surface judging nothing): the constraint is built and sent, the
  prompt is logged to SQLite before the upstream call, the answer is verified, guarded, stored (result) and
  rendered.

At concurrency 1 and 32 (``--concurrency``), ``--requests`` each, direct and gateway rounds alternating
(``--rounds``) so both see the same machine load. Added latency = gateway minus direct, p50 and p95 in
milliseconds (of the pooled rounds), and requests per second for 1 and 2 workers (``--workers``). The load
generator runs in this process on the same cores as the gateway and the upstream (which has a process of its
own). On a machine other jobs load, latency is whatever CPU share the gateway gets, so the table also prints the
gateway's own CPU time per request (its processes' user + system time over the gateway rounds, from ``/proc``;
it does not depend on the share) and the load average before and after the run. A second table
(``--breakdown``) times the steps of one request in place.

Usage::

    python benchmarks/bench_gateway.py
    python benchmarks/bench_gateway.py --requests 400 --rounds 3 --latency-ms 20 --workers 1 2 --concurrency 1 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the fake upstream and the gateway process the gateway tests use

from support.fake_upstream import upstream_process  # noqa: E402
from support.gateway_server import gateway_process  # noqa: E402

MODEL = "bench"
QUESTION = {"role": "user", "content": "When did the Aurora Bridge open to traffic?"}


def chunks_of(count: int) -> list[dict[str, str]]:
    """``count`` chunks from the example corpus (cycled, each with its own id)."""
    lines = (ROOT / "examples" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    return [{"id": f"doc-{k}", "text": f"{texts[k % len(texts)]} (ref {k})."} for k in range(count)]


def _reply(chunks: list[dict[str, str]]) -> str:
    first = chunks[0]
    span = first["text"].split(". ")[0] + "."
    return json.dumps({"claims": [{"text": span, "citations": [{"chunk_id": first["id"], "span": span}]}]})


@contextmanager
def gateway(upstream_url: str, workers: int, db: Path, pids: list[int], server: str = "llama.cpp") -> Iterator[str]:
    """``citelock gateway --workers N`` in front of the upstream, free checks only, until ``/readyz`` is 200."""
    args = ["--workers", str(workers), "--db", str(db), "--upstream", upstream_url, "--server", server]
    args += ["--surface", "bench", "--stakes", "low", "--sample-rate", "0"]
    with gateway_process(*args, ready_s=120, pids=pids) as url:
        yield url


def cpu_seconds(root: int) -> float | None:
    """User + system CPU seconds of process ``root`` and its descendants so far (Linux ``/proc``; else None)."""
    proc = Path("/proc")
    if not (proc / str(root) / "stat").exists():
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += used.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


async def _round(url: str, body: dict[str, Any], requests: int, concurrency: int) -> tuple[list[float], float, int]:
    """``requests`` POSTs at ``concurrency``: the latencies (ms) of those answered 200, the wall time (s) and how
    many failed (a connection error or another status: counted, not timed)."""
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await client.post(url, json=body)  # a warm connection and warm caches

        async def one() -> float | None:
            async with gate:
                started = time.perf_counter()
                try:
                    response = await client.post(url, json=body)
                except httpx.HTTPError:
                    return None
                elapsed = (time.perf_counter() - started) * 1000
                return elapsed if response.status_code == 200 else None

        started = time.perf_counter()
        latencies = await asyncio.gather(*(one() for _ in range(requests)))
        answered = [v for v in latencies if v is not None]
        return answered, time.perf_counter() - started, len(latencies) - len(answered)


def _timed(owner: Any, name: str, label: str, parts: dict[str, list[float]]) -> None:
    """Replace ``owner.name`` with a copy that records its duration (ms) under ``label``."""
    original = getattr(owner, name)
    if asyncio.iscoroutinefunction(original):

        async def atimed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                parts[label].append((time.perf_counter() - started) * 1000)

        setattr(owner, name, atimed)
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            parts[label].append((time.perf_counter() - started) * 1000)

    setattr(owner, name, timed)


def breakdown(up: str, chunks: list[dict[str, str]], requests: int, db: Path, server: str = "llama.cpp") -> Table:
    """Where one gateway request's time goes, in this process (the gateway's own code path, no HTTP in front).

    The door's steps are timed in place: ``prepare`` (locate the chunks, build and inject the constraint),
    ``abstain`` (the early abstention: is any chunk relevant enough, would the ranked grammar admit a sentence),
    ``log`` (the prompt-log append), ``upstream`` (the call through the openai SDK's client, the upstream's
    latency included), ``finish`` (parse, guard, store and render the answer; ``guard`` and ``results`` are
    parts of it: the guard's run, the result row and its review-queue entries in one transaction), and
    ``whole`` (the door's whole answer).
    """
    import citelock
    import citelock._wrap._client as wrap_client
    import citelock._wrap._request as wrap_request
    from citelock.gateway import GatewaySettings
    from citelock.gateway._deadline import GatedSinks
    from citelock.gateway._door import Doors
    from citelock.gateway._request import read_request
    from citelock.store import PromptLog

    steps = ("prepare", "abstain", "log", "upstream", "finish", "guard", "results", "whole")
    parts: dict[str, list[float]] = {k: [] for k in steps}
    _timed(wrap_request, "prepare", "prepare", parts)
    _timed(wrap_client._Wrapper, "_abstained", "abstain", parts)
    _timed(wrap_client._Wrapper, "_finish", "finish", parts)
    wrap_client.prepare = wrap_request.prepare  # type: ignore[attr-defined]
    _timed(PromptLog, "append", "log", parts)
    _timed(Doors, "_send", "upstream", parts)
    _timed(citelock.Guard, "run", "guard", parts)
    _timed(GatedSinks, "write", "results", parts)
    policy = citelock.SurfacePolicy(name="bench", stakes="low", sample_rate=0.0)
    settings = GatewaySettings.of({"bench": policy}, "bench", db=str(db), upstream=up, server=server)
    raw = json.dumps({"model": MODEL, "messages": [QUESTION], "citelock": {"chunks": chunks}}).encode()

    async def run() -> None:
        doors = Doors(settings)
        for n in range(requests + 5):
            started = time.perf_counter()
            await doors.answer(read_request(raw, settings))
            if n == 4:
                for values in parts.values():
                    values.clear()
            elif n > 4:
                parts["whole"].append((time.perf_counter() - started) * 1000)
        await doors.aclose()

    asyncio.run(run())
    table = Table(title=f"one gateway request, step by step ({requests} requests, concurrency 1, in process)")
    for column in ("step", "p50 ms", "p95 ms"):
        table.add_column(column, justify="right")
    for label, values in parts.items():
        p50, p95 = pct(values)
        table.add_row(label, f"{p50:.2f}", f"{p95:.2f}")
    return table


def pct(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per round and concurrency")
    parser.add_argument("--rounds", type=int, default=2, help="alternating direct/gateway rounds")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the upstream's fixed latency")
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--breakdown", type=int, default=200, help="requests of the step-by-step table (0: none)")
    parser.add_argument(
        "--server",
        default="llama.cpp",
        help="the upstream kind the gateway serves (llama.cpp: a GBNF grammar; vllm: a JSON schema)",
    )
    args = parser.parse_args()
    chunks = chunks_of(args.chunks)
    passages = "\n".join(f"[{c['id']}] {c['text']}" for c in chunks)
    title = f"gateway vs direct, {args.chunks} chunks, upstream {args.latency_ms:g} ms ({args.server}), free checks"
    table = Table(title=title)
    for column in ("workers", "conc.", "direct p50", "direct p95", "gateway p50", "gateway p95"):
        table.add_column(column, justify="right")
    for column in ("added p50", "added p95", "direct rps", "gateway rps", "gw CPU ms/req", "failed"):
        table.add_column(column, justify="right")
    load_before = os.getloadavg()
    replies = {MODEL: _reply(chunks)}
    with upstream_process(args.latency_ms / 1000, replies) as up, tempfile.TemporaryDirectory() as tmp:
        # the same prompt: the direct call carries the passages in a system message, the gateway adds its own
        direct_body = {"model": MODEL, "messages": [{"role": "system", "content": passages}, QUESTION]}
        gateway_body = {"model": MODEL, "messages": [QUESTION], "citelock": {"chunks": chunks}}
        for workers in args.workers:
            pids: list[int] = []
            with gateway(up, workers, Path(tmp) / f"gw{workers}.db", pids, args.server) as gw:
                for conc in args.concurrency:
                    direct: list[float] = []
                    through: list[float] = []
                    walls = {"direct": 0.0, "gateway": 0.0}
                    failed, cpu = 0, 0.0
                    for _ in range(args.rounds):
                        lat, wall, bad = asyncio.run(_round(f"{up}/chat/completions", direct_body, args.requests, conc))
                        direct += lat
                        walls["direct"] += wall
                        failed += bad
                        before = cpu_seconds(pids[0])
                        lat, wall, bad = asyncio.run(
                            _round(f"{gw}/v1/chat/completions", gateway_body, args.requests, conc)
                        )
                        after = cpu_seconds(pids[0])
                        cpu += (after - before) if before is not None and after is not None else float("nan")
                        through += lat
                        walls["gateway"] += wall
                        failed += bad
                    (d50, d95), (g50, g95) = pct(direct), pct(through)
                    per_request = cpu * 1000 / ((args.requests + 1) * args.rounds)  # + the warm-up request
                    table.add_row(
                        str(workers), str(conc), f"{d50:.1f}", f"{d95:.1f}", f"{g50:.1f}", f"{g95:.1f}",
                        f"{g50 - d50:.1f}", f"{g95 - d95:.1f}",
                        f"{len(direct) / walls['direct']:.0f}", f"{len(through) / walls['gateway']:.0f}",
                        f"{per_request:.2f}", str(failed),
                    )  # fmt: skip
        steps = breakdown(up, chunks, args.breakdown, Path(tmp) / "steps.db", args.server) if args.breakdown else None
    load_after = os.getloadavg()
    console = Console(width=180)  # every column whole, also when the output is a pipe
    console.print(table)
    print(
        "load average (1, 5, 15 min) before: " + ", ".join(f"{v:.2f}" for v in load_before)
        + "; after: " + ", ".join(f"{v:.2f}" for v in load_after) + f"; {os.cpu_count()} cores"
    )  # fmt: skip
    if steps is not None:
        console.print(steps)
    print(f"command: python benchmarks/bench_gateway.py {' '.join(sys.argv[1:])}".rstrip())


if __name__ == "__main__":
    main()
