"""Stores: the append-only prompt log (and the review queue). SQLite by default; PostgreSQL for teams."""

from citelock.store._engine import make_engine
from citelock.store._prompt_log import PromptLog

__all__ = ["PromptLog", "make_engine"]
