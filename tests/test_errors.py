"""Every citelock error survives pickling (a worker process or a Ray worker raises it; the caller gets it)."""

from __future__ import annotations

import inspect
import pickle

import pytest

import citelock.errors as errors
from citelock.errors import BackendConnectionError, CitelockError, JudgeOutputError, MissingExtraError, ParseError


def test_errors_with_keyword_constructors_round_trip_through_pickle() -> None:
    cases: list[CitelockError] = [
        BackendConnectionError("could not reach the server", provider="openai", status=None, retryable=True),
        MissingExtraError("ray", "ray"),
        ParseError("bad claims", where="claims[0]"),
        JudgeOutputError("maybe", ("yes", "no")),
    ]
    for error in cases:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert str(back) == str(error) and back.args == error.args
        assert vars(back) == vars(error)
    connection = pickle.loads(pickle.dumps(cases[0]))
    assert isinstance(connection, BackendConnectionError) and connection.provider == "openai" and connection.retryable


@pytest.mark.parametrize(
    "cls", [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, CitelockError)]
)
def test_every_error_class_unpickles_as_itself(cls: type[CitelockError]) -> None:
    error = cls.__new__(cls)
    BaseException.__init__(error, "message")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and str(back) == "message"
