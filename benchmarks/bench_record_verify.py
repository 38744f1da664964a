"""What checking a record's derived fields costs: beside serialize, and in PromptLog append and get.

A record that enters from outside (a file, a row read back from the log) has its sha256, normalized copy, offset
maps and placements recomputed from its messages (``citelock.prompt.derived_problem``). This measures, in one run
and side by side: ``serialize`` of a context, ``derived_problem`` of its record (a bundled template's: rendered
again and compared), ``derived_problem`` of the same prompt located by ``record_from_messages`` (``external``:
the structural checks), and ``PromptLog.append`` / ``PromptLog.get`` with the check and with it switched off
(monkeypatched, for the comparison only). A record built
in this process (by serialize, as the pipeline appends it) skips the check by identity; the appends here are of
records read back from JSON, which pay it. Two kinds of chunk text: plain prose, and prose with entities and
double spaces (every normalization step busy). Times are the minimum of ``--reps`` runs (get, serialize, verify)
or the mean of 20 appends; the ratios are what to read (a shared machine is noisy).

    python benchmarks/bench_record_verify.py                 # 10 and 50 chunks of ~2 KB
    python benchmarks/bench_record_verify.py --chunks 5 --reps 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import citelock.store._prompt_log as prompt_log
from citelock import serialize
from citelock.prompt import assemble, derived_problem, record_from_messages
from citelock.records import PromptRecord
from citelock.store import PromptLog

TEXTS = {
    "plain": "The bridge opened in 1932 and carried cars. ",
    "entities+spaces": "The bridge  opened in 1932 &amp; carried\ncars. ",
}


def _best(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def _row(kind: str, count: int, reps: int) -> str:
    chunks = [{"id": f"c-{i}", "text": TEXTS[kind] * 40 + str(i)} for i in range(count)]
    context = assemble("When did it open?", chunks, max_chars=10**8)
    record = serialize(context)
    t_serialize = _best(lambda: serialize(context), reps)
    t_verify = _best(lambda: derived_problem(record), reps)
    sent = [m.model_dump() for m in record.messages]
    external = record_from_messages(sent, chunks, question=context.question)  # the same prompt, located
    assert derived_problem(external) is None
    t_external = _best(lambda: derived_problem(external), reps)

    def loaded(prefix: str) -> list[PromptRecord]:
        copies = (record.model_copy(update={"request_id": f"{prefix}{i}"}) for i in range(20))
        return [PromptRecord.model_validate_json(r.model_dump_json()) for r in copies]

    with tempfile.TemporaryDirectory() as tmp:
        log = PromptLog(Path(tmp) / "log.db")
        unchecked, checked = loaded("u"), loaded("c")
        real_verified, real_derived = prompt_log.verified_record, prompt_log.derived_problem
        prompt_log.verified_record = lambda r: r  # type: ignore[assignment]
        started = time.perf_counter()
        for r in unchecked:
            log.append(r)
        append_off = (time.perf_counter() - started) / len(unchecked)
        prompt_log.verified_record = real_verified
        started = time.perf_counter()
        for r in checked:
            log.append(r)
        append_on = (time.perf_counter() - started) / len(checked)
        get_on = _best(lambda: [log.get(f"c{i}") for i in range(10)], reps) / 10
        prompt_log.derived_problem = lambda r: None  # type: ignore[assignment]
        get_off = _best(lambda: [log.get(f"c{i}") for i in range(10)], reps) / 10
        prompt_log.derived_problem = real_derived
    size = len(record.messages[-1].content) / 1000
    return (
        f"| {kind} | {count} | {size:.0f} KB | {t_serialize * 1e3:.1f} | {t_verify * 1e3:.1f} | "
        f"{t_external * 1e3:.1f} | "
        f"{append_off * 1e3:.1f} | {append_on * 1e3:.1f} ({append_on / append_off:.1f}x) | "
        f"{get_off * 1e3:.1f} | {get_on * 1e3:.1f} ({get_on / get_off:.1f}x) |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", default="10,50", help="comma-separated chunk counts (each chunk ~2 KB)")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    columns = ["text", "chunks", "prompt", "serialize ms", "verify ms", "verify ms (external)", "append ms (off)"]
    print("| " + " | ".join([*columns, "append ms (on)", "get ms (off)", "get ms (on)"]) + " |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in TEXTS:
        for count in (int(n) for n in args.chunks.split(",")):
            print(_row(kind, count, args.reps), flush=True)


if __name__ == "__main__":
    main()
