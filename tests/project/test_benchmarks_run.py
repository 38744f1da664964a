"""Every benchmark script still runs: the scripts under ``benchmarks/`` are not imported by the library or the
tests, so a rename (``store=`` -> ``known_ids=``) or a template change broke two of them unnoticed once.

``--help`` of each one imports it whole (fast lane). The cheap ones also run end to end on tiny sizes (``slow``),
and must print their figures; the ones that need a model, a server or minutes stay out (``bench_generation``,
``bench_outlines``, ``bench_server_grammar``, ``bench_local_grammar``, ``bench_stream``, ``bench_wrap``,
``bench_audit``, ``bench_check_large``, ``bench_versions``): their imports are still checked here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("bench_*.py"))

TINY_RUNS = {
    "bench_guard.py": ["--answers", "5", "--repeat", "1"],
    "bench_policy.py": ["--per-class", "3"],
    "bench_review.py": ["--entries", "200", "--prompts", "20", "--requests", "3"],
    "bench_otel.py": ["--answers", "5", "--rounds", "1", "--no-phoenix"],
    "bench_audit_resume.py": ["--rows", "2000,4000"],
    "bench_import.py": ["--repeat", "1"],
    "bench_constraint_cold.py": ["--reps", "2", "--sizes", "10"],
    "bench_gateway.py": ["--requests", "10", "--rounds", "1", "--workers", "1", "--concurrency", "1", "4"],
    "bench_request_core.py": ["--claims", "3,5", "--rounds", "1"],
    "bench_integrations.py": ["--calls", "2", "--rounds", "1"],
    "bench_record_verify.py": ["--chunks", "3", "--reps", "1"],
    "bench_rank_once.py": ["--requests", "2"],
}
HEAVY = {  # a model, a server, a cluster or minutes: imported (--help) only
    "bench_generation.py",
    "bench_outlines.py",
    "bench_server_grammar.py",
    "bench_local_grammar.py",
    "bench_stream.py",
    "bench_wrap.py",
    "bench_audit.py",
    "bench_check_large.py",
    "bench_versions.py",
}


def _run(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=BENCHMARKS.parent,
    )


def test_every_benchmark_is_listed_here_or_named_as_too_heavy() -> None:
    assert len(SCRIPTS) >= 15
    assert set(TINY_RUNS) <= set(SCRIPTS)
    assert set(SCRIPTS) == set(TINY_RUNS) | HEAVY, "a new benchmark: give it a tiny run here, or name it heavy"


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_imports_and_explains_itself(script: str) -> None:
    done = _run(script, "--help", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(TINY_RUNS))
def test_the_cheap_benchmarks_run_end_to_end_on_tiny_sizes(script: str) -> None:
    done = _run(script, *TINY_RUNS[script], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if any(ch.isdigit() for ch in line)]
    assert len(rows) >= 2, f"{script} printed no figures:\n{done.stdout[-2000:]}"
