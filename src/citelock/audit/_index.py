"""The committed rows of an audit, indexed on disk: which keys are done, which row of which input each one is.

An audit can hold millions of report rows; a rerun must skip every committed key and notice an input row whose
content changed since it was committed. Keeping those keys in a Python set costs about 100 bytes a row; this
index keeps them in a SQLite file in the out directory (``_keys.sqlite``) and SQLite's page cache (a few MB)
bounds the memory, whatever the audit's size.

The index is a cache, never the truth: the part files and their ``_parts/`` metadata are. Each committed part is
ingested after its files are in place, in one transaction that also records the part's number, so a crash
between the two is repaired when the audit is next opened (the missing parts are ingested again, which changes
nothing twice), and an index that does not match the parts (deleted, damaged, from another audit) is rebuilt
from them.

A row is *live* while it describes its input row: ``live`` holds the key of every live row, with its position
(input, row) and the part that holds it. A newer version of the same input row (its content was edited)
replaces the old one there.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

__all__ = ["KeyIndex", "Position"]

Position = tuple[str, int]
"""An input row: (the input's absolute path, its 1-based row)."""

_CHUNK = 500  # keys per lookup: well under SQLite's limit on bound parameters
_PAGE = 10_000  # keys per page when every key is read
_SCHEMA = """
CREATE TABLE IF NOT EXISTS inputs (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS live (
    key TEXT PRIMARY KEY, input INTEGER REFERENCES inputs(id), row INTEGER, part INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS live_at ON live (input, row);
CREATE TABLE IF NOT EXISTS ingested (part INTEGER PRIMARY KEY);
"""


class KeyIndex:
    """The live rows of one audit directory, in a SQLite file (thread-safe: the Ray engine reads from a thread).

    Args:
        path: The index file (created if missing; rebuilt when it is not a readable index).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError:  # damaged (or not ours): it is only a cache, so start it again
            path.unlink(missing_ok=True)
            self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # a process crash loses nothing; the parts are the truth
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def ingested(self) -> list[int]:
        """The part numbers ingested, ascending."""
        with self._lock:
            return [number for (number,) in self._conn.execute("SELECT part FROM ingested ORDER BY part")]

    def reset(self) -> None:
        """Forget everything (before a rebuild from the parts)."""
        with self._lock:
            self._conn.executescript("BEGIN; DELETE FROM live; DELETE FROM ingested; DELETE FROM inputs; COMMIT;")

    def ingest(self, part: int, keys: Sequence[str], positions: Sequence[Position], superseded: Iterable[str]) -> None:
        """Record a committed part: its superseded keys leave, its keys become live at their positions."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                conn.executemany("DELETE FROM live WHERE key = ?", ((key,) for key in superseded))
                rows = [
                    (key, self._input_id(where), row, part) for key, (where, row) in zip(keys, positions, strict=True)
                ]
                # REPLACE: a position still held by an older row (never the case when the parts are consistent)
                # goes to the newer one, so the index never refuses a part that is on disk.
                conn.executemany("INSERT OR REPLACE INTO live (key, input, row, part) VALUES (?, ?, ?, ?)", rows)
                conn.execute("INSERT OR IGNORE INTO ingested (part) VALUES (?)", (part,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _input_id(self, path: str) -> int:
        conn = self._conn
        conn.execute("INSERT OR IGNORE INTO inputs (path) VALUES (?)", (path,))
        (number,) = conn.execute("SELECT id FROM inputs WHERE path = ?", (path,)).fetchone()
        return int(number)

    def live_keys(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` are live (committed, and not replaced since)."""
        found: set[str] = set()
        wanted = list(keys)
        with self._lock:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                found.update(k for (k,) in self._conn.execute(f"SELECT key FROM live WHERE key IN ({marks})", chunk))
        return found

    def holders(self, positions: Iterable[Position]) -> dict[Position, tuple[str, int]]:
        """The live row at each of ``positions`` that has one: position -> (key, part)."""
        by_input: dict[str, list[int]] = {}
        for where, row in positions:
            by_input.setdefault(where, []).append(row)
        out: dict[Position, tuple[str, int]] = {}
        with self._lock:
            for where, rows in by_input.items():
                found = self._conn.execute("SELECT id FROM inputs WHERE path = ?", (where,)).fetchone()
                if found is None:
                    continue
                for start in range(0, len(rows), _CHUNK):
                    chunk = rows[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    query = f"SELECT key, part, row FROM live WHERE input = ? AND row IN ({marks})"
                    for key, part, row in self._conn.execute(query, (found[0], *chunk)):
                        out[(where, int(row))] = (key, int(part))
        return out

    def unread(self, path: str, gaps: Iterable[tuple[int, int]], last: int) -> list[tuple[str, int, int]]:
        """Live rows of input ``path`` a whole read did not see: in one of ``gaps`` (first, last), or after ``last``.

        Returns (key, part, row) of each.
        """
        query = "SELECT l.key, l.part, l.row FROM live l JOIN inputs i ON l.input = i.id WHERE i.path = ? AND "
        with self._lock:
            hits = self._conn.execute(query + "l.row > ?", (path, last)).fetchall()
            for first, end in gaps:
                hits += self._conn.execute(query + "l.row BETWEEN ? AND ?", (path, first, end)).fetchall()
        return [(key, int(part), int(row)) for key, part, row in hits]

    def count(self) -> int:
        """How many rows are live."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM live").fetchone()[0])

    def keys(self) -> Iterator[str]:
        """Every live key (in key order), read a page at a time."""
        after = ""
        while True:
            with self._lock:
                page = self._conn.execute(
                    "SELECT key FROM live WHERE key > ? ORDER BY key LIMIT ?", (after, _PAGE)
                ).fetchall()
            if not page:
                return
            for (key,) in page:
                yield key
            after = page[-1][0]

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._conn.close()
