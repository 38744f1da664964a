"""Routing a judge's score to ``pass``, ``review`` or ``fail`` with two calibrated thresholds.

A judge returns a verdict and a score (higher = more likely supported). A surface does not trust the label
alone: it routes the score with two thresholds, ``fail_below <= pass_at``:

- ``score >= pass_at``      -> ``pass``   (the claim is served as verified)
- ``score <  fail_below``   -> ``fail``   (the surface's ``on_fail`` applies; the finding is queued)
- otherwise                 -> ``review`` (a stronger judge when one is configured, else the review queue)

The thresholds are chosen on labeled data for a target false-pass rate (human partial/no routed to pass) and
a target false-fail rate (human yes routed to fail); see :func:`citelock.evals.fit_routing` for the method and
its finite-sample guarantee. A :class:`Routing` is plain data: it is saved to and loaded from a calibration
file (JSON), one routing per surface name plus an optional ``"*"`` default.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from citelock.errors import InputError
from citelock.judges._params import PARAMS_DIR

__all__ = [
    "CALIBRATION_FILE_VERSION",
    "Route",
    "Routing",
    "load_calibration",
    "load_surface_routing",
    "save_calibration",
    "shipped_routing",
]

Route = Literal["pass", "review", "fail"]
CALIBRATION_FILE_VERSION: Literal["1"] = "1"


class Routing(BaseModel):
    """Two score thresholds and where they came from.

    Attributes:
        pass_at: Scores at or above this pass (``inf``: nothing passes).
        fail_below: Scores below this fail; scores in ``[fail_below, pass_at)`` go to review (``-inf``: nothing
            fails).
        judge: Name of the judge whose scores these thresholds apply to.
        judge_version: Version of that judge (a routing never silently applies to another version).
        target_false_pass: The false-pass rate the thresholds were calibrated for (``alpha``).
        target_false_fail: The false-fail rate the thresholds were calibrated for.
        delta: Failure probability of the finite-sample guarantee (None when no guarantee was computed).
        method: How the thresholds were chosen (e.g. ``"conformal-risk-control"``, ``"manual"``).
        n_calibration: Labeled items the thresholds were fitted on.
        source: What data they were fitted on (a file name and split, free text).
        score_deciles: The calibration scores' deciles (nine cut points), the reference the live score drift
            is measured against (``citelock metrics``); empty in a routing that did not record them.
    """

    # ``pass_at`` is ``inf`` when too few labeled items allowed any pass: written as "Infinity" in JSON
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")

    pass_at: float
    fail_below: float
    judge: str = Field(min_length=1)
    judge_version: str = Field(min_length=1)
    target_false_pass: float | None = Field(default=None, ge=0.0, le=1.0)
    target_false_fail: float | None = Field(default=None, ge=0.0, le=1.0)
    delta: float | None = Field(default=None, gt=0.0, lt=1.0)
    method: str = "manual"
    n_calibration: int = Field(default=0, ge=0)
    source: str = ""
    score_deciles: tuple[float, ...] = ()

    @model_validator(mode="after")
    def _ordered(self) -> Routing:
        if not self.fail_below <= self.pass_at:
            raise ValueError(
                f"expected fail_below <= pass_at, got fail_below={self.fail_below}, pass_at={self.pass_at}"
            )
        return self

    def route(self, score: float) -> Route:
        """Route one score."""
        if score >= self.pass_at:
            return "pass"
        if score < self.fail_below:
            return "fail"
        return "review"

    def applies_to(self, judge: str, version: str) -> bool:
        """True when these thresholds were calibrated for exactly this judge name and version."""
        return self.judge == judge and self.judge_version == version


class _CalibrationFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal["1"] = CALIBRATION_FILE_VERSION
    surfaces: dict[str, Routing]


def save_calibration(path: str | Path, routings: dict[str, Routing]) -> None:
    """Write a calibration file: ``{"schema_version": "1", "surfaces": {name | "*": Routing}}``."""
    data = _CalibrationFile(surfaces=dict(routings))
    # through model_dump_json so that an infinite threshold is the string "Infinity", not non-standard JSON
    plain = json.loads(data.model_dump_json())
    Path(path).write_text(json.dumps(plain, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_calibration(path: str | Path) -> dict[str, Routing]:
    """Read a calibration file written by :func:`save_calibration` (or ``citelock calibrate --fit --write``).

    Returns:
        The routings by surface name; ``"*"`` is the default for surfaces not named.

    Raises:
        InputError: the file is missing, not JSON, or not a calibration file (the message says which field).
    """
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"calibration file {p}: cannot read it ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"calibration file {p}: expected JSON, got invalid JSON at line {exc.lineno}") from None
    try:
        return dict(_CalibrationFile.model_validate(raw).surfaces)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(
            f"calibration file {p}: expected {{'schema_version': '1', 'surfaces': {{name: routing}}}}; "
            f"at {where or 'top level'}: {first['msg']}"
        ) from None


def load_surface_routing(path: str | Path, surface: str) -> Routing:
    """The routing a calibration file gives ``surface``: its own entry, else the ``"*"`` default.

    Raises:
        InputError: the file is unreadable or malformed (see :func:`load_calibration`), or it has neither an
            entry for ``surface`` nor a ``"*"`` default.
    """
    routings = load_calibration(path)
    routing = routings.get(surface, routings.get("*"))
    if routing is None:
        raise InputError(f"calibration file {path}: no routing for surface {surface!r} and no '*' default")
    return routing


@lru_cache(maxsize=16)
def shipped_routing(judge: str, version: str) -> Routing | None:
    """The routing shipped with citelock for this judge (``params/routing.<judge>.json``), if any.

    Returns None when no routing ships for the judge, or when the shipped one was calibrated for another
    version of it (thresholds never silently carry over to a changed judge). Callers then route by the
    judge's label alone: ``yes`` passes, ``partial`` and ``no`` fail. Read once per process (the file ships
    inside the package), not on every guarded answer.
    """
    path = PARAMS_DIR / f"routing.{judge}.json"
    if not path.is_file():
        return None
    routing = Routing.model_validate_json(path.read_text(encoding="utf-8"))
    return routing if routing.applies_to(judge, version) else None
