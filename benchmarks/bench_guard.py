"""Guard ①+② speed: citelock vs groundcite on the same answers (20 citations over ~100 KB prompts).

Run: python benchmarks/bench_guard.py [--answers 200] [--chunks 100] [--seed 0] [--clock wall|cpu] [--json]
(needs ``pip install -e ".[bench]"``; ``benchmarks/bench_versions.py`` runs it against two source trees in one run)

Both tools get the same inputs: the prompt's chunks, an answer with 20 cited sentences (ids + verbatim quotes),
one fabricated id and one uncited sentence. groundcite checks id resolution, coverage and quotes
(case/whitespace-insensitive). citelock additionally checks each span against the chunk *as sent* (entities,
NFC), diagnoses stale/other-chunk/question spans, classifies non-factual sentences and checks numbers.

Rows:
- ``citelock check (logged record)``: the production path: the PromptRecord was built once when the prompt was
  logged (before generation); the guard runs against it.
- ``citelock record + check``: also builds the record from the raw messages in the timed region (the cost of
  guarding a prompt that was never logged); locating the chunks uses StringZilla when ``citelock[fast]`` is
  installed (the ``bench`` extra installs it), ``str.find`` otherwise: the line above the table says which.
- ``citelock Guard(high stakes).run``: the whole guard of one request under a high-stakes surface with the
  lexical judge (diagnosis off, so the row measures the route, not 100 judge calls per failing citation):
  parse, free checks, the citations to judge, support ③, the decision.
- ``groundcite validate``: resolution + coverage + quote check, given the source texts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import time

import groundcite

import citelock
from citelock.judges import LexicalJudge

GUARD = citelock.Guard(citelock.SurfacePolicy(name="bench", stakes="high", diagnose=False), LexicalJudge())
# --relevance off: the free off-question check (OFF_QUESTION) left out, so a tree that has it can be timed against
# one that does not on the same work; a tree without the check ignores the flag
CHECK_OPTIONS: dict[str, object] = {}


def _relevance_off() -> None:
    global GUARD
    if "relevance" in citelock.SurfacePolicy.model_fields:
        policy = citelock.SurfacePolicy(name="bench", stakes="high", diagnose=False, relevance="off")
        GUARD = citelock.Guard(policy, LexicalJudge())
        CHECK_OPTIONS["relevance"] = False


WORDS = (
    "revenue margin freight clause buyer seller insurance policy dosage patient trial court appeal statute "
    "contract liability warranty invoice shipment carrier tariff premium claim coverage deductible"
).split()


def make_case(rng: random.Random, n_chunks: int, chunk_chars: int):
    chunks = []
    for i in range(n_chunks):
        words = []
        while sum(len(w) + 1 for w in words) < chunk_chars:
            words.append(rng.choice(WORDS))
            if rng.random() < 0.08:
                words[-1] += f" {rng.randint(1, 999)}."
        chunks.append({"id": f"c-{i}", "text": " ".join(words)})
    record = citelock.serialize(citelock.assemble("What does the contract say about freight?", chunks))
    claims = []
    text_parts = []
    quotes: dict[str, list[str]] = {}
    for k in range(20):
        chunk = rng.choice(chunks)
        start = rng.randrange(0, len(chunk["text"]) - 60)
        span = chunk["text"][start : start + 50].strip()
        claim = f"The source states that {span}."
        cid = chunk["id"] if k != 7 else "c-999999"
        claims.append({"text": claim, "citations": [{"chunk_id": cid, "span": span}]})
        text_parts.append(f"{claim} [{cid}]")
        quotes.setdefault(cid, []).append(span)
    claims.append({"text": "The buyer always pays the freight charges in full."})
    text_parts.append("The buyer always pays the freight charges in full.")
    answer = citelock.parse_answer({"claims": claims})
    return {
        "record": record,
        "messages": [m.model_dump() for m in record.messages],
        "chunks": chunks,
        "answer": answer,
        "text": " ".join(text_parts),
        "quotes": quotes,
        "sources": [c["id"] for c in chunks],
        "source_texts": {c["id"]: c["text"] for c in chunks},
        "prompt_chars": sum(len(m.content) for m in record.messages),
    }


def run_citelock(case) -> bool:
    return citelock.check(case["record"], case["answer"], **CHECK_OPTIONS).ok


def run_citelock_unlogged(case) -> bool:
    record = citelock.record_from_messages(case["messages"], case["chunks"])
    return citelock.check(record, case["answer"], **CHECK_OPTIONS).ok


def run_citelock_guard(case) -> bool:
    return GUARD.run(case["record"], case["answer"]).ok


def run_groundcite(case) -> bool:
    report = groundcite.validate(
        case["text"],
        case["sources"],
        groundcite.BRACKET_ID,
        quotes=case["quotes"],
        source_texts=case["source_texts"],
    )
    return report.ok


def measure(fn, cases, repeat: int, clock=time.perf_counter) -> list[float]:
    times = []
    for _ in range(repeat):
        for case in cases:
            t0 = clock()
            fn(case)
            times.append(clock() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--chunk-chars", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--relevance", choices=("default", "off"), default="default", help="off: without OFF_QUESTION")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON object instead of a table")
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="cpu: this process's CPU time (a busy machine)"
    )
    args = parser.parse_args()
    if args.relevance == "off":
        _relevance_off()
    rng = random.Random(args.seed)
    cases = [make_case(rng, args.chunks, args.chunk_chars) for _ in range(args.answers)]
    kb = statistics.mean(c["prompt_chars"] for c in cases) / 1000
    # Both tools must reject every answer (one fabricated id, one uncited sentence): same verdict, same inputs.
    assert not any(run_citelock(c) or run_citelock_guard(c) or run_groundcite(c) for c in cases[:5])
    rows = []
    for name, fn in [
        ("citelock check (logged record)", run_citelock),
        ("citelock record + check", run_citelock_unlogged),
        ("citelock Guard(high stakes).run", run_citelock_guard),
        ("groundcite validate", run_groundcite),
    ]:
        fn(cases[0])  # warm caches and imports
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        times = sorted(measure(fn, cases, args.repeat if "record +" not in name else 1, clock))
        p50 = times[len(times) // 2] * 1e3
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))] * 1e3
        rows.append((name, p50, p99, 21 / (statistics.mean(times))))
    if args.json:
        print(
            json.dumps({name: {"p50_ms": p50, "p99_ms": p99, "citations_per_s": cps} for name, p50, p99, cps in rows})
        )
        return
    base = rows[-1][1]
    print(
        f"{args.answers} answers x 20 citations (+1 uncited sentence), prompts of ~{kb:.0f} KB, "
        f"{args.chunks} chunks; seed {args.seed}; {args.clock} clock"
    )
    simd = importlib.util.find_spec("stringzilla") is not None
    print(f"chunk search for never-logged prompts: {'StringZilla (citelock[fast])' if simd else 'str.find'}")
    print(
        f"| {'path':32} | {'p50 ms/answer':>13} | {'p99 ms/answer':>13} | {'citations/s':>11} | "
        f"{'p50 vs groundcite':>17} |"
    )
    print(f"|{'-' * 34}|{'-' * 15}|{'-' * 15}|{'-' * 13}|{'-' * 19}|")
    for name, p50, p99, cps in rows:
        print(f"| {name:32} | {p50:13.3f} | {p99:13.3f} | {cps:11.0f} | {base / p50:16.1f}x |")
    print("(ratio = groundcite p50 / this p50; >1 means faster than groundcite)")


if __name__ == "__main__":
    main()
