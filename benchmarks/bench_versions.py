"""Two versions of citelock on the same benchmark, in one run: before/after ratios for a change.

Run: python benchmarks/bench_versions.py --base OLD/src [--head src] [--rounds 3] [--bench bench_guard.py] -- [ARGS]

``--base`` and ``--head`` are ``src`` folders of two checkouts (e.g. ``git worktree add ../base main``). The same
benchmark script (``--bench``, which must accept ``--json``) runs with ``PYTHONPATH`` set to each tree in turn,
``--rounds`` times, alternating base and head so that a busy machine slows both alike; each row's p50 is the
median over the rounds. Only the library changes between the two runs, never the benchmark's code or inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(bench: Path, src: Path, args: list[str]) -> dict[str, dict[str, float]]:
    """One run of ``bench --json`` with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, str(bench), *args, "--json"], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{bench.name} with PYTHONPATH={src} failed:\n{out.stderr}")
    rows: dict[str, dict[str, float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the src folder of the version before")
    parser.add_argument("--head", type=Path, default=HERE.parent / "src", help="the src folder after (this tree)")
    parser.add_argument("--bench", default="bench_guard.py", help="a script in benchmarks/ that accepts --json")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("bench_args", nargs="*", help="passed to the benchmark (after --)")
    args = parser.parse_args()
    bench = HERE / args.bench
    for label, src in (("base", args.base), ("head", args.head)):
        if not (src / "citelock" / "__init__.py").is_file():
            raise SystemExit(f"--{label} {src}: expected a src folder holding citelock/__init__.py")
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"base": [], "head": []}
    for _ in range(args.rounds):
        runs["base"].append(run(bench, args.base.resolve(), args.bench_args))
        runs["head"].append(run(bench, args.head.resolve(), args.bench_args))
    names = [n for n in runs["base"][0] if n in runs["head"][0]]
    print(f"{bench.name} {' '.join(args.bench_args)}: {args.rounds} rounds, base and head alternating; median p50")
    print(f"| {'row':34} | {'base p50 ms':>11} | {'head p50 ms':>11} | {'head speed-up':>13} |")
    print(f"|{'-' * 36}|{'-' * 13}|{'-' * 13}|{'-' * 15}|")
    for name in names:
        base = statistics.median(r[name]["p50_ms"] for r in runs["base"])
        head = statistics.median(r[name]["p50_ms"] for r in runs["head"])
        print(f"| {name:34} | {base:11.3f} | {head:11.3f} | {base / head:12.2f}x |")
    print("(speed-up = base p50 / head p50; >1 means head is faster; rows that do not use citelock should stay ~1)")


if __name__ == "__main__":
    main()
