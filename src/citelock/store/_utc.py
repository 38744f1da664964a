"""Stored times read back as UTC: SQLite returns naive datetimes, and every time a store writes is UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

__all__ = ["aware"]


@overload
def aware(moment: datetime) -> datetime: ...


@overload
def aware(moment: None) -> None: ...


def aware(moment: datetime | None) -> datetime | None:
    """``moment`` as a timezone-aware datetime: a naive one (SQLite's) is taken as UTC; None stays None."""
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
