"""Each framework guide's example runs as written and prints what the guide says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _block(page: str, heading: str, lang: str) -> str:
    text = (ROOT / "docs" / "guides" / page).read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    match = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert match, f"no {lang} block after {heading!r} in {page}"
    return match.group(1)


@pytest.mark.parametrize(
    ("page", "framework"),
    [("langchain.md", "langchain_core"), ("llamaindex.md", "llama_index.core"), ("haystack.md", "haystack")],
)
def test_the_guide_example_runs_and_prints_what_the_guide_shows(page: str, framework: str, tmp_path: Path) -> None:
    pytest.importorskip(framework)
    (tmp_path / "example.py").write_text(_block(page, "## Example", "python"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout == _block(page, "It prints:", "text")
