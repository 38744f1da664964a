"""Database engines for the stores: SQLite by default (a file path), PostgreSQL for teams (a URL).

SQLAlchemy Core gives one code path for both dialects; SQLite runs in WAL mode with a busy timeout so several
processes can append concurrently. :func:`serialized` is the one way a store takes a write lock that other
processes wait for: ``BEGIN IMMEDIATE`` on SQLite (the database's single write lock), a transaction-scoped
advisory lock on PostgreSQL (one per schema and name, so two schemas never wait for each other).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event, insert, text
from sqlalchemy.dialects import postgresql, sqlite

from citelock.errors import MissingExtraError

__all__ = ["insert_skipping", "make_engine", "serialized", "to_url"]


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


def insert_skipping(engine: Engine, table: Table, column: str) -> Any:
    """An ``INSERT`` into ``table`` that skips a row whose ``column`` value is already stored.

    It is ``ON CONFLICT DO NOTHING``: count what it added with ``RETURNING``, not ``rowcount`` (PostgreSQL drivers
    report -1 for it).
    """
    if engine.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=[column])
    if engine.dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=[column])
    return insert(table)  # pragma: no cover - other dialects: a duplicate raises IntegrityError


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
        cursor.execute("PRAGMA busy_timeout=30000")
        _wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def _wal(cursor: Any, *, timeout: float = 30.0) -> None:
    """Put a SQLite database in WAL mode (a persistent setting of the file), waiting out concurrent openers.

    Switching the journal mode needs the database to itself, and SQLite reports "database is locked" at once,
    without its busy handler, when another connection is there: several processes opening a new file together
    all try to switch. So: skip when the file is already in WAL mode, else retry with a short backoff.
    """
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


_ADVISORY_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || :name, 0))")


def _lock_key(name: str) -> str:
    return "citelock:" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


@contextmanager
def serialized(engine: Engine, name: str) -> Iterator[Connection]:
    """A write transaction that holds the lock ``name`` from its first statement until it commits.

    Two processes entering ``serialized(engine, name)`` at once run one after the other, and the second sees
    everything the first committed. On SQLite the lock is the database's write lock (``BEGIN IMMEDIATE``, waiting
    up to the 30 s busy timeout), so ``name`` does not matter there; on PostgreSQL it is an advisory lock keyed
    by the current schema and ``name``, released at commit or rollback. Other dialects get a plain transaction.

    Yields:
        The connection, inside the transaction (committed on normal exit, rolled back on an exception).
    """
    with engine.connect() as conn:
        dialect = engine.dialect.name
        if dialect == "sqlite":
            # pysqlite opens transactions lazily (and not before DDL); an explicit BEGIN IMMEDIATE takes the
            # write lock now and makes every statement after it, DDL included, one atomic transaction.
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            return
        with conn.begin():
            if dialect == "postgresql":
                conn.execute(_ADVISORY_LOCK, {"name": _lock_key(name)})
            yield conn
