"""Stores: the hash-chained prompt log, the review queue (events), guard results and the judges' verdict cache.

SQLite by default; PostgreSQL for teams (any SQLAlchemy URL). Every store creates its tables safely when many
processes open a new database at once, and the database refuses UPDATE and DELETE on the append-only ones.
"""

from citelock.errors import AlreadyResolvedError
from citelock.store._chain import ChainProblem, ChainReport
from citelock.store._engine import make_engine
from citelock.store._prompt_log import PromptLog
from citelock.store._queue import CalibrationSample, QueueEntry, Resolution, ReviewQueue, queue_entry_schema
from citelock.store._results import ResultStore
from citelock.store._verdict_cache import CachedJudge, MemoryVerdictCache, SqlVerdictCache, VerdictCache, cache_key

__all__ = [
    "AlreadyResolvedError",
    "CachedJudge",
    "CalibrationSample",
    "ChainProblem",
    "ChainReport",
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
