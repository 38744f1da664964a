"""Shared fixtures. The external labeled data lives beside the project (``../shared/data``) or at
``$CITELOCK_SHARED_DATA``; tests that need it skip with the reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
