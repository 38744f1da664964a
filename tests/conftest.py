"""Shared fixtures. The external labeled data lives beside the project (``../shared/data``) or at
``$CITELOCK_SHARED_DATA``; tests that need it skip with the reason when it is absent."""

from __future__ import annotations

import ast
import itertools
import os
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from citelock.store import make_engine
from support.llama_server import llama_server  # noqa: F401  (the real-server fixture)

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Where the external labeled data is expected."""
    return Path(os.environ.get("CITELOCK_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    folder = shared_data_dir()
    if not folder.is_dir():
        pytest.skip(f"external labeled data not found at {folder} (set CITELOCK_SHARED_DATA)")
    return folder


PG_URL = os.environ.get("CITELOCK_TEST_POSTGRES_URL")


def _pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh queue database: a SQLite file, or a fresh schema on CITELOCK_TEST_POSTGRES_URL."""
    if request.param == "sqlite":
        yield str(tmp_path / "queue.db")
        return
    if not PG_URL:
        pytest.skip("CITELOCK_TEST_POSTGRES_URL is not set (scripts/start_postgres.sh starts a server)")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield _pg_schema_url(PG_URL, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With CITELOCK_NO_SKIP=1 (set by scripts/test.sh, so in CI) a skipped test fails: a missing model,
    server, database or data set must not pass as a green run."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CITELOCK_NO_SKIP") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but CITELOCK_NO_SKIP=1 forbids skips: {report.longrepr}"


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """The same for a whole module skipped at import (a missing extra)."""
    if os.environ.get("CITELOCK_NO_SKIP") == "1" and report.skipped:
        report.outcome = "failed"


DECODING_ENV = "CITELOCK_TEST_DECODING"
SAMPLED_TEMPERATURE = 0.8


def _sampling_seed() -> int | None:
    """``$CITELOCK_TEST_DECODING``: ``greedy`` (the default) or ``sample:SEED``; the seed, or None for greedy."""
    setting = os.environ.get(DECODING_ENV, "greedy")
    if setting == "greedy":
        return None
    kind, _, seed = setting.partition(":")
    if kind != "sample" or not seed.isdigit():
        raise pytest.UsageError(f"{DECODING_ENV} must be 'greedy' or 'sample:SEED' (e.g. sample:1), got {setting!r}")
    return int(seed)


@pytest.fixture(autouse=True)
def _second_decoding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``CITELOCK_TEST_DECODING=sample:SEED``, every greedy decode of the local runtime samples instead.

    A second decoding configuration on one machine: the bundled model then writes other valid answers than its
    greedy ones (as another CPU's numerics make it do), so a test that asserts the model's choice rather than
    what the constraint guarantees fails here too, not only on someone else's machine. Each decode of a test
    gets its own seed (the given one, the test's id and a counter), so reruns are reproducible. Only in-process
    decodes of ``local_model`` tests are affected (not subprocesses, not the server, not the judges' completer).
    """
    base = _sampling_seed()
    if base is None or request.node.get_closest_marker("local_model") is None:
        return
    from citelock.runtime import _llama

    greedy = _llama.LlamaRuntime.decode
    counter = itertools.count()
    salt = zlib.crc32(request.node.nodeid.encode("utf-8"))

    def sampled(self: Any, prompt_tokens: Any, grammar: Any, **kwargs: Any) -> Any:
        if kwargs.get("temperature", 0.0) <= 0.0:
            kwargs["temperature"] = SAMPLED_TEMPERATURE
            kwargs["seed"] = (base * 1_000_003 + salt + next(counter)) % 2**32
        return greedy(self, prompt_tokens, grammar, **kwargs)

    monkeypatch.setattr(_llama.LlamaRuntime, "decode", sampled)


def _module_marks(path: Path) -> set[str]:
    """The marker names of a test module's top-level ``pytestmark = pytest.mark.X`` (or a list of them)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    marks: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            for value in values:
                if isinstance(value, ast.Call):
                    value = value.func
                if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Attribute):
                    marks.add(value.attr)
    return marks


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m``, a test module whose ``pytestmark`` the expression deselects is not even imported.

    Its import may need exactly what the lane lacks (the fast lane, ``nox -s tests``, has no llama.cpp, and a
    module of local-model tests imports it at the top): every test in it would be deselected anyway, and under
    CITELOCK_NO_SKIP=1 the skipped import would fail the run.
    """
    from _pytest.mark.expression import Expression

    markexpr = config.getoption("markexpr", default="")
    if not markexpr or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    marks = _module_marks(collection_path)
    if marks and not Expression.compile(markexpr).evaluate(lambda name, **_: name in marks):
        return True
    return None
