"""Stores: the append-only prompt log, the review queue, guard results and the judges' verdict cache.

SQLite by default; PostgreSQL for teams (any SQLAlchemy URL).
"""

from citelock.errors import AlreadyResolvedError
from citelock.store._engine import make_engine
from citelock.store._prompt_log import PromptLog
from citelock.store._queue import CalibrationSample, QueueEntry, Resolution, ReviewQueue, queue_entry_schema
from citelock.store._results import ResultStore
from citelock.store._verdict_cache import CachedJudge, MemoryVerdictCache, SqlVerdictCache, VerdictCache, cache_key

__all__ = [
    "AlreadyResolvedError",
    "CachedJudge",
    "CalibrationSample",
    "PromptLog",
    "QueueEntry",
    "Resolution",
    "ResultStore",
    "ReviewQueue",
    "MemoryVerdictCache",
    "SqlVerdictCache",
    "VerdictCache",
    "cache_key",
    "make_engine",
    "queue_entry_schema",
]
