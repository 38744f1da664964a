"""Memory of resuming a large audit: committed keys in a Python set (as before) or in the on-disk key index.

Run: python benchmarks/bench_audit_resume.py [--rows 100000,1000000] [--quick]

For each size N the script writes an input of N small exported rows (JSONL), reads it with
``citelock.audit.read_items`` and commits one report row per item through ``citelock.audit.AuditSink`` (what an
audit that ran to the end leaves in its out directory; the guard itself is not run: this measures the resume, not
the audit). Then, each in a fresh process, it resumes that audit three ways and measures the process's resident
memory (``/proc/self/statm``) from just before the sink is opened to the end of the resume, with everything the
resume built still held (the set, the sink, its index's page cache):

- ``open``: the sink opened (every part's metadata read, the figures summed) and the input read through, nothing
  filtered: the floor the two others share;
- ``set``: every committed key loaded into a Python set from the parts' metadata (``_parts/*.json``), then each
  item looked up in it: what the sink and both engines did before the key index;
- ``index``: each item looked up in the on-disk index (``AuditSink.todo``), what both engines do now.

What looking the keys up adds is the row's figure minus ``open``; ``ratio`` is set / index of that. Every resume
must find every item committed (the script checks it). Seconds are wall time of the whole resume process, on a
2-core machine shared with other work: noisy, for orientation only. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from citelock.audit import AuditSink, read_items
from citelock.audit._work import AuditOutcome, error_report


def write_input(path: Path, rows: int) -> None:
    """N small exported rows (the audit of each is not run here: only their keys matter)."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            row = {"messages": [{"role": "user", "content": f"question {i}"}], "chunks": [], "answer": f"a{i}"}
            handle.write(json.dumps(row) + "\n")


def commit_all(path: Path, out: Path) -> None:
    """Commit one report row per input row, in parts of the default size, as a finished audit would."""
    with AuditSink(out, manifest={"bench": str(path)}, inputs=[str(path.resolve())]) as sink:
        batch: list[AuditOutcome] = []
        for item in read_items([str(path)]):
            report = error_report(item.key, item.source, item.row, "not audited", request_id=None, policy=False)
            batch.append(AuditOutcome(item.key, item.source, item.row, report))
            if len(batch) >= 2048:
                sink.commit(batch)
                batch = []
        sink.commit(batch)


def resident_mib() -> float:
    """This process's resident memory now, in MiB."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def resume(path: str, out: str, how: str) -> None:
    """One resume, in this (fresh) process; prints JSON: resident MiB it added, items left to do."""
    before = resident_mib()
    done: set[str] = set()
    with AuditSink(out, manifest={"bench": path}, inputs=[str(Path(path).resolve())]) as sink:
        items = read_items([path])
        if how == "open":
            left = -sum(1 for _ in items)
        elif how == "set":
            for meta in sorted((Path(out) / "_parts").glob("part-*.json")):
                done.update(json.loads(meta.read_text(encoding="utf-8"))["keys"])
            left = sum(1 for item in items if item.key not in done)
        else:
            left = sum(1 for _ in sink.todo(items))
        added = resident_mib() - before  # the sink (and its index) still open, the set still held
    print(json.dumps({"added_mib": added, "left": left, "held": len(done)}))


def measure(path: Path, out: Path, how: str) -> tuple[float, int, float]:
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, __file__, "--resume", str(path), str(out), how], capture_output=True, text=True, check=True
    )
    seconds = time.perf_counter() - started
    data = json.loads(run.stdout)
    return float(data["added_mib"]), int(data["left"]), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000", help="input sizes, comma-separated")
    parser.add_argument("--quick", action="store_true", help="one size of 50,000 rows")
    parser.add_argument("--resume", nargs=3, metavar=("INPUT", "OUT", "HOW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.resume:
        resume(*args.resume)
        return
    sizes = [50_000] if args.quick else [int(n) for n in args.rows.split(",")]
    print(f"{'rows':>10} {'open MiB':>9} {'set MiB':>8} {'index MiB':>10} {'set-open':>9} {'index-open':>11} "
          f"{'ratio':>6} {'set B/row':>10} {'set s':>6} {'index s':>8}")  # fmt: skip
    for rows in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-resume-") as temp:
            path, out = Path(temp) / "rows.jsonl", Path(temp) / "out"
            write_input(path, rows)
            commit_all(path, out)
            base, total, _ = measure(path, out, "open")
            assert -total == rows, total
            with_set, left_set, set_s = measure(path, out, "set")
            with_index, left_index, index_s = measure(path, out, "index")
            assert left_set == left_index == 0, (left_set, left_index)  # every item is found committed
            add_set, add_index = with_set - base, with_index - base
            ratio = add_set / add_index if add_index > 0 else float("inf")
            print(
                f"{rows:>10,} {base:>9.1f} {with_set:>8.1f} {with_index:>10.1f} {add_set:>9.1f} {add_index:>11.1f} "
                f"{ratio:>6.1f} {add_set * 2**20 / rows:>10.0f} {set_s:>6.1f} {index_s:>8.1f}"
            )


if __name__ == "__main__":
    main()
