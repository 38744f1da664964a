"""Database engines for the stores: SQLite by default (a file path), PostgreSQL for teams (a URL).

SQLAlchemy Core gives one code path for both dialects; SQLite runs in WAL mode with a busy timeout so several
processes can append concurrently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event

from citelock.errors import MissingExtraError

__all__ = ["make_engine", "to_url"]


def to_url(target: str | Path) -> str:
    """A database URL for ``target``: a URL is kept, anything else is a SQLite file path."""
    text = str(target)
    if "://" in text:
        if text.startswith("postgres://"):
            text = "postgresql://" + text[len("postgres://") :]
        if text.startswith("postgresql://"):
            text = "postgresql+psycopg://" + text[len("postgresql://") :]
        return text
    return f"sqlite:///{Path(text).expanduser()}"


def make_engine(target: str | Path) -> Engine:
    """Create an engine for a SQLite path or a database URL.

    Raises:
        MissingExtraError: a PostgreSQL URL without the ``postgres`` extra installed.
    """
    url = to_url(target)
    if url.startswith("postgresql+psycopg"):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise MissingExtraError("postgres", "psycopg") from None
        return create_engine(url, pool_pre_ping=True)
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    return engine
