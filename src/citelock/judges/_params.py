"""Loading the judges' shipped parameters (JSON next to this module, written by ``scripts/train_judge.py``)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from citelock.errors import RuntimeFailure

__all__ = ["PARAMS_DIR", "load_params"]

PARAMS_DIR = Path(__file__).resolve().parent / "params"


@lru_cache(maxsize=8)
def load_params(name: str) -> dict[str, Any]:
    """Read ``params/<name>.json``.

    Raises:
        RuntimeFailure: the file is missing or not a JSON object (a broken installation).
    """
    path = PARAMS_DIR / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RuntimeFailure(
            f"judge parameters {path.name}: expected a JSON file shipped with citelock ({exc})"
        ) from None
    if not isinstance(data, dict):
        raise RuntimeFailure(f"judge parameters {path.name}: expected a JSON object, got {type(data).__name__}")
    return data
