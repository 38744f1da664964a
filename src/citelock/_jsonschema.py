"""Versioned JSON Schemas of the records, exported to ``schemas/`` (``python -m citelock._jsonschema``).

A test checks that the committed files equal what the models generate, so a record change without a schema
change (or the reverse) fails CI. Bump a record's version when its shape changes incompatibly, and keep the
previous version's file in :data:`FROZEN_SCHEMAS` while its records still read.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["FROZEN_SCHEMAS", "RECORD_SCHEMAS", "record_schemas", "schemas_dir", "write_schemas"]

# file stem -> (module, class name, version); modules are imported lazily so optional parts stay optional.
RECORD_SCHEMAS: dict[str, tuple[str, str, str]] = {
    "chunk": ("citelock.records", "Chunk", "1"),
    "context": ("citelock.records", "Context", "1"),
    "prompt_record": ("citelock.records", "PromptRecord", "1"),
    "answer": ("citelock.records", "Answer", "1"),
    "finding": ("citelock.records", "Finding", "1"),
    "guard_report": ("citelock.records", "GuardReport", "1"),
    "verdict": ("citelock.records", "Verdict", "1"),
    "queue_entry": ("citelock.store._queue", "QueueEntry", "1"),
    "guarded_answer": ("citelock.pipeline", "GuardedAnswer", "2"),
    "guard_result": ("citelock.guard._result", "GuardResult", "1"),
    "audit_row": ("citelock.audit._rows", "AuditRow", "1"),
    "audit_answer": ("citelock.audit._rows", "AnswerRow", "1"),
}

# Schemas of earlier versions, kept as committed (never regenerated): records of these versions still read
# (``GuardedAnswer.model_validate`` upgrades a version-1 record).
FROZEN_SCHEMAS: tuple[str, ...] = ("guarded_answer.v1.json",)

_PACKAGE_SCHEMAS = Path(__file__).parent / "schemas"
_SOURCE_SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def schemas_dir() -> Path:
    """The folder of the exported schemas (inside the wheel, else the source checkout's ``schemas/``)."""
    return _PACKAGE_SCHEMAS if _PACKAGE_SCHEMAS.is_dir() else _SOURCE_SCHEMAS


def record_schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema for every registered record."""
    out: dict[str, dict[str, Any]] = {}
    for stem, (module, name, version) in RECORD_SCHEMAS.items():
        model = getattr(importlib.import_module(module), name)
        schema = model.model_json_schema(mode="serialization")
        schema["$id"] = f"urn:citelock:schema:{stem}:v{version}"
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        out[f"{stem}.v{version}.json"] = schema
    return out


def write_schemas(folder: Path | None = None) -> list[Path]:
    """Write every schema to ``folder`` (default: the source checkout's ``schemas/``)."""
    target = folder or _SOURCE_SCHEMAS
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in record_schemas().items():
        path = target / name
        path.write_text(json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write_schemas(Path(sys.argv[1]) if len(sys.argv) > 1 else None):
        print(written_path.name)
