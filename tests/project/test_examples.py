"""The client guide's tour (the README shows the same snippet) and the examples run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_answer_example_runs_with_the_fake_backend(tmp_path: Path) -> None:
    out = _run([str(ROOT / "examples" / "answer_example.py"), "--fake"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "The bridge spans 880 meters.[1]" in out.stdout
    assert "decision: pass; findings: []" in out.stdout
    assert (tmp_path / ".citelock" / "citelock.db").is_file()  # the prompt log and the queue were written


def test_audit_example_runs_as_the_audit_guide_says(tmp_path: Path) -> None:
    args = ["-m", "citelock", "audit", str(ROOT / "examples" / "traffic.jsonl"), "--out", "audit-out"]
    out = _run(
        [*args, "--surface", "support", "--judge", "lexical", "--on-fail", "drop_claim", "--db", "audit.db"], tmp_path
    )
    assert out.returncode == 2, out.stderr  # one row cannot be audited
    assert "audited 5 answers, 1 bad row" in out.stdout and "passed: 1 of 5" in out.stdout
    assert "traffic.jsonl row 6: answer:" in out.stderr
    listed = _run(["-m", "citelock", "queue", "list", "--db", "audit.db", "--json"], tmp_path)
    counts = json.loads(listed.stdout)["counts"]
    for reason in ("ID_NOT_IN_PROMPT", "NUMBER_MISMATCH", "UNCITED_CLAIM", "SPAN_TRUNCATED"):
        assert counts.get(reason) == 1, (reason, counts)


def tour_snippet(page: str, heading: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


@pytest.mark.local_model
def test_client_guide_tour_runs_on_the_bundled_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
    (tmp_path / "tour.py").write_text(tour_snippet("docs/guides/client.md", "# The client"), encoding="utf-8")
    out = _run(["tour.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    decision = out.stdout.strip().splitlines()[-1].split()[0]
    assert decision in ("pass", "repaired", "block")
    assert (tmp_path / ".citelock" / "citelock.db").is_file()


@pytest.mark.local_model
def test_outlines_example_runs_on_the_bundled_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
    pytest.importorskip("outlines", reason="the outlines extra is not installed: pip install 'citelock[outlines]'")
    out = _run([str(ROOT / "examples" / "outlines_example.py")], tmp_path)
    assert out.returncode == 0, out.stderr
    # what the constraint guarantees, whatever the model chose to answer (it may abstain)
    assert "enforced: True; policy: substring; decision: " in out.stdout.splitlines()[-1]
