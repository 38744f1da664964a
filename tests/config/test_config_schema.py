"""Every key of the schema: a misspelling of it gets a suggestion; the docs' reference page and guide are current."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from citelock.config import NAME, STARTER, schema_key_paths, unknown_keys
from citelock.config._schema import AuditConfig
from citelock.guard import AuditPlan
from support.scripts_loader import load_script

ROOT = Path(__file__).resolve().parents[2]
PATHS = schema_key_paths()


def _misspelled(key: str) -> str:
    """Two different neighbouring letters swapped, nearest the middle of the key (``stakes`` -> ``staeks``)."""
    middle = max(1, len(key) // 2 - 1)
    i = min((j for j in range(1, len(key) - 1) if key[j] != key[j + 1]), key=lambda j: abs(j - middle))
    return key[:i] + key[i + 1] + key[i] + key[i + 2 :]


def _nest(path: tuple[str, ...], leaf: Any) -> dict[str, Any]:
    data: Any = leaf
    for part in reversed(path):
        data = {("entry" if part == NAME else part): data}
    return data


def test_the_schema_has_the_keys_the_issue_names() -> None:
    joined = {".".join(p) for p in PATHS}
    for key in ("store", "default_surface", "judges.NAME.kind", "judges.NAME.routing", "judges.NAME.thresholds",
                "backends.NAME.api_key", "backends.NAME.server", "surfaces.NAME.inherit", "surfaces.NAME.stakes",
                "surfaces.NAME.on_fail", "surfaces.NAME.sample_rate", "surfaces.NAME.relevance",
                "surfaces.NAME.abstain_below", "surfaces.NAME.judge", "surfaces.NAME.routing",
                "surfaces.NAME.audit.seed", "surfaces.NAME.stream.show", "surfaces.NAME.alarms.window"):  # fmt: skip
        assert key in joined, key
    assert len(PATHS) > 40


@pytest.mark.parametrize("path", PATHS, ids=[".".join(p) for p in PATHS])
def test_a_misspelling_of_every_key_gets_a_suggestion(path: tuple[str, ...]) -> None:
    wrong = _misspelled(path[-1])
    assert wrong != path[-1]
    (unknown,) = unknown_keys(_nest((*path[:-1], wrong), "x"))
    assert unknown.suggestion == path[-1], unknown.message()
    assert f"did you mean {path[-1]!r}?" in unknown.message()


def test_the_audit_table_is_the_audit_plan() -> None:
    assert list(AuditConfig.model_fields) == list(AuditPlan.model_fields)
    assert AuditConfig().model_dump() == AuditPlan().model_dump()


def test_the_reference_page_is_the_generated_one() -> None:
    script = load_script("gen_config_reference")
    page = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    assert page == script.config_reference(), "docs/reference/config.md is stale: run scripts/gen_config_reference.py"
    for path in PATHS:
        assert f"`{'.'.join(path)}`" in page, path


def test_the_guide_shows_the_starter_file() -> None:
    guide = (ROOT / "docs" / "guides" / "configuration.md").read_text(encoding="utf-8")
    assert STARTER in guide, "docs/guides/configuration.md must show the starter file `citelock config init` writes"
