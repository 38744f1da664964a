"""``citelock audit`` throughput: the local engine on 1 and 2 processes and the Ray engine, with and without a judge.

Run: python benchmarks/bench_audit.py [--answers 10000] [--quick] [--seed 0] [--engines local1,local2,ray]
(the Ray rows need ``pip install -e ".[ray]"``)

The script writes ``--answers`` exported rows (``schemas/audit_row.v1.json``) to a temporary JSONL file once:
prompts of 10-20 chunks (~10-30 KB as sent, assembled by citelock), answers of 3-8 cited claims with verbatim
spans (free text with ``[id]`` markers in a quarter of them), a fabricated id in one answer in ten, an uncited
factual sentence in one in five. Then it audits that file through the public entry point,
``citelock.audit.run_audit`` (the function behind ``citelock audit``), into a fresh out directory and SQLite
database per run:

- ``local``, 1 process: everything in this process.
- ``local``, 2 processes: a process pool (the driver reads, commits and waits).
- ``ray``: the Ray engine on a local Ray started here with 2 CPUs (``ray.init(num_cpus=2)``; its start-up is timed
  apart and not counted in the run); the pipeline's actors start inside the timed run.

each without a judge (the free checks: provenance, coverage, numbers) and with the offline judge on a surface
(``--surface bench --judge offline``: high stakes, every surviving citation judged, findings queued, results
stored). A row of the table is one run: answers/s = answers / wall seconds of ``run_audit``. ``driver CPU s`` is
this process's CPU time during the run (for the pool and Ray: reading, decoding, committing; the workers are
apart), the figure that bounds what one driver can feed. Runs on a shared machine are noisy: ratios are from one
run each, and the load average before each run is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import citelock
from citelock.audit import AuditSettings, run_audit

WORDS = (
    "revenue margin freight clause buyer seller insurance policy dosage patient trial court appeal statute "
    "contract liability warranty invoice shipment carrier tariff premium claim coverage deductible quarter "
    "forecast supplier inventory audit budget report region customer contract renewal"
).split()


def make_row(rng: random.Random, index: int) -> dict[str, Any]:
    """One exported row: the prompt as sent (assembled by citelock), its chunks and an answer."""
    n_chunks = rng.randint(10, 20)
    chunks = []
    for k in range(n_chunks):
        words: list[str] = []
        target = rng.randint(700, 1400)
        while sum(len(w) + 1 for w in words) < target:
            words.append(rng.choice(WORDS))
            if rng.random() < 0.08:
                words[-1] += f" {rng.randint(1, 999)}."
        chunks.append({"id": f"doc{index}-{k}", "text": " ".join(words).capitalize() + "."})
    question = f"What does the contract say about {rng.choice(WORDS)} (ticket {index})?"
    record = citelock.serialize(citelock.assemble(question, chunks))
    claims = []
    for k in range(rng.randint(3, 8)):
        chunk = rng.choice(chunks)
        words = chunk["text"].split(" ")
        start = rng.randrange(0, len(words) - 10)
        span = " ".join(words[start : start + rng.randint(5, 9)])  # a verbatim quote, whole words
        cid = chunk["id"] if not (k == 1 and index % 10 == 3) else f"doc{index}-99"  # a fabricated id
        claims.append({"text": f"The source states that {span}.", "citations": [{"chunk_id": cid, "span": span}]})
    if index % 5 == 2:
        claims.append({"text": f"The buyer always pays {rng.randint(2, 90)} percent of the freight."})
    answer: Any = {"claims": claims}
    if index % 4 == 1:  # free text with markers: no spans to check, the claims are the sentences
        answer = " ".join(
            f"{c['text']} [{c['citations'][0]['chunk_id']}]" if "citations" in c else c["text"] for c in claims
        )
    return {
        "messages": [m.model_dump() for m in record.messages],
        "chunks": chunks,
        "question": question,
        "answer": answer,
    }


def write_rows(path: Path, n: int, seed: int) -> float:
    """Write ``n`` rows; returns the mean prompt size in KB."""
    rng = random.Random(seed)
    chars = 0
    with path.open("w", encoding="utf-8") as handle:
        for index in range(n):
            row = make_row(rng, index)
            chars += sum(len(m["content"]) for m in row["messages"])
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return chars / n / 1000


@dataclass
class Run:
    engine: str
    processes: str
    judge: str
    answers: int
    seconds: float
    driver_cpu: float
    load: float

    @property
    def rate(self) -> float:
        return self.answers / self.seconds


def run(engine: str, processes: int, judge: str, rows: Path, work: Path, batch: int) -> Run:
    label = f"{engine}{processes}-{judge}"
    out, db = work / f"out-{label}", work / f"{label}.db"
    shutil.rmtree(out, ignore_errors=True)
    settings = AuditSettings(surface="bench", judge="offline") if judge == "offline" else AuditSettings()
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    summary = run_audit(
        [str(rows)],
        out=out,
        db=str(db),
        settings=settings,
        engine="ray" if engine == "ray" else "local",
        processes=processes if engine == "local" else None,
        batch_size=batch,
    )
    seconds, driver_cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert summary.complete and summary.figures.bad_rows == 0, summary.figures
    figures = summary.figures
    findings = dict(sorted(figures.findings_by_reason.items()))
    calls = figures.judge.get("judge_calls", 0)
    print(
        f"  {label}: {figures.answers} answers in {seconds:.1f} s; passed {figures.passed}, findings {findings}, "
        f"judge calls {calls}",
        file=sys.stderr,
    )
    workers = str(processes) if engine == "local" else f"{processes} CPUs"
    return Run(engine, workers, judge, figures.answers, seconds, driver_cpu, load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 answers: to try the script")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--judges", default="none,offline", help="comma-separated: none, offline")
    parser.add_argument("--engines", default="local1,local2,ray", help="comma-separated: local1, local2, ray")
    args = parser.parse_args()
    n = 1_000 if args.quick else args.answers
    engines = args.engines.split(",")
    judges = args.judges.split(",")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        work = Path(tmp)
        rows = work / "rows.jsonl"
        t0 = time.perf_counter()
        kb = write_rows(rows, n, args.seed)
        print(
            f"wrote {n} rows ({rows.stat().st_size / 1e6:.0f} MB, prompts ~{kb:.0f} KB) in "
            f"{time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
        )
        runs: list[Run] = []
        for judge in judges:
            for engine in ("local1", "local2"):
                if engine in engines:
                    runs.append(run("local", int(engine[-1]), judge, rows, work, args.batch_size))
        ray_start = None
        if "ray" in engines:
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            ray_start = time.perf_counter() - t0
            try:
                for judge in judges:
                    runs.append(run("ray", 2, judge, rows, work, args.batch_size))
            finally:
                ray.shutdown()
    total = time.perf_counter() - started
    print_table(runs, n, kb, args.seed, ray_start, total)


def print_table(runs: list[Run], n: int, kb: float, seed: int, ray_start: float | None, total: float) -> None:
    print(f"{n} answers (prompts ~{kb:.0f} KB, 10-20 chunks, 3-8 cited claims); seed {seed}; {os.cpu_count()} cores")
    print(
        f"| {'engine':6} | {'processes':9} | {'judge':7} | {'answers':>7} | {'seconds':>7} | {'answers/s':>9} | "
        f"{'vs 1 process':>12} | {'driver CPU s':>12} | {'load before':>11} |"
    )
    print(f"|{'-' * 8}|{'-' * 11}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 11}|{'-' * 14}|{'-' * 14}|{'-' * 13}|")
    base = {r.judge: r.rate for r in runs if r.engine == "local" and r.processes == "1"}
    for r in runs:
        ratio = f"{r.rate / base[r.judge]:.2f}x" if r.judge in base else "-"
        print(
            f"| {r.engine:6} | {r.processes:9} | {r.judge:7} | {r.answers:7d} | {r.seconds:7.1f} | {r.rate:9.1f} | "
            f"{ratio:>12} | {r.driver_cpu:12.1f} | {r.load:11.2f} |"
        )
    for judge, rate in base.items():
        two = [r.rate for r in runs if r.judge == judge and r.engine == "local" and r.processes == "2"]
        if two:
            print(f"scaling, local engine, judge {judge}: 2 processes / 1 process = {two[0] / rate:.2f}x")
    if ray_start is not None:
        print(f"Ray start-up (ray.init, 2 CPUs), not in the runs above: {ray_start:.1f} s")
    print(f"total runtime of the benchmark: {total / 60:.1f} min")


if __name__ == "__main__":
    main()
