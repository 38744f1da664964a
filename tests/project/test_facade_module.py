"""The facade's classes and functions report ``citelock`` as their module, as httpx's do, and still pickle,
print, type-check at run time and subclass."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import subprocess
import sys
import traceback
import typing

import pytest
from pydantic import BaseModel, TypeAdapter

import citelock

PUBLIC = [name for name in citelock.__all__ if inspect.isclass(getattr(citelock, name))]
CALLABLE = [name for name in citelock.__all__ if inspect.isfunction(getattr(citelock, name))]


def test_every_public_class_and_function_reports_the_facade() -> None:
    assert PUBLIC and CALLABLE
    wrong = {
        name: getattr(citelock, name).__module__
        for name in PUBLIC + CALLABLE + ["load_template"]
        if getattr(citelock, name).__module__ != "citelock"
    }
    assert wrong == {}
    assert repr(citelock.Guard) == "<class 'citelock.Guard'>"
    assert "citelock.UsageError: bad" in "".join(traceback.format_exception_only(citelock.UsageError("bad")))


@pytest.mark.parametrize("name", PUBLIC + CALLABLE)
def test_each_pickles_by_its_facade_name(name: str) -> None:
    value = getattr(citelock, name)
    assert pickle.loads(pickle.dumps(value)) is value


def test_instances_round_trip_through_a_fresh_interpreter() -> None:
    values = [
        citelock.Chunk(id="c-1", text="The bridge opened in 1932."),
        citelock.SchemaOptions(max_claims=2),
        citelock.BackendLimits(policies=("id",)),
        citelock.UsageError("bad input"),
        citelock.ReasonCode.NUMBER_MISMATCH,
    ]
    code = (
        "import pickle, sys; values = pickle.loads(sys.stdin.buffer.read()); "
        "print([f'{type(v).__module__}.{type(v).__qualname__}' for v in values]); "
        "print(values[0].text, values[1].max_claims, values[2].policies, values[3], values[4].name)"
    )
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(values), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    names, shown = done.stdout.decode().splitlines()
    assert names == str(
        [
            "citelock.Chunk",
            "citelock.SchemaOptions",
            "citelock.BackendLimits",
            "citelock.UsageError",
            "citelock.ReasonCode",
        ]
    )
    assert shown == "The bridge opened in 1932. 2 ('id',) bad input NUMBER_MISMATCH"


@pytest.mark.parametrize("name", [n for n in PUBLIC if dataclasses.is_dataclass(getattr(citelock, n))])
def test_dataclasses_still_resolve_their_annotations(name: str) -> None:
    cls = getattr(citelock, name)
    hints = typing.get_type_hints(cls)
    assert set(hints) >= {field.name for field in dataclasses.fields(cls)}
    assert not any(isinstance(hint, str) for hint in hints.values())


def test_pydantic_reads_the_facade_objects() -> None:
    limits = TypeAdapter(citelock.BackendLimits).validate_python({"policies": ["id"], "max_enum_values": 3})
    assert limits == citelock.BackendLimits(policies=("id",), max_enum_values=3)

    class Noted(citelock.Chunk):
        note: str = "kept"

    noted = Noted(id="c-1", text="Text.")
    assert noted.note == "kept" and noted.id == "c-1" and isinstance(noted, BaseModel)
    assert pickle.loads(pickle.dumps(citelock.Chunk(id="c-2", text="t"))).id == "c-2"
