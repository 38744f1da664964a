"""Shared fixtures. The external labeled data lives beside the project (``../shared/data``) or at
``$CITELOCK_SHARED_DATA``; tests that need it skip with the reason when it is absent."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from citelock.store import make_engine
from conftest_server import llama_server  # noqa: F401  (the real-server fixture)

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
