"""A cold constraint build for a chunk set never seen before, per grammar dialect: Lark (llguidance) against GBNF.

Run: python benchmarks/bench_constraint_cold.py [--sizes 10,100] [--reps 40] [--policies substring,sentence]

The same chunks as ``bench_wrap.py`` (about 90 characters each) and its schema options (``max_span_chars=60``).
Each rep clears the schema cache and the per-chunk GBNF cache first, then builds the schema (its JSON Schema and
its Lark grammar, which llguidance reads: the local backend, outlines, vLLM's ``structured_outputs_lark``
delivery) and, for the GBNF row, also its GBNF (llama.cpp's ``grammar``, SGLang's ``ebnf``, vLLM's other grammar
deliveries). The two rows alternate rep by rep, so drift hits both. Prints p50 / p95 in ms, the grammar's size and
the ratio of the p50s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_wrap import OPTS, chunks_of

from citelock import assemble
from citelock.constraint import build_schema
from citelock.constraint._gbnf import clear_gbnf_cache
from citelock.constraint._schema import clear_schema_cache


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100", help="chunk counts (default 10,100)")
    parser.add_argument("--reps", type=int, default=40, help="cold builds per row (default 40)")
    parser.add_argument("--policies", default="substring,sentence", help="span policies (default substring,sentence)")
    args = parser.parse_args()
    print(f"cold constraint build, {args.reps} reps per row; load {os.getloadavg()[0]:.2f}")
    header = ("policy", "chunks", "dialect", "p50 ms", "p95 ms", "grammar KB", "ratio")
    print(f"{header[0]:10s} {header[1]:>6s} {header[2]:8s} " + " ".join(f"{h:>8s}" for h in header[3:]))
    for policy in args.policies.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            context = assemble("How long is the bridge?", chunks_of(size))
            times: dict[str, list[float]] = {"lark": [], "gbnf": []}
            sizes: dict[str, int] = {}
            for _ in range(args.reps):
                for dialect in ("lark", "gbnf"):
                    clear_schema_cache()
                    clear_gbnf_cache()
                    started = time.perf_counter()
                    schema = build_schema(context, policy, options=OPTS)  # type: ignore[arg-type]
                    grammar = schema.grammar_in(dialect)  # type: ignore[arg-type]
                    times[dialect].append((time.perf_counter() - started) * 1000)
                    sizes[dialect] = len(grammar.encode("utf-8"))
            base = statistics.median(times["lark"])
            for dialect in ("lark", "gbnf"):
                p50 = statistics.median(times[dialect])
                print(
                    f"{policy:10s} {size:6d} {dialect:8s} {p50:8.2f} {_p(times[dialect], 0.95):8.2f} "
                    f"{sizes[dialect] / 1000:10.1f} {p50 / base:8.2f}"
                )


if __name__ == "__main__":
    main()
