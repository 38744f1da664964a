"""``citelock check`` on large answers: wall time and peak memory, this tree against an older commit.

For each answer size (default 1, 10 and 50 MB) and shape — ``free`` (prose with ``[c-N]`` markers, one claim per
sentence) and ``structured`` (``{"claims": [...]}`` with quoted spans) — the script writes a deterministic answer
against one 20-chunk prompt and runs ``python -m citelock check --prompt P --answer A --json`` in a fresh
process, output discarded. It records the wall time, the process's peak resident memory (``ru_maxrss`` from
``wait4``) and the exit code. With ``--before REF`` the same runs are made on the ``src/`` of git revision REF
(extracted with ``git archive``), each stopped after ``--before-timeout`` seconds, and the ratios are printed.

Memory is also shown per input byte above a baseline: ``(peak - peak of a 1 KB answer) / answer size``.

Usage::

    python benchmarks/bench_check_large.py                          # 1, 10, 50 MB, this tree only
    python benchmarks/bench_check_large.py --before 87f05d7         # and the same on an older commit
    python benchmarks/bench_check_large.py --sizes 1,10 --shapes free
    python benchmarks/bench_check_large.py --sizes 1,10 --check-args "--judge lexical"   # the surface path
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
console = Console(width=160)

_SITES = ["north", "south", "harbour", "airport", "river", "depot", "market", "station", "bridge", "tower"]


def chunks(n: int = 20) -> list[dict[str, str]]:
    """``n`` chunks of three sentences each, with numbers and look-alike ids (c-1, c-10...)."""
    out = []
    for i in range(n):
        site = _SITES[i % len(_SITES)]
        out.append(
            {
                "id": f"c-{i + 1}",
                "text": f"Revenue at the {site} site grew {i + 3}% in {2010 + i}. "
                f"The {site} depot shipped {1000 + 7 * i} crates that year. "
                f"Freight for the {site} site is paid by the buyer.",
            }
        )
    return out


def prompt(n: int = 20) -> dict[str, object]:
    """The prompt as sent: a system message, the context with ``[id]`` headers, the question."""
    body = "\n".join(f"[{c['id']}] {c['text']}" for c in chunks(n))
    return {
        "messages": [
            {"role": "system", "content": "Answer from the context and cite it."},
            {"role": "user", "content": f"Context:\n{body}\nQuestion: How did the sites do?"},
        ],
        "chunks": chunks(n),
        "question": "How did the sites do?",
        "request_id": "bench-large",
    }


def free_text(size: int, n: int = 20) -> str:
    """About ``size`` characters of prose: cited sentences, a wrong number, an uncited sentence, paragraphs."""
    rng = random.Random(0)
    parts: list[str] = []
    total = 0
    sentence = 0
    while total < size:
        i = rng.randrange(n)
        site = _SITES[i % len(_SITES)]
        grew = i + 3 if sentence % 9 else i + 4  # every ninth paragraph misquotes a number
        text = (
            f"Revenue at the {site} site grew {grew}% in {2010 + i} [c-{i + 1}]. "
            f"The {site} depot shipped {1000 + 7 * i} crates that year [c-{i + 1}, c-{(i + 1) % n + 1}]. "
            f"Analysts expect the trend {sentence} to continue."
        )
        text += "\n\n" if sentence % 4 == 3 else " "
        parts.append(text)
        total += len(text)
        sentence += 1
    return "".join(parts)


def structured(size: int, n: int = 20) -> dict[str, object]:
    """About ``size`` bytes of ``{"claims": [...]}``: quoted spans, an id not in the prompt, an uncited claim."""
    rng = random.Random(0)
    claims: list[dict[str, object]] = []
    total = 0
    while total < size:
        i = rng.randrange(n)
        site = _SITES[i % len(_SITES)]
        k = len(claims)
        if k % 11 == 5:
            claim: dict[str, object] = {"text": f"The {site} site opened a new line {k}.", "citations": []}
        elif k % 13 == 7:
            claim = {"text": f"Revenue at the {site} site grew.", "citations": [{"chunk_id": f"c-{n + k}"}]}
        else:
            claim = {
                "text": f"Revenue at the {site} site grew {i + 3}% in {2010 + i}.",
                "citations": [{"chunk_id": f"c-{i + 1}", "span": f"Revenue at the {site} site grew {i + 3}%"}],
            }
        claims.append(claim)
        total += len(json.dumps(claim)) + 2
    return {"claims": claims}


@dataclass
class Run:
    """One measured process."""

    seconds: float
    peak_mb: float
    exit_code: int | None  # None: stopped at the timeout
    error: str = ""


def measure(src: Path, prompt_path: Path, answer_path: Path, timeout: float, extra: Sequence[str] = ()) -> Run:
    """Run ``citelock check`` on ``src``'s code in a fresh process; wall time, peak RSS, exit code."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "citelock",
                "check",
                "--prompt",
                str(prompt_path),
                "--answer",
                str(answer_path),
                "--json",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                proc.kill()
                _pid, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                return Run(time.perf_counter() - started, usage.ru_maxrss / 1024, None)
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        message = err.read().decode("utf-8", "replace").strip().splitlines()
    code = proc.returncode
    return Run(seconds, usage.ru_maxrss / 1024, code, "" if code in (0, 1) else (message or ["?"])[-1][:80])


def checkout(ref: str, into: Path) -> Path:
    """Extract ``src/`` of git revision ``ref`` into ``into``; returns the folder to put on PYTHONPATH."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def write_answer(shape: str, size: int, path: Path) -> None:
    """Write one answer file (run in a child process: see :func:`_generate`)."""
    data = {"text": free_text(size)} if shape == "free" else structured(size)
    path.write_text(json.dumps(data), encoding="utf-8")


def _generate(shape: str, size: int, path: Path) -> None:
    """Write the answer in a separate process, so this one stays small.

    A child's ``ru_maxrss`` counts the resident memory of the process it was started from (the address space
    it replaces at ``exec``): had this process built a 50 MB answer itself, every later measurement would start
    from its peak.
    """
    subprocess.run([sys.executable, __file__, "--write-answer", shape, str(size), str(path)], check=True)


def main() -> None:
    if sys.argv[1:2] == ["--write-answer"]:
        write_answer(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50", help="answer sizes in MB, comma-separated")
    parser.add_argument("--shapes", default="free,structured", help="free, structured (comma-separated)")
    parser.add_argument("--before", default=None, help="git revision to measure the same way (e.g. a commit)")
    parser.add_argument("--before-timeout", type=float, default=300.0, help="seconds before a run is stopped")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run of this tree is stopped")
    parser.add_argument(
        "--check-args", default="", help='more options for check, e.g. "--judge lexical" (the surface path)'
    )
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    shapes = [s.strip() for s in args.shapes.split(",")]
    extra = shlex.split(args.check_args)
    with tempfile.TemporaryDirectory(prefix="citelock-bench-") as tmp:
        work = Path(tmp)
        trees = {"now": ROOT / "src"}
        if args.before:
            (work / "before").mkdir()
            trees["before"] = checkout(args.before, work / "before")
        prompt_path = work / "prompt.json"
        prompt_path.write_text(json.dumps(prompt()), encoding="utf-8")
        tiny = work / "tiny.json"
        tiny.write_text(json.dumps(structured(1000)), encoding="utf-8")
        tiny_runs = {name: measure(src, prompt_path, tiny, 120, extra) for name, src in trees.items()}
        base = {name: run.peak_mb for name, run in tiny_runs.items()}
        console.print(f"a 1 KB answer takes {tiny_runs['now'].seconds:.1f} s (start-up)", highlight=False)
        rows = []
        for shape in shapes:
            for size in sizes:
                n = int(size * 1_000_000)
                path = work / f"{shape}-{size:g}MB.json"
                _generate(shape, n, path)
                actual = path.stat().st_size
                runs = {}
                for name, src in trees.items():
                    timeout = args.timeout if name == "now" else args.before_timeout
                    runs[name] = measure(src, prompt_path, path, timeout, extra)
                    line = f"{shape} {size:g} MB ({name}): {_fmt_run(runs[name], timeout)}"
                    console.print(line, highlight=False, markup=False)
                rows.append((shape, actual, runs))
                path.unlink()
        _print(rows, base, args)


def _fmt_run(run: Run, timeout: float) -> str:
    if run.exit_code is None:
        return f"stopped at {timeout:.0f} s ({run.peak_mb:.0f} MB so far)"
    return f"{run.seconds:.1f} s, {run.peak_mb:.0f} MB peak, exit {run.exit_code} {run.error}".rstrip()


def _print(rows: list[tuple[str, int, dict[str, Run]]], base: dict[str, float], args: argparse.Namespace) -> None:
    title = f"citelock check --json {args.check_args} on large answers (20-chunk prompt; fresh process per run)"
    table = Table(title=" ".join(title.split()))
    for column in ("shape", "answer MB", "time (s)", "MB/s", "peak RSS (MB)", "bytes / input byte", "exit"):
        table.add_column(column, justify="right")
    if args.before:
        for column in (f"time {args.before}", f"peak {args.before}", "time ratio", "memory ratio"):
            table.add_column(column, justify="right")
    for shape, size, runs in rows:
        now = runs["now"]
        mb = size / 1e6
        cells = [
            shape,
            f"{mb:.1f}",
            f"{now.seconds:.1f}" if now.exit_code is not None else f">{args.timeout:.0f}",
            f"{mb / now.seconds:.2f}" if now.exit_code is not None else "-",
            f"{now.peak_mb:.0f}",
            f"{(now.peak_mb - base['now']) * 1024 * 1024 / size:.0f}",
            str(now.exit_code) if now.exit_code is not None else "stopped",
        ]
        if args.before:
            old = runs["before"]
            stopped = old.exit_code is None
            cells += [
                f">{args.before_timeout:.0f} (stopped)" if stopped else f"{old.seconds:.1f}",
                f"{old.peak_mb:.0f} so far" if stopped else f"{old.peak_mb:.0f}",
                f">{old.seconds / now.seconds:.1f}x" if stopped else f"{old.seconds / now.seconds:.1f}x",
                "n/a (stopped)" if stopped else f"{old.peak_mb / now.peak_mb:.1f}x",
            ]
        table.add_row(*cells)
    console.print(table)
    console.print(
        f"baseline peak RSS (a 1 KB answer): now {base['now']:.0f} MB"
        + (f", {args.before} {base['before']:.0f} MB" if args.before else "")
        + f"; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs visible",
        highlight=False,
    )


if __name__ == "__main__":
    main()
