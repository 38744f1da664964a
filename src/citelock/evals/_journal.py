"""A resumable run journal: one JSON line per finished item, keyed by item id, appended as the run goes.

The first line is a header with the run's configuration. Reopening a journal with a different configuration is
an error (its rows would mix two runs); reopening it with the same one resumes: finished items are skipped. A
line cut by an interruption (the last one, unparseable) is an unfinished item: it is removed and redone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from citelock.errors import InputError, UsageError

__all__ = ["Journal"]


class Journal:
    """Append-only JSONL of finished items.

    Args:
        path: The journal file (created with its parent folder if missing).
        header: The run configuration; must equal the stored header when the file exists.
        fresh: Start over (delete an existing journal) instead of resuming.

    Raises:
        UsageError: the existing journal was written by a run with another configuration.
        InputError: a line other than the last is not valid JSON (the file was edited or corrupted).
    """

    def __init__(self, path: Path, header: Mapping[str, Any], *, fresh: bool = False) -> None:
        self.path = path
        self.header = json.loads(json.dumps(dict(header)))
        self.rows: dict[str, dict[str, Any]] = {}
        self.resumed = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        if fresh and path.exists():
            path.unlink()
        if path.exists() and path.stat().st_size > 0:
            self._load()
        else:
            with path.open("w", encoding="utf-8") as fh:
                fh.write(json.dumps({"_header": self.header}, ensure_ascii=False) + "\n")

    def _load(self) -> None:
        lines = self.path.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        kept: list[str] = []
        for number, line in enumerate(lines, start=1):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):
                    break  # cut by an interruption: that item is redone
                raise InputError(
                    f"journal {self.path} line {number} is not valid JSON; expected one finished item per line"
                ) from None
            kept.append(line)
            if number == 1:
                stored = data.get("_header") if isinstance(data, dict) else None
                if stored != self.header:
                    raise UsageError(
                        f"journal {self.path} was written by a run with another configuration "
                        f"(stored {stored}, this run {self.header}); use another --out folder or --fresh"
                    )
                continue
            self.rows[str(data["item_id"])] = data
        self.resumed = len(self.rows)
        if len(kept) != len(lines):
            self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def done(self, item_id: str) -> bool:
        """Whether ``item_id`` is already finished."""
        return item_id in self.rows

    def append(self, row: Mapping[str, Any]) -> None:
        """Record a finished item (flushed to disk before returning)."""
        data = json.loads(json.dumps(dict(row), ensure_ascii=False))
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(data, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows[str(data["item_id"])] = data
