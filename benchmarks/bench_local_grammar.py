"""Span-policy grammars on the local backend at 10 to 1,000 chunks: size, compile time and the cost per token.

For N chunks of about ``--chars`` characters (the words of ``examples/corpus.jsonl`` in random sentences) and each
span policy, this prints:

- the Lark grammar's size and the time to build it (:func:`citelock.constraint._schema.build_schema`);
- the policy :data:`citelock.backends._local.LOCAL_LIMITS` lets through (``fit_schema``: a grammar past the
  limits is downgraded, e.g. ``quote`` -> ``quote_sentence``), so the table shows what a user would get;
- the time llguidance takes to compile it against the bundled model's vocabulary, first mask included
  (``LlamaRuntime.compile``), and the peak resident memory after it;
- a constrained decode of up to ``--tokens`` tokens from a short prompt (the grammar's cost, not the prompt's: N
  chunks would not fit the model's context): mask milliseconds per token and seconds per token, with the ratio to
  unconstrained decoding of the same prompt measured in the same run.

The quote grammar spells every quotable sentence tail of every chunk as a literal, so its size grows with the
square of the sentence length; this is where its limits come from. Numbers vary run to run on shared CPUs:
compare the ratios.

Usage::

    python benchmarks/bench_local_grammar.py                      # 10,100,300,1000 chunks of ~600 characters
    python benchmarks/bench_local_grammar.py --chunks 10,100 --policies quote,substring
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import citelock
from citelock.backends._local import LOCAL_LIMITS
from citelock.constraint import SchemaOptions, build_schema, clear_schema_cache, fit_schema
from citelock.errors import ConstraintViolationError, UsageError
from citelock.runtime import runtime

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server_grammar import chunk_of

PROMPT = "Quote one source that answers the question: when did the bridge open?\n\nAnswer (JSON): "


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", default="10,100,300,1000", help="numbers of chunks")
    parser.add_argument("--chars", type=int, default=600, help="characters per chunk")
    parser.add_argument("--policies", default="quote,quote_sentence,substring,sentence,id")
    parser.add_argument("--tokens", type=int, default=40, help="tokens decoded per measurement")
    parser.add_argument("--model", default="smollm2")
    args = parser.parse_args()
    model = runtime(args.model)
    prompt = model.tokenize(PROMPT)
    free = model.decode(prompt, None, max_tokens=args.tokens, temperature=0.8, seed=1, stop_at_eog=False)
    free_rate = free.total_s / max(1, len(free.tokens))
    options = SchemaOptions(max_claims=2, max_citations=1)
    title = f"span-policy grammars on the local backend ({args.model}; unconstrained {free_rate:.3f} s/token)"
    table = Table(title=title)
    for column in ("chunks", "policy", "its Lark KB", "build ms", "local limits give", "compile ms", "peak MB"):
        table.add_column(column, justify="right")
    for column in ("tokens", "mask ms/token", "s/token", "ratio vs free"):
        table.add_column(column, justify="right")
    for count in (int(n) for n in args.chunks.split(",")):
        chunks = [{"id": f"c{i}", "text": chunk_of(args.chars, seed=i)} for i in range(count)]
        context = citelock.assemble("When did the bridge open?", chunks, max_chars=None)
        for policy in args.policies.split(","):
            clear_schema_cache()
            started = time.perf_counter()
            try:
                raw = build_schema(context, policy, options)  # type: ignore[arg-type]
            except UsageError as exc:
                table.add_row(str(count), policy, "-", "-", f"refused: {exc}"[:40], *["-"] * 6)
                continue
            build_ms = (time.perf_counter() - started) * 1000
            cells = [str(count), policy, f"{len(raw.grammar) / 1024:,.0f}", f"{build_ms:,.0f}"]
            try:
                schema = fit_schema(context, policy, LOCAL_LIMITS, options)  # type: ignore[arg-type]
            except UsageError:
                table.add_row(*cells, "refused", *["-"] * 6)
                continue
            cells.append(schema.policy)
            print(f"{count} chunks, {policy} -> {schema.policy}", file=sys.stderr, flush=True)
            started = time.perf_counter()
            try:
                grammar = model.compile(schema.grammar)
            except UsageError as exc:
                table.add_row(*cells, "refused", f"{peak_mb():,.0f}", *["-"] * 4)
                print(f"  compile: {str(exc)[:200]}", file=sys.stderr)
                continue
            cells += [f"{(time.perf_counter() - started) * 1000:,.0f}", f"{peak_mb():,.0f}"]
            try:
                result = model.decode(prompt, grammar, max_tokens=args.tokens, temperature=0.8, seed=1)
            except ConstraintViolationError as exc:
                table.add_row(*cells, "failed", *["-"] * 3)
                print(f"  decode: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
                continue
            tokens = max(1, len(result.tokens))
            rate = result.total_s / tokens
            table.add_row(
                *cells,
                str(len(result.tokens)),
                f"{result.mask_s / tokens * 1000:.1f}",
                f"{rate:.3f}",
                f"{rate / free_rate:.2f}",
            )
    Console(width=170).print(table)


if __name__ == "__main__":
    main()
