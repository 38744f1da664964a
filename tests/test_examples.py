"""The README's tour and the examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_answer_example_runs_with_the_fake_backend(tmp_path: Path) -> None:
    out = _run([str(ROOT / "examples" / "answer_example.py"), "--fake"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "The bridge spans 880 meters.[1]" in out.stdout
    assert "decision: pass; findings: []" in out.stdout
    assert (tmp_path / ".citelock" / "citelock.db").is_file()  # the prompt log and the queue were written


def tour_snippet(heading: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


@pytest.mark.local_model
def test_readme_tour_client_runs_on_the_bundled_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
    (tmp_path / "tour.py").write_text(tour_snippet("### Wrap your generation call"), encoding="utf-8")
    out = _run(["tour.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    decision = out.stdout.strip().splitlines()[-1].split()[0]
    assert decision in ("pass", "repaired", "block")
    assert (tmp_path / ".citelock" / "citelock.db").is_file()
