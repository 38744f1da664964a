"""OutlinesBackend on outlines' llama.cpp model vs the local backend: same model object, same prompts, one run.

Two tables:

1. **speed** — per span policy, on the example questions: decode tokens/s (generated tokens over the time after
   the first token, the formula on every answer's ``GenerationStats``) of

   - ``outlines constrained``: :class:`OutlinesBackend` (the constraint as an outlines output type, llguidance
     processor), through ``citelock.answer`` with the pipeline's schema;
   - ``outlines unconstrained``: the same outlines model and prompt, no output type;
   - ``local constrained``: :class:`LocalBackend` (our own decode loop, fast-forward of forced tokens on, as
     shipped) and ``local constrained, no ff``;

   and the ratios: outlines constrained / outlines unconstrained, / local constrained (the goal: at least 0.9x)
   and / local constrained without fast-forward. Where the time goes is beside them: the share of the local
   backend's tokens the grammar forced (fast-forwarded in one batch; outlines' llama.cpp model samples every
   token with one forward pass, and a logits processor can only mask, never add tokens), and the constraint's
   time per token (the local loop's mask; outlines' llguidance processor, its matchers' setup included, from the
   ``mask_ms`` note of each generation).
2. **build** — per request, the constraint's build time: the citation schema (``fit_schema``, shared by both
   backends), then what each backend adds: ours through outlines (for a steerable model, the grammar or JSON
   Schema text straight to a processor on the llguidance backend built once per model; no outlines output type,
   whose ``JsonSchema`` validates against the meta-schema), outlines' own per-call path
   (``outlines.Generator(model, CFG(...))``, which builds a new llguidance backend, vocabulary included, every
   call), and the local backend's grammar compile.

Both backends run on one ``llama_cpp.Llama`` (the local runtime's), so the weights, threads and context match.

    python benchmarks/bench_outlines.py                 # 8 questions x every policy
    python benchmarks/bench_outlines.py --questions 4 --policies substring,sentence
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import citelock
from citelock import SchemaOptions
from citelock.backends import LOCAL_LIMITS, LocalBackend, OutlinesBackend
from citelock.constraint._schema import clear_schema_cache, fit_schema
from citelock.runtime._llama import runtime

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
POLICIES = ("quote", "quote_sentence", "substring", "sentence", "id")
OPTIONS = SchemaOptions(max_claims=2, max_citations=1, max_text_chars=120, max_span_chars=80)
console = Console(width=160)


def _cases(n: int) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    corpus = {row["id"]: row for row in map(json.loads, (EXAMPLES / "corpus.jsonl").read_text("utf-8").splitlines())}
    cases = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text("utf-8").splitlines() if line]
    return corpus, cases[:n]


def _speed(generation: citelock.Generation) -> float | None:
    tokens, first = generation.completion_tokens, generation.first_token_s or 0.0
    decode = generation.latency_s - first
    return tokens / decode if tokens and decode > 0 else None


def _note(generation: citelock.Generation, key: str) -> float:
    """A ``key=value`` note of a generation (``forced_tokens``, ``mask_ms``), 0 when absent."""
    for note in generation.notes:
        if note.startswith(f"{key}="):
            return float(note.split("=", 1)[1])
    return 0.0


def _median(values: list[float | None]) -> float:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else float("nan")


def bench_speed(backends: dict[str, Any], naive: OutlinesBackend, policies: list[str], n: int) -> list[dict[str, Any]]:
    corpus, cases = _cases(n)
    rows = []
    for policy in policies:
        names = (*backends, "outlines unconstrained")
        speeds: dict[str, list[float | None]] = {name: [] for name in names}
        tokens: dict[str, list[int]] = {name: [] for name in names}
        forced: dict[str, list[float]] = {name: [] for name in names}
        mask_ms: dict[str, list[float]] = {name: [] for name in names}
        for case in cases:
            chunks = [corpus[i] for i in case["chunks"]]
            for name, backend in backends.items():
                result = citelock.answer(case["question"], chunks, backend=backend, policy=policy, options=OPTIONS)  # type: ignore[arg-type]
                generation = result.generation
                speeds[name].append(_speed(generation))
                tokens[name].append(generation.completion_tokens or 0)
                forced[name].append(_note(generation, "forced_tokens"))
                mask_ms[name].append(_note(generation, "mask_ms"))
            # the same structured prompt, no output type: what outlines decodes at when nothing is constrained
            context = citelock.assemble(case["question"], chunks)
            record = citelock.serialize(context)
            free = naive.generate(record, None, max_tokens=max(tokens["outlines constrained"][-1], 8))
            speeds["outlines unconstrained"].append(_speed(free))
            tokens["outlines unconstrained"].append(free.completion_tokens or 0)
        med = {name: _median(values) for name, values in speeds.items()}
        for name in names:
            total = sum(tokens[name]) or 1
            rows.append(
                {
                    "policy": policy, "mode": name, "answers": len(cases),
                    "tokens": statistics.median(tokens[name]), "tok_s": med[name],
                    "forced": sum(forced[name]) / total, "mask_ms_token": sum(mask_ms[name]) / total,
                    "vs_outlines_free": med[name] / med["outlines unconstrained"],
                    "vs_local": med[name] / med["local constrained"],
                    "vs_local_noff": med[name] / med["local constrained, no ff"],
                }
            )  # fmt: skip
    return rows


def bench_build(model: Any, policies: list[str], n: int, reps: int) -> list[dict[str, Any]]:
    import outlines
    from outlines.types import CFG

    corpus, cases = _cases(n)
    rt = runtime("smollm2")
    ours = OutlinesBackend(model)
    ours._steer()  # the llguidance backend, built once per model (not per request): excluded, as for the local runtime
    rows = []
    for policy in policies:
        times: dict[str, list[float]] = {"schema": [], "ours (outlines)": [], "outlines Generator": [], "local": []}
        for case in cases:
            context = citelock.assemble(case["question"], [corpus[i] for i in case["chunks"]])
            record = citelock.serialize(context)
            for _ in range(reps):
                clear_schema_cache()
                tick = time.perf_counter()
                schema = fit_schema(context, policy, LOCAL_LIMITS, OPTIONS)  # type: ignore[arg-type]
                times["schema"].append((time.perf_counter() - tick) * 1000)
                tick = time.perf_counter()
                ours._prepare(record, schema, 64)  # what a request builds: its output type or its processor
                times["ours (outlines)"].append((time.perf_counter() - tick) * 1000)
                tick = time.perf_counter()
                outlines.Generator(model, CFG(schema.grammar), backend="llguidance")
                times["outlines Generator"].append((time.perf_counter() - tick) * 1000)
                tick = time.perf_counter()
                rt.compile(schema.grammar)
                times["local"].append((time.perf_counter() - tick) * 1000)
        rows.append({"policy": policy, **{k: statistics.median(v) for k, v in times.items()}})
    return rows


def print_tables(speed: list[dict[str, Any]], build: list[dict[str, Any]]) -> None:
    if speed:
        table = Table(title="decode speed: outlines' llama.cpp model vs the local backend (same Llama, same prompts)")
        cols = (
            "policy", "mode", "answers", "median tokens", "forced share", "processor ms/token", "tokens/s",
            "/ outlines unconstrained", "/ local", "/ local no ff",
        )  # fmt: skip
        for col in cols:
            table.add_column(col, justify="left" if col in ("policy", "mode") else "right")
        for r in speed:
            table.add_row(
                r["policy"], r["mode"], str(r["answers"]), f"{r['tokens']:.0f}", f"{r['forced']:.0%}",
                f"{r['mask_ms_token']:.2f}", f"{r['tok_s']:.1f}", f"{r['vs_outlines_free']:.2f}x",
                f"{r['vs_local']:.2f}x", f"{r['vs_local_noff']:.2f}x",
            )  # fmt: skip
        console.print(table)
    if build:
        table = Table(title="per-request constraint build, ms (median)")
        for col in ("policy", "schema (shared)", "ours via outlines", "outlines Generator", "local compile"):
            table.add_column(col, justify="left" if col == "policy" else "right")
        for r in build:
            table.add_row(
                r["policy"], f"{r['schema']:.2f}", f"{r['ours (outlines)']:.2f}", f"{r['outlines Generator']:.1f}",
                f"{r['local']:.2f}",
            )  # fmt: skip
        console.print(table)


def main() -> None:
    import outlines

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=8, help="the first N example questions")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--reps", type=int, default=3, help="build timings per question")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    rt = runtime("smollm2")
    model = outlines.from_llamacpp(rt.llm)  # the local runtime's Llama: same weights, threads and context
    constrained = OutlinesBackend(model)
    backends: dict[str, Any] = {
        "outlines constrained": constrained,
        "local constrained": LocalBackend("smollm2"),
        "local constrained, no ff": LocalBackend("smollm2", fast_forward=False),
    }
    console.print(f"model {rt.spec.label}, n_ctx {rt.n_ctx}, {args.questions} questions, bounds {OPTIONS}")
    started = time.perf_counter()
    speed = bench_speed(backends, OutlinesBackend(model, constrain=False), policies, args.questions)
    print_tables(speed, [])
    build = bench_build(model, policies, args.questions, args.reps)
    print_tables([], build)
    console.print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"speed": speed, "build": build}, indent=1, default=str))


if __name__ == "__main__":
    main()
