"""What `import citelock` costs, beside what the full pipeline costs, measured in fresh interpreters.

Each statement runs in a new Python process (no warm module cache inside the process; the OS file cache is warm
after the first round) ``--repeat`` times; the table prints the median wall time, the citelock modules loaded,
whether SQLAlchemy / numpy / an SDK were loaded, and the ratio to the full import measured in the same run.

    python benchmarks/bench_import.py [--repeat 9] [--src PATH]

``--src`` measures another checkout's ``src`` (e.g. the commit before the re-layering) the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

STATEMENTS = {
    "import citelock": "import citelock",
    "citelock.Chunk (records)": "import citelock; citelock.Chunk",
    "citelock.check (guard)": "import citelock; citelock.check",
    "citelock.Citelock (full pipeline)": "import citelock; citelock.Citelock",
}
FALLBACK = {"citelock.Citelock (full pipeline)": "import citelock; citelock.answer"}
PROBE = """
import sys, time, json
t = time.perf_counter()
{stmt}
elapsed = time.perf_counter() - t
heavy = [m for m in ("sqlalchemy", "numpy", "openai", "instructor", "llama_cpp", "httpx") if m in sys.modules]
print(json.dumps({{"s": elapsed, "modules": sum(m.startswith("citelock") for m in sys.modules), "heavy": heavy}}))
"""


def measure(statement: str, repeat: int, src: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", PROBE.format(stmt=statement)], env=env, capture_output=True, text=True, check=False
        )
        if out.returncode != 0:
            return {"error": out.stderr.strip().splitlines()[-1]}
        runs.append(json.loads(out.stdout))
    return {
        "s": statistics.median(r["s"] for r in runs),
        "modules": runs[-1]["modules"],
        "heavy": runs[-1]["heavy"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    args = parser.parse_args()
    rows = {}
    for label, stmt in STATEMENTS.items():
        row = measure(stmt, args.repeat, args.src)
        if "error" in row and label in FALLBACK:
            row = measure(FALLBACK[label], args.repeat, args.src)
        rows[label] = row
    full = rows["citelock.Citelock (full pipeline)"].get("s")
    table = Table(title=f"import cost, median of {args.repeat} fresh interpreters ({args.src})")
    for col in ("statement", "median ms", "citelock modules", "heavy deps loaded", "ratio to full"):
        table.add_column(col, justify="left" if col in ("statement", "heavy deps loaded") else "right")
    for label, row in rows.items():
        if "error" in row:
            table.add_row(label, "—", "—", str(row["error"]), "—")
            continue
        seconds = float(row["s"])  # type: ignore[arg-type]
        ratio = f"{seconds / float(full):.2f}" if isinstance(full, float) and full > 0 else "—"
        heavy = ", ".join(row["heavy"]) or "none"  # type: ignore[arg-type]
        table.add_row(label, f"{seconds * 1000:.0f}", str(row["modules"]), heavy, ratio)
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
