"""Stores: the prompt log, the review queue, guard results, the verdict cache and the review desk's accounts.

The prompt log is hash-chained; the review queue is append-only events.

SQLite by default; PostgreSQL for teams (any SQLAlchemy URL). Every store creates its tables safely when many
processes open a new database at once, and the database refuses UPDATE and DELETE on the append-only ones.
"""

from citelock.errors import AlreadyResolvedError
from citelock.store._accounts import Account, AccountStore, Credential
from citelock.store._chain import ChainProblem, ChainReport
from citelock.store._engine import make_engine
from citelock.store._prompt_log import PromptLog
from citelock.store._queue import CalibrationSample, QueueEntry, Resolution, ReviewQueue, queue_entry_schema
from citelock.store._queue_pages import QueueBrowser, QueueFacets, QueueFilter, QueuePage, QueueRow, ReasonCount
from citelock.store._results import ResultStore
from citelock.store._verdict_cache import CachedJudge, MemoryVerdictCache, SqlVerdictCache, VerdictCache, cache_key

__all__ = [
    "Account",
    "AccountStore",
    "AlreadyResolvedError",
    "CachedJudge",
    "CalibrationSample",
    "ChainProblem",
    "ChainReport",
    "Credential",
    "PromptLog",
    "QueueBrowser",
    "QueueEntry",
    "QueueFacets",
    "QueueFilter",
    "QueuePage",
    "QueueRow",
    "ReasonCount",
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
