"""Creating a store's tables safely when several processes open a fresh database at the same moment."""

from __future__ import annotations

import time

from sqlalchemy import Engine, MetaData
from sqlalchemy.exc import DatabaseError

__all__ = ["create_tables"]


def create_tables(engine: Engine, metadata: MetaData, *, attempts: int = 5) -> None:
    """Create ``metadata``'s missing tables; tolerate another process creating them concurrently.

    Two processes may both see a table missing and both issue ``CREATE TABLE``; the loser's error is retried,
    and the retry skips what now exists.

    Raises:
        DatabaseError: creation still fails after ``attempts`` tries (the database itself is unusable).
    """
    for attempt in range(attempts):
        try:
            metadata.create_all(engine, checkfirst=True)
            return
        except DatabaseError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
