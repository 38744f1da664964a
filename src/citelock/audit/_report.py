"""An audit's report files: the part files (JSONL or Parquet) written, and read back as the same rows.

In Parquet the scalar fields (``key``, ``source``, ``row``, ``error``, ``ok``, ``request_id``, ``prompt_sha256``,
``surface``, ``decision``, ``on_fail``) are columns and the nested ones (``findings``, ``counts``,
``citations``, ``claims``, ``outcomes``, ``routes``, ``accounting``, ``policy``) are JSON text, so every part has one
schema; :func:`read_report` turns both formats back into the same rows, live rows only, in input order.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal

from citelock.audit._rows import input_path
from citelock.audit._work import AuditOutcome
from citelock.errors import InputError, MissingExtraError

__all__ = [
    "MANIFEST",
    "PART",
    "PARTS",
    "OutputFormat",
    "part_rows",
    "pyarrow_module",
    "read_report",
    "write_jsonl",
    "write_parquet",
]

OutputFormat = Literal["jsonl", "parquet"]

MANIFEST = "_manifest.json"
PARTS = "_parts"
PART = re.compile(r"part-(\d{6,})\.(jsonl|parquet)")
_SCALARS = ("key", "source", "row", "error", "ok", "request_id", "prompt_sha256", "surface", "decision", "on_fail")
_NESTED = ("findings", "counts", "citations", "claims", "outcomes", "routes", "accounting", "policy")
_UNPLACED = sys.maxsize  # the rank of a row whose part recorded no input order (written before it did)


def write_jsonl(batch: Sequence[AuditOutcome], handle: IO[str]) -> None:
    """The report rows of ``batch``, one compact JSON object a line."""
    for outcome in batch:
        handle.write(json.dumps(outcome.report, ensure_ascii=False, separators=(",", ":")))
        handle.write("\n")


def pyarrow_module() -> Any:
    """pyarrow, or :class:`MissingExtraError` naming the ``audit`` extra."""
    try:
        import pyarrow
    except ImportError:
        raise MissingExtraError("audit", "pyarrow") from None
    return pyarrow


def write_parquet(batch: Sequence[AuditOutcome], handle: IO[bytes]) -> None:
    """The report rows of ``batch`` as one Parquet file (the same schema for every part, even an empty one)."""
    pa = pyarrow_module()
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {name: [] for name in (*_SCALARS, *_NESTED)}
    for outcome in batch:
        report = outcome.report
        for name in _SCALARS:
            columns[name].append(report.get(name))
        for name in _NESTED:
            value = report.get(name)
            columns[name].append(None if name not in report else json.dumps(value, ensure_ascii=False))
    types = {"row": pa.int64(), "ok": pa.bool_()}
    schema = pa.schema([(name, types.get(name, pa.string())) for name in (*_SCALARS, *_NESTED)])
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), handle)


def read_report(out: str | Path) -> list[dict[str, Any]]:
    """Every live report row of an audit's out directory, in input order, the same for JSONL and Parquet.

    Input order is the inputs as given (as the manifest and the parts' metadata list them), then row number (a
    row whose part did not record its input is placed by its source as a path from here; one that cannot be
    placed comes last, by source). A superseded row (its input row was edited, or is gone, since it was
    committed) is left out: the newest version of each input row is the one reported. Fields a run without a
    surface does not produce are left out of its rows, as in the JSONL. Every row is held in memory: for a large
    report, read the part files with a dataset reader instead (they hold superseded rows too; ``_parts/`` lists
    them).

    Raises:
        InputError: ``out`` is not an audit directory.
    """
    folder = Path(out).expanduser()
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{folder} is not an audit directory (no {MANIFEST})")
    described = json.loads(manifest.read_text(encoding="utf-8"))
    fmt = described.get("format", "jsonl")
    ranks: dict[str, int] = {}
    for where in described.get("answers") or described.get("inputs") or ():  # as run_audit describes its inputs
        if isinstance(where, str):
            ranks.setdefault(where, len(ranks))
    live: dict[str, tuple[str | None, dict[str, Any]]] = {}  # key -> (its input, if the part says), row
    for data in _parts(folder, fmt):
        meta_path = folder / PARTS / f"{data.stem}.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        for key in meta.get("superseded") or ():
            live.pop(key, None)
        inputs: list[str] = meta.get("inputs") or []
        for where in inputs:
            ranks.setdefault(where, len(ranks))
        at = meta.get("at")
        for number, row in enumerate(_part_file_rows(data, fmt)):
            live[row["key"]] = (inputs[at[number][0]] if at else None, row)

    def place(entry: tuple[str | None, dict[str, Any]]) -> tuple[int, str, int]:
        where, row = entry
        rank = ranks.get(where if where is not None else input_path(row["source"]))
        return (rank, "", row["row"]) if rank is not None else (_UNPLACED, row["source"], row["row"])

    return [row for _, row in sorted(live.values(), key=place)]


def part_rows(out: Path, fmt: str, wanted: Sequence[tuple[str, int]]) -> Iterator[dict[str, Any]]:
    """The report rows of ``wanted`` (key, part number), each part file read once."""
    by_part: dict[int, set[str]] = {}
    for key, part in wanted:
        by_part.setdefault(part, set()).add(key)
    for part, keys in sorted(by_part.items()):
        for row in _part_file_rows(out / f"part-{part:06d}.{fmt}", fmt):
            if row["key"] in keys:
                yield row


def _parts(folder: Path, fmt: str) -> list[Path]:
    numbered = []
    for path in folder.glob(f"part-*.{fmt}"):
        match = PART.fullmatch(path.name)
        if match is not None:
            numbered.append((int(match.group(1)), path))
    return [path for _, path in sorted(numbered)]


def _part_file_rows(path: Path, fmt: str) -> Iterator[dict[str, Any]]:
    if fmt == "jsonl":
        with path.open(encoding="utf-8") as handle:
            yield from (json.loads(line) for line in handle if line.strip())
        return
    pyarrow_module()
    import pyarrow.parquet as pq

    for values in pq.read_table(path).to_pylist():
        row = {name: values[name] for name in _SCALARS}
        policy = values.get("outcomes") is not None or values.get("decision") is not None
        for name in _NESTED:
            text = values.get(name)
            if text is None and name in ("outcomes", "routes", "accounting", "policy") and not policy:
                continue
            row[name] = json.loads(text) if text is not None else None
        if not policy:
            for name in ("surface", "decision", "on_fail"):
                row.pop(name, None)
        yield _ordered(row)


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    order = ("key", "source", "row", "error", "ok", "request_id", "prompt_sha256", "findings", "counts")
    rest = ("citations", "claims", "surface", "decision", "on_fail", "outcomes", "routes", "accounting", "policy")
    return {name: row[name] for name in (*order, *rest) if name in row}
