"""Stores: the append-only prompt log (and the review queue). SQLite by default; PostgreSQL for teams."""

from citelock.store._engine import make_engine
from citelock.store._prompt_log import PromptLog
from citelock.store._queue import (
    AlreadyResolvedError,
    CalibrationSample,
    QueueEntry,
    Resolution,
    ReviewQueue,
    queue_entry_schema,
)
from citelock.store._results import ResultStore

__all__ = [
    "AlreadyResolvedError",
    "CalibrationSample",
    "PromptLog",
    "QueueEntry",
    "Resolution",
    "ResultStore",
    "ReviewQueue",
    "make_engine",
    "queue_entry_schema",
]
