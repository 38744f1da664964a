"""The wrapped client's own cost per call beside the raw SDK call to the same local llama.cpp server.

For 10 and 100 chunks in the caller's own user message (a system prompt, a three-turn history), one run
measures:

- ``raw``: the team's call today, ``client.chat.completions.create(model, messages, max_tokens)`` on the plain
  ``openai.OpenAI`` client (``--reps`` calls);
- ``wrapped``: the same call through ``citelock.wrap(client)`` with ``chunks=`` (``--reps`` calls; the answer
  is decoded under the citation grammar, so its server time is not the raw call's);
- ``own cold``: the wrapper's own work per call, everything but the HTTP round trip: locating the chunks in the
  messages, building the per-request constraint, logging the prompt to SQLite, verifying, parsing, guarding and
  rendering the answer, with every constraint cache cleared before the call (a chunk set never seen before).
  Measured on ``--own-reps`` calls that replay the wrapped calls' real server responses; the three columns after
  it split this cold cost;
- ``own warm``: the same with the caches kept (a chunk set seen before: another question or turn over the same
  retrieved chunks, a retry; the constraint is then a cache lookup, cached by the chunks' content), and its
  ``warm log`` part;
- ``warm whole``: the warm call again with every record stored whole, its injected grammar inside it (the log
  before large constraint payloads were stored once by content), and its ``whole log`` part: the same code
  otherwise, interleaved with the others so that both see the same load.

p50 / p95 in milliseconds; ``cold / raw`` and ``warm / raw`` are ratios of the p50s. Goal: own p50 under 2 ms
at 10 chunks.

Usage::

    python benchmarks/bench_wrap.py                                  # starts the bundled model's server
    python benchmarks/bench_wrap.py --base-url http://127.0.0.1:8080/v1 --reps 10 --own-reps 300
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
from rich.console import Console
from rich.table import Table

import citelock
from citelock._wrap._request import prepare
from citelock.constraint._schema import clear_schema_cache
from citelock.store import _payloads, _prompt_log

ROOT = Path(__file__).resolve().parents[1]
OPTS = citelock.SchemaOptions(max_claims=1, max_citations=1, max_text_chars=40, max_span_chars=60)


def chunks_of(count: int) -> list[dict[str, str]]:
    """``count`` chunks of about 90 characters from the example corpus (cycled, each with its own id)."""
    texts = [json.loads(line)["text"] for line in (ROOT / "examples" / "corpus.jsonl").read_text().splitlines()]
    return [{"id": f"doc-{k}", "text": f"{texts[k % len(texts)][:80]} (ref {k})."} for k in range(count)]


def messages_for(chunks: list[dict[str, str]]) -> list[dict[str, str]]:
    passages = "\n".join(f"[{c['id']}] {c['text']}" for c in chunks)
    return [
        {"role": "system", "content": "You answer from the passages only, briefly."},
        {"role": "user", "content": "Hello, I have a question about the bay."},
        {"role": "assistant", "content": "Of course, ask away."},
        {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: How long is the Aurora Bridge?"},
    ]


def pct(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


@contextmanager
def records_whole() -> Iterator[None]:
    """Store every record whole (its constraint payload inside it), as the log did before payloads were apart."""
    split = _prompt_log.split_record
    _prompt_log.split_record = _payloads._whole
    try:
        yield
    finally:
        _prompt_log.split_record = split


@contextmanager
def server_url(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from citelock.runtime._server import ManagedServer

    with ManagedServer(n_ctx=8192) as server:
        yield server.base_url


def measure(url: str, count: int, policy: str, reps: int, own_reps: int, db: Path) -> dict[str, tuple[float, float]]:
    plain = openai.OpenAI(base_url=url, api_key="local", max_retries=0, timeout=600)
    chunks = chunks_of(count)
    messages = messages_for(chunks)
    raw: list[float] = []
    for _ in range(reps):
        started = time.perf_counter()
        plain.chat.completions.create(model="local", messages=messages, max_tokens=64, temperature=0.0)
        raw.append((time.perf_counter() - started) * 1000)
    client = citelock.wrap(plain, server="llama-cpp-python", log=db, options=OPTS, policy=policy)
    settings: dict[str, Any] = {"policy": policy, "options": OPTS}
    wrapped: list[float] = []
    replies: list[Any] = []
    transport = client.backend.transport
    original_send = transport.send

    def keep(arguments: Any, **kwargs: Any) -> Any:
        response, _ = original_send(arguments, **kwargs)
        replies.append(copy.deepcopy(response))
        return response, response.choices[0]

    transport.send = keep
    for _ in range(reps):
        clear_schema_cache()
        started = time.perf_counter()
        client.chat.completions.create(model="local", messages=messages, chunks=chunks, temperature=0.0)
        wrapped.append((time.perf_counter() - started) * 1000)
    parts: dict[str, list[float]] = {key: [] for key in ("own", "prepare", "log", "finish", "warm", "wlog")}
    parts.update(whole=[], whole_log=[])
    log = client.citelock.log
    assert log is not None
    for n in range(3 * own_reps):
        kind = ("cold", "warm", "whole")[n % 3]  # interleaved, so all three see the same machine load
        reply = copy.deepcopy(replies[n % len(replies)])
        if kind == "cold":
            clear_schema_cache()
        with records_whole() if kind == "whole" else contextlib.nullcontext():
            started = time.perf_counter()
            prepared = prepare(client.backend, {"model": "local", "messages": messages, "chunks": chunks}, **settings)
            built = time.perf_counter()
            log.append(prepared.record)
            logged = time.perf_counter()
            client._finish(prepared, reply, reply.choices[0], 0.0)
            ended = time.perf_counter()
        total, logging = (ended - started) * 1000, (logged - built) * 1000
        if kind != "cold":
            parts["warm" if kind == "warm" else "whole"].append(total)
            parts["wlog" if kind == "warm" else "whole_log"].append(logging)
            continue
        parts["own"].append(total)
        parts["prepare"].append((built - started) * 1000)
        parts["log"].append(logging)
        parts["finish"].append((ended - logged) * 1000)
    return {"raw": pct(raw), "wrapped": pct(wrapped), **{key: pct(values) for key, values in parts.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="a running server's /v1 URL (default: start the bundled model's server)")
    parser.add_argument("--sizes", default="10,100", help="chunk counts (default 10,100)")
    parser.add_argument("--policies", default="substring,sentence", help="span policies (default substring,sentence)")
    parser.add_argument("--reps", type=int, default=5, help="server calls per size for raw and for wrapped")
    parser.add_argument("--own-reps", type=int, default=200, help="replayed calls per size for the wrapper's cost")
    args = parser.parse_args()
    table = Table(title="citelock.wrap: the wrapper's own cost beside the raw SDK call (ms, p50 / p95)")
    columns = ("policy", "chunks", "raw SDK", "wrapped", "own cold", "locate+constrain", "log", "guard+render")
    for column in (*columns, "own warm", "warm log", "warm whole", "whole log", "cold / raw", "warm / raw"):
        table.add_column(column, justify="right")
    keys = ("raw", "wrapped", "own", "prepare", "log", "finish", "warm", "wlog", "whole", "whole_log")
    with tempfile.TemporaryDirectory() as tmp, server_url(args.base_url) as url:
        for policy in args.policies.split(","):
            for count in (int(s) for s in args.sizes.split(",")):
                db = Path(tmp) / f"log-{policy}-{count}.db"
                got = measure(url, count, policy, args.reps, args.own_reps, db)
                cells = [f"{got[k][0]:.2f} / {got[k][1]:.2f}" for k in keys]
                ratios = (f"{got[k][0] / got['raw'][0]:.4f}" for k in ("own", "warm"))
                table.add_row(policy, str(count), *cells, *ratios)
    Console(width=240).print(table)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min) at the end")
    print(
        "raw: the plain client's call (max_tokens=64); wrapped: the same call through citelock.wrap, decoded under "
        "the policy's grammar; own: locate + constrain + log + verify + parse + guard + render per call, on "
        "replayed real responses; cold: constraint caches cleared first (new chunks), warm: the chunk set's "
        "constraint cached (goal: p50 < 2 ms at 10 chunks); whole: the warm call with records stored whole (the "
        "log before payloads were stored once by content)"
    )


if __name__ == "__main__":
    main()
