"""The substring grammar on a llama.cpp server: GBNF size and decoding cost against chunk length and span bound.

For one chunk of N characters (the words of ``examples/corpus.jsonl`` in random sentences) and each
``max_span_chars``: the size of the ``substring`` grammar in GBNF (what the server is sent) and in llguidance Lark
(what the local backend compiles), the time to build it, and, through the real server, the latency and decode
speed of answers constrained by that grammar against the same prompt unconstrained (``--reps`` each, sampled
at temperature 0.8 with a fixed seed, so that the model writes spans rather than abstaining).
The ratio column is constrained / unconstrained seconds per completion token.

This is where ``max_grammar_chars`` of the llama.cpp profiles comes from.

Usage::

    python benchmarks/bench_server_grammar.py                        # starts the bundled model's server
    python benchmarks/bench_server_grammar.py --base-url http://127.0.0.1:8080/v1 --sizes 1000,4000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import citelock
from citelock import SchemaOptions
from citelock.backends._openai import OpenAIBackend
from citelock.constraint import build_schema, clear_schema_cache
from citelock.errors import TruncatedOutputError
from citelock.runtime import ManagedServer

ROOT = Path(__file__).resolve().parents[1]


def chunk_of(chars: int, seed: int = 0) -> str:
    """``chars`` characters of sentences of the corpus's words in random order (no repeated passage to share)."""
    texts = [json.loads(line)["text"] for line in (ROOT / "examples" / "corpus.jsonl").read_text().splitlines()]
    words = sorted({w for text in texts for w in text.split()})
    rng = random.Random(seed)
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        sentence = [rng.choice(words) for _ in range(rng.randint(6, 18))]
        out.extend([*sentence[:-1], sentence[-1].rstrip(".") + "."])
    return " ".join(out)[:chars].rsplit(" ", 1)[0]


def per_token(backend: OpenAIBackend, record: Any, schema: Any, reps: int, max_tokens: int) -> tuple[float, float]:
    """Median seconds per answer and per completion token over ``reps`` requests."""
    totals, rates = [], []
    for _ in range(reps):
        started = time.perf_counter()
        try:
            tokens = backend.generate(record, schema, max_tokens=max_tokens).completion_tokens or 1
        except TruncatedOutputError:  # a long answer cut at max_tokens still measures decoding
            tokens = max_tokens
        seconds = time.perf_counter() - started
        totals.append(seconds)
        rates.append(seconds / max(1, tokens))
    return statistics.median(totals), statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="an already running llama.cpp server (default: start the bundled one)")
    parser.add_argument("--sizes", default="500,2000,5000,10000", help="chunk lengths in characters")
    parser.add_argument("--spans", default="60,160", help="max_span_chars values")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    server = None if args.base_url else ManagedServer(n_ctx=4096).start()
    base_url = args.base_url or (server.base_url if server else "")
    try:
        constrained = OpenAIBackend(base_url=base_url, delivery="grammar", temperature=0.8, seed=1)
        constrained.limits = replace(constrained.limits, max_grammar_chars=None)  # measure past the bound too
        free = OpenAIBackend(base_url=base_url, constrain=False, temperature=0.8, seed=1)
        table = Table(title="substring grammar on the llama.cpp server (per chunk)")
        for column in ("chunk chars", "max_span", "GBNF chars", "Lark chars", "build ms", "s/answer", "s/token"):
            table.add_column(column, justify="right")
        table.add_column("ratio vs free", justify="right")
        for size in (int(s) for s in args.sizes.split(",")):
            text = chunk_of(size)
            context = citelock.assemble("What does the source say?", [{"id": "c1", "text": text}])
            record = citelock.serialize(context)
            _, free_rate = per_token(free, record, None, args.reps, args.max_tokens)
            for span in (int(s) for s in args.spans.split(",")):
                clear_schema_cache()
                started = time.perf_counter()
                options = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=60, max_span_chars=span)
                schema = build_schema(context, "substring", options)
                gbnf = schema.gbnf
                build_ms = (time.perf_counter() - started) * 1000
                answer_s, rate = per_token(constrained, record, schema, args.reps, args.max_tokens)
                table.add_row(
                    f"{size:,}",
                    str(span),
                    f"{len(gbnf):,}",
                    f"{len(schema.grammar):,}",
                    f"{build_ms:.0f}",
                    f"{answer_s:.2f}",
                    f"{rate:.3f}",
                    f"{rate / free_rate:.2f}",
                )
        Console().print(table)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
