"""One seam between the doors and the request core (issue #36): every door runs its request through
``citelock._request.Runner``, and only the runner appends to the prompt log."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "citelock"
DOORS = [PACKAGE / "pipeline.py", *sorted((PACKAGE / "_wrap").glob("*.py"))]


def test_only_the_runner_appends_to_the_prompt_log() -> None:
    appends = re.compile(r"\blog\)?\.append\(")
    offenders = [str(p.relative_to(PACKAGE)) for p in DOORS if appends.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
    assert appends.search((PACKAGE / "_request.py").read_text(encoding="utf-8"))


def test_the_doors_use_the_runner_and_no_private_attribute_of_the_client() -> None:
    for path in DOORS:
        text = path.read_text(encoding="utf-8")
        assert "Runner(" in text or path.name in ("__init__.py", "_model.py", "_request.py", "_stream.py"), path
        assert not re.search(r"_citelock\._[a-z]", text), f"{path.name} reaches into Citelock's private attributes"
