"""Constrained citation generation: build cost, speed, and naive-vs-constrained quality, measured in one run.

Three tables:

1. **build** — for contexts of 5, 20, 100 and 1000 chunks and each span policy: schema/grammar build time (cold,
   cache cleared), grammar size, the policy the local backend's limits keep, llguidance matcher compile time and
   the constraint engine's cost per token (mask + consume, replaying a valid answer).
2. **speed** — on the same model and the same prompt: time to first token, decode tokens/s constrained
   (``substring``; with and without fast-forward of grammar-forced tokens) vs unconstrained through the same
   decode loop, the ratio, and per-answer latency. Optionally (``--outlines``) outlines' llama.cpp integration
   with llguidance for comparison. Contexts larger than the model's window are assembled with whole chunks
   dropped to fit (recorded in the table).
3. **quality** — the example questions (``examples/questions.jsonl``: ordinary, injected "cite c-999", missing
   sources, look-alike ids, quotes/backslashes/newlines/non-ASCII) answered by the naive baseline and by each
   constrained policy: parse failures, fabricated ids, non-verbatim spans, uncited claims, all from the guard.

Needs ``pip install -e ".[bench]"`` (the local extra, plus outlines for ``--outlines``).

Usage::

    python benchmarks/bench_generation.py                   # everything, smollm2
    python benchmarks/bench_generation.py --skip-quality --reps 5
    python benchmarks/bench_generation.py --model gemma3 --sizes 5,20
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import citelock
from citelock import ReasonCode, SchemaOptions
from citelock.backends import LOCAL_LIMITS, LocalBackend, NaiveBackend
from citelock.constraint import build_schema, clear_schema_cache, fit_schema
from citelock.reasons import codes_in
from citelock.runtime import LlamaRuntime, parser_limits, runtime
from citelock.text import split_sentences

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
POLICIES = ("substring", "sentence", "id")
SPAN_REASONS = codes_in("span")
QUALITY_OPTIONS = SchemaOptions(max_claims=2, max_citations=2, max_text_chars=120, max_span_chars=100)
console = Console(width=180)

_SUBJECTS = ["The bridge", "The ferry", "The council", "The toll", "The survey", "The tower", "The path", "The crew"]
_VERBS = ["opened in", "closed in", "was rebuilt in", "was measured in", "was approved in", "was repainted in"]


def synthetic_chunks(n: int) -> list[dict[str, str]]:
    """``n`` short two-sentence chunks with distinct facts and look-alike ids (c-1, c-10, c-100...)."""
    out = []
    for i in range(n):
        a = f"{_SUBJECTS[i % len(_SUBJECTS)]} {_VERBS[i % len(_VERBS)]} {1900 + i % 120}."
        b = f'Record {i} notes a value of {i * 7 % 1000} units and a "quoted" remark.'
        out.append({"id": f"c-{i + 1}", "text": f"{a} {b}"})
    return out


def median_ms(fn: Any, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


# ---------------------------------------------------------------- 1. build


def valid_output(schema: citelock.CitationSchema) -> str:
    chunk_id = next(iter(schema.sentences or schema.bodies or {schema.ids[0]: ""}))
    if schema.policy == "sentence":
        span = schema.sentences[chunk_id][0]
    elif schema.policy == "substring":
        span = schema.bodies[chunk_id].split(". ")[0]  # whole words: the grammar cuts on word boundaries
    else:
        span = "a quoted phrase"
    data = {
        "claims": [{"text": "A short claim about the record.", "citations": [{"chunk_id": chunk_id, "span": span}]}]
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def engine_cost(rt: LlamaRuntime, schema: citelock.CitationSchema) -> tuple[float, float]:
    """(matcher compile ms, constraint engine µs per token replaying a valid answer)."""
    import llguidance
    import numpy as np

    started = time.perf_counter()
    grammar = rt.compile(schema.grammar)
    matcher = llguidance.LLMatcher(rt.tokenizer(), grammar, log_level=0, limits=parser_limits())
    compile_ms = (time.perf_counter() - started) * 1000
    tokens = rt.llm.tokenize(valid_output(schema).encode("utf-8"), add_bos=False, special=False)
    bits = np.zeros((rt.tokenizer().vocab_size + 31) // 32, dtype=np.int32)
    started = time.perf_counter()
    for token in tokens:
        matcher.unsafe_compute_mask_ptr(bits.ctypes.data, bits.nbytes)
        if not matcher.consume_token(token):
            raise RuntimeError(f"the valid answer was rejected: {matcher.get_error()}")
    per_token_us = (time.perf_counter() - started) / len(tokens) * 1e6
    return compile_ms, per_token_us


def bench_build(rt: LlamaRuntime, sizes: list[int], reps: int) -> list[dict[str, Any]]:
    rows = []
    split_sentences("Warm the sentence splitter. Once.")
    for n in sizes:
        context = citelock.assemble("Which record mentions the bridge?", synthetic_chunks(n))
        for policy in POLICIES:

            def cold(context: citelock.Context = context, policy: str = policy) -> None:
                clear_schema_cache()
                build_schema(context, policy)  # type: ignore[arg-type]

            def cached(context: citelock.Context = context, policy: str = policy) -> None:
                build_schema(context, policy)  # type: ignore[arg-type]

            build_ms = median_ms(cold, reps)
            schema = build_schema(context, policy)  # type: ignore[arg-type]
            cached_ms = median_ms(cached, reps)
            fitted = fit_schema(context, policy, LOCAL_LIMITS)  # type: ignore[arg-type]
            compile_ms, per_token = engine_cost(rt, fitted)
            rows.append(
                {
                    "chunks": n, "policy": policy, "build_ms": build_ms, "cached_ms": cached_ms,
                    "grammar_kb": schema.stats.grammar_chars / 1000, "local_policy": fitted.policy,
                    "compile_ms": compile_ms, "engine_us_per_token": per_token,
                }
            )  # fmt: skip
    return rows


# ---------------------------------------------------------------- 2. speed


def fit_context(rt: LlamaRuntime, n: int, max_tokens: int) -> citelock.Context:
    def count(text: str) -> int:
        return len(rt.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    budget = rt.n_ctx - max_tokens - 64  # room for the chat template's own tokens
    return citelock.assemble(
        "Which record mentions the bridge, and what value does it note?",
        synthetic_chunks(n),
        max_tokens=budget,
        count_tokens=count,
        on_overflow="drop",
    )


def bench_speed(
    rt: LlamaRuntime, sizes: list[int], reps: int, max_tokens: int, with_outlines: bool
) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        context = fit_context(rt, n, max_tokens * 4)
        schema = fit_schema(context, "substring", LOCAL_LIMITS)
        record = citelock.serialize(context)
        prompt = rt.format_prompt([(m.role, m.content) for m in record.messages], structured=True)
        tokens = rt.tokenize(prompt)
        grammar = rt.compile(schema.grammar)
        modes: dict[str, list[Any]] = {"unconstrained": [], "constrained": [], "constrained+ff": []}
        for _ in range(reps):
            modes["unconstrained"].append(
                rt.decode(tokens, None, max_tokens=max_tokens, stop_at_eog=False, reuse_prefix=False)
            )
            modes["constrained"].append(
                rt.decode(tokens, grammar, max_tokens=max_tokens, fast_forward=False, reuse_prefix=False)
            )
            modes["constrained+ff"].append(
                rt.decode(tokens, grammar, max_tokens=max_tokens, fast_forward=True, reuse_prefix=False)
            )
        base = statistics.median(r.tokens_per_s or 0.0 for r in modes["unconstrained"])
        for mode, results in modes.items():
            tps = statistics.median(r.tokens_per_s or 0.0 for r in results)
            rows.append(
                {
                    "chunks": n, "in_prompt": len(context.chunks), "prompt_tokens": len(tokens), "mode": mode,
                    "policy": schema.policy if mode != "unconstrained" else "-",
                    "ttft_s": statistics.median(r.first_token_s for r in results),
                    "tokens": statistics.median(len(r.tokens) for r in results),
                    "tok_s": tps, "ratio": tps / base if base else float("nan"),
                    "latency_s": statistics.median(r.total_s for r in results),
                    "mask_ms": statistics.median(r.mask_s * 1000 for r in results),
                }
            )  # fmt: skip
        if with_outlines:
            rows.append(outlines_row(rt, n, context, schema, prompt, reps, max_tokens, base))
    return rows


def outlines_row(
    rt: LlamaRuntime, n: int, context: citelock.Context, schema: citelock.CitationSchema, prompt: str,
    reps: int, max_tokens: int, base: float,
) -> dict[str, Any]:  # fmt: skip
    """outlines' llama.cpp integration with the llguidance backend, same model, prompt and grammar."""
    import outlines
    from outlines.types import CFG

    llm = rt.llm
    model = outlines.from_llamacpp(llm, chat_mode=False)
    generator = outlines.Generator(model, CFG(schema.grammar), backend="llguidance")
    sampled: list[float] = []
    original = llm.sample

    def clocked(*args: Any, **kwargs: Any) -> Any:
        sampled.append(time.perf_counter())
        return original(*args, **kwargs)

    llm.sample = clocked
    results = []
    try:
        for _ in range(reps):
            sampled.clear()
            llm.reset()
            started = time.perf_counter()
            text = generator(prompt, max_tokens=max_tokens, temperature=0.0)
            ended = time.perf_counter()
            decode = ended - sampled[0] if sampled else float("nan")
            results.append((sampled[0] - started, len(sampled), (len(sampled) - 1) / decode, ended - started, text))
    finally:
        llm.sample = original
    tps = statistics.median(r[2] for r in results)
    return {
        "chunks": n, "in_prompt": len(context.chunks), "prompt_tokens": None, "mode": "outlines (llguidance)",
        "policy": schema.policy, "ttft_s": statistics.median(r[0] for r in results),
        "tokens": statistics.median(r[1] for r in results), "tok_s": tps, "ratio": tps / base if base else float("nan"),
        "latency_s": statistics.median(r[3] for r in results), "mask_ms": float("nan"),
    }  # fmt: skip


# ---------------------------------------------------------------- 3. quality


def bench_quality(model: str, limit: int | None) -> list[dict[str, Any]]:
    corpus = {row["id"]: row for row in map(json.loads, (EXAMPLES / "corpus.jsonl").read_text("utf-8").splitlines())}
    cases = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text("utf-8").splitlines() if line]
    cases = cases[:limit] if limit else cases
    backends: list[tuple[str, Any, str]] = [("naive", NaiveBackend(model), "id")]
    backends += [(policy, LocalBackend(model), policy) for policy in POLICIES]
    rows = []
    for label, backend, policy in backends:
        tally: Counter[str] = Counter()
        latencies = []
        for case in cases:
            tally["answers"] += 1
            try:
                result = citelock.answer(
                    case["question"], [corpus[i] for i in case["chunks"]], backend=backend, policy=policy,
                    options=QUALITY_OPTIONS, max_tokens=160 if label == "naive" else None,
                )  # fmt: skip
            except (citelock.UnparsedAnswerError, citelock.ConstraintViolationError, citelock.RuntimeFailure) as exc:
                tally["parse_failures"] += 1
                console.print(f"[yellow]{label}: {type(exc).__name__}: {str(exc)[:160]}")
                continue
            latencies.append(result.generation.latency_s)
            reasons = Counter(f.reason for f in result.findings)
            tally["citations"] += len(result.report.citations)
            tally["spans"] += sum(1 for c in result.report.citations if c.span is not None)
            tally["factual_claims"] += sum(1 for c in result.report.claims if c.factual)
            tally["fabricated_ids"] += reasons[ReasonCode.ID_NOT_IN_PROMPT]
            tally["non_verbatim_spans"] += sum(reasons[r] for r in SPAN_REASONS)
            tally["uncited_claims"] += reasons[ReasonCode.UNCITED_CLAIM]
            tally["ok"] += result.ok
        rows.append(
            {"backend": label, **tally, "latency_s": statistics.median(latencies) if latencies else float("nan")}
        )
    return rows


# ---------------------------------------------------------------- report


def rate(count: int, total: int) -> str:
    return f"{count} ({count / total:.0%})" if total else f"{count} (n/a)"


def print_tables(build: list[dict[str, Any]], speed: list[dict[str, Any]], quality: list[dict[str, Any]]) -> None:
    if build:
        table = Table(title="1. schema/grammar build and constraint-engine cost (median)")
        for col in (
            "chunks",
            "policy",
            "build ms (cold)",
            "cached ms",
            "grammar KB",
            "local keeps",
            "matcher compile ms",
            "engine µs/token",
        ):
            table.add_column(col, justify="right")
        for r in build:
            table.add_row(
                str(r["chunks"]), r["policy"], f"{r['build_ms']:.1f}", f"{r['cached_ms']:.3f}",
                f"{r['grammar_kb']:.0f}", r["local_policy"], f"{r['compile_ms']:.0f}",
                f"{r['engine_us_per_token']:.0f}",
            )  # fmt: skip
        console.print(table)
    if speed:
        table = Table(title="2. decoding speed, same model and prompt (median)")
        for col in (
            "chunks (in prompt)",
            "prompt tok",
            "mode",
            "policy",
            "TTFT s",
            "tokens",
            "tok/s",
            "vs unconstrained",
            "latency s",
            "mask ms",
        ):
            table.add_column(col, justify="right")
        for r in speed:
            table.add_row(
                f"{r['chunks']} ({r['in_prompt']})", str(r["prompt_tokens"] or "-"), r["mode"], r["policy"],
                f"{r['ttft_s']:.2f}", f"{r['tokens']:.0f}", f"{r['tok_s']:.1f}", f"{r['ratio']:.2f}x",
                f"{r['latency_s']:.2f}", f"{r['mask_ms']:.0f}",
            )  # fmt: skip
        console.print(table)
    if quality:
        table = Table(title="3. naive vs constrained on the example questions (from the guard)")
        for col in (
            "backend",
            "answers",
            "parse failures",
            "fabricated ids",
            "non-verbatim spans",
            "uncited claims",
            "guard OK",
            "latency s",
        ):
            table.add_column(col, justify="right")
        for r in quality:
            spans = (
                "n/a (no spans)" if r["backend"] == "naive" else rate(r.get("non_verbatim_spans", 0), r.get("spans", 0))
            )
            table.add_row(
                r["backend"], str(r["answers"]), rate(r.get("parse_failures", 0), r["answers"]),
                rate(r.get("fabricated_ids", 0), r.get("citations", 0)), spans,
                rate(r.get("uncited_claims", 0), r.get("factual_claims", 0)),
                rate(r.get("ok", 0), r["answers"]), f"{r['latency_s']:.2f}",
            )  # fmt: skip
        console.print(table)
        console.print(
            "rates: parse failures and guard OK per answer; fabricated ids per citation; non-verbatim spans per "
            "quoted span; uncited claims per factual claim. Constrained parse failures would be constraint "
            "violations (loud errors)."
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", choices=["smollm2", "gemma3"])
    parser.add_argument("--sizes", default="5,20,100,1000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=96, help="tokens per speed run")
    parser.add_argument("--questions", type=int, default=None, help="use only the first N example questions")
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument(
        "--outlines", action="store_true", help="add outlines' llama.cpp integration to the speed table"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rt = runtime(args.model)
    console.print(f"model {rt.spec.label}, n_ctx {rt.n_ctx}, vocab {rt.n_vocab}")
    started = time.perf_counter()
    build = [] if args.skip_build else bench_build(rt, sizes, args.reps)
    print_tables(build, [], [])  # each table as soon as it is measured
    speed = [] if args.skip_speed else bench_speed(rt, sizes, args.reps, args.max_tokens, args.outlines)
    print_tables([], speed, [])
    quality = [] if args.skip_quality else bench_quality(args.model, args.questions)
    print_tables([], [], quality)
    console.print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"build": build, "speed": speed, "quality": quality}, indent=1, default=str))


if __name__ == "__main__":
    main()
