from __future__ import annotations

import json
from pathlib import Path

import pytest

from citelock.errors import InputError
from citelock.judges._routing import Routing, load_calibration, load_surface_routing, save_calibration, shipped_routing


def _routing(**over: object) -> Routing:
    base: dict[str, object] = {"pass_at": 0.8, "fail_below": 0.3, "judge": "lexical", "judge_version": "9.9"}
    return Routing.model_validate({**base, **over})


def test_route_boundaries() -> None:
    r = _routing()
    assert r.route(0.8) == "pass"
    assert r.route(0.79) == "review"
    assert r.route(0.3) == "review"
    assert r.route(0.29) == "fail"


def test_equal_thresholds_leave_no_review_band() -> None:
    r = _routing(pass_at=0.5, fail_below=0.5)
    assert {r.route(s) for s in (0.0, 0.49, 0.5, 1.0)} == {"pass", "fail"}


def test_thresholds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="fail_below <= pass_at"):
        _routing(pass_at=0.2, fail_below=0.6)


def test_applies_only_to_its_judge_version() -> None:
    r = _routing()
    assert r.applies_to("lexical", "9.9")
    assert not r.applies_to("lexical", "1.0")
    assert not r.applies_to("offline", "9.9")


def test_calibration_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    routings = {"legal": _routing(target_false_pass=0.05, n_calibration=300), "*": _routing(pass_at=0.9)}
    save_calibration(path, routings)
    assert load_calibration(path) == routings


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "invalid JSON at line 1"),
        (json.dumps({"surfaces": {"legal": {"pass_at": 0.5}}}), "surfaces.legal.fail_below"),
        (json.dumps({"schema_version": "7", "surfaces": {}}), "schema_version"),
        (json.dumps([1, 2]), "expected"),
    ],
)
def test_bad_calibration_file_names_the_field(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=expected):
        load_calibration(path)


def test_missing_calibration_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read it"):
        load_calibration(tmp_path / "absent.json")


def test_no_shipped_routing_for_an_unknown_judge() -> None:
    assert shipped_routing("no-such-judge", "1") is None


def test_surface_routing_falls_back_to_the_default_entry(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    legal, default = _routing(pass_at=0.9), _routing(pass_at=0.7)
    save_calibration(path, {"legal": legal, "*": default})
    assert load_surface_routing(path, "legal") == legal
    assert load_surface_routing(path, "chat") == default
    save_calibration(path, {"legal": legal})
    with pytest.raises(InputError, match="no routing for surface 'chat' and no '\\*' default"):
        load_surface_routing(path, "chat")


def test_shipped_routing_is_read_once() -> None:
    shipped_routing.cache_clear()
    shipped_routing("lexical", "does-not-match")
    shipped_routing("lexical", "does-not-match")
    assert shipped_routing.cache_info().hits == 1
