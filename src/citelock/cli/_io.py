"""Reading the command line's input files with errors that name the file, the field and what was expected.

Every input file option takes ``-`` for standard input (one option per command line). Files are read with a
size bound (:data:`MAX_INPUT_BYTES`, checked while reading, so ``/dev/zero`` or an endless pipe is refused too),
decoded as UTF-8 (a UTF-8, UTF-16 or UTF-32 byte-order mark is honoured), and JSON is parsed with a nesting
bound (:data:`MAX_JSON_DEPTH`) and no lone surrogate escapes (an unpaired UTF-16 surrogate escape is not text).
"""

from __future__ import annotations

import codecs
import json
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError

from citelock.cli._app import EXIT_INPUT
from citelock.errors import CitelockError, json_kind, json_refusal
from citelock.prompt import load_record, record_from_messages
from citelock.records import PromptRecord

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_JSON_DEPTH",
    "STDIN",
    "database_target",
    "existing_file",
    "fail",
    "is_stdin",
    "iter_json_lines",
    "load_prompt",
    "load_store_ids",
    "loads_checked",
    "read_json",
    "read_text",
    "reading",
    "shown",
    "single_stdin",
    "text_option",
]

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""The largest input file read (64 MiB)."""

MAX_JSON_DEPTH = 100
"""The deepest JSON nesting accepted in an input file (citelock's own shapes nest at most 6 levels)."""

STDIN = "-"
"""The path meaning standard input."""

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def fail(message: str) -> NoReturn:
    """Print an input error to stderr and exit with code 2."""
    typer.echo(f"citelock: error: {message}", err=True)
    raise typer.Exit(EXIT_INPUT)


def shown(path: Path | str) -> str:
    """A path as printed in a message: as is when printable, else quoted with escapes (newlines, bad bytes)."""
    text = str(path)
    return "standard input" if text == STDIN else text if text.isprintable() else repr(text)


def text_option(option: str, value: str) -> str:
    """Exit 2 when an option's value is not text: bytes the locale could not decode (they arrive as surrogates)."""
    if _has_surrogate(value):
        fail(f"{option} {value!r}: not valid text (undecodable bytes on the command line)")
    return value


def is_stdin(path: Path | str | None) -> bool:
    """Whether an input option names standard input (``-``)."""
    return path is not None and str(path) == STDIN


def single_stdin(**paths: Path | str | None) -> None:
    """Exit 2 unless at most one of the named input options is ``-`` (standard input can be read once)."""
    dashes = [f"--{name.replace('_', '-')}" for name, path in paths.items() if is_stdin(path)]
    if len(dashes) > 1:
        fail(f"{' and '.join(dashes)} both read standard input ('-'); only one input can come from it")


def _read_bytes(path: Path, what: str) -> bytes:
    if is_stdin(path):
        stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
        if stream is None:  # pragma: no cover - a stdin without a byte buffer
            fail(f"{what}: standard input cannot be read as bytes")
        data: bytes = stream.read(MAX_INPUT_BYTES + 1)
    else:
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            fail(f"{what} file {shown(path)}: cannot read it ({exc.strerror or type(exc).__name__})")
    if len(data) > MAX_INPUT_BYTES:
        fail(f"{what} file {shown(path)} is too large: the limit is {MAX_INPUT_BYTES} bytes (64 MiB)")
    return data


def read_text(path: Path, what: str) -> str:
    """Read a text file (or ``-``), refusing missing, oversized, non-text and non-UTF-8 files.

    A byte-order mark selects UTF-8, UTF-16 or UTF-32; without one the file must be UTF-8.
    """
    data = _read_bytes(path, what)
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        if encoding == "utf-8":
            bad = f"0x{data[exc.start]:02x}"
            fail(f"{what} file {shown(path)} is not UTF-8 text (bad byte {bad} at offset {exc.start})")
        fail(
            f"{what} file {shown(path)} is not UTF-8 text, nor the {encoding.upper()} its byte-order mark announces "
            f"(undecodable data at offset {exc.start})"
        )


def loads_checked(text: str, where: str) -> Any:
    """Parse JSON text; exit 2 naming ``where`` on invalid JSON, nesting deeper than the bound, lone surrogates.

    Anything else the parser refuses (an integer literal of more than ``sys.get_int_max_str_digits()`` digits)
    is exit 2 too, naming the field that holds it.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        fail(f"{where}: JSON nested too deeply; the limit is {MAX_JSON_DEPTH} levels")
    except ValueError as exc:  # what else the parser refuses: an integer longer than int_max_str_digits
        fail(f"{where}: {json_refusal(exc, text)}")
    problem = _json_problem(value)
    if problem is not None:
        fail(f"{where}: {problem}")
    return value


def _json_problem(value: Any) -> str | None:
    """Why a parsed JSON value cannot be used (too deep, a lone surrogate), or None; iterative, O(size)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "$")]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"JSON nested deeper than {MAX_JSON_DEPTH} levels (at {where[:80]}...)"
        if isinstance(item, str):
            if not item.isascii() and _has_surrogate(item):
                return f"{where} holds a lone surrogate escape (such as \\ud800): not text"
        elif isinstance(item, dict):
            for key, sub in item.items():
                if not key.isascii() and _has_surrogate(key):
                    return f"a key in {where} holds a lone surrogate escape (such as \\ud800): not text"
                stack.append((sub, depth + 1, f"{where}.{key}" if len(where) < 200 else where))
        elif isinstance(item, list):
            stack.extend((sub, depth + 1, f"{where}[{i}]" if len(where) < 200 else where) for i, sub in enumerate(item))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def read_json(path: Path, what: str) -> Any:
    """Read a JSON file (or ``-``) with a clear error for invalid, too deep or non-text JSON."""
    return loads_checked(read_text(path, what), f"{what} file {shown(path)}")


_DATABASE_SCHEMES = ("sqlite", "postgres", "postgresql", "postgresql+psycopg")


def database_target(db: str) -> str:
    """Exit 2 unless ``--db`` is a SQLite file path or a ``sqlite://`` / ``postgresql://`` URL."""
    if not db.strip() or db == STDIN or "\x00" in db:
        fail(f"--db {db!r}: expected a SQLite file path or a database URL")
    if "://" in db and db.split("://", 1)[0].lower() not in _DATABASE_SCHEMES:
        fail(f"--db {shown(db)}: unsupported database URL; expected a SQLite path, sqlite:/// or postgresql:// URL")
    if "://" not in db and Path(db).expanduser().is_dir():
        fail(f"--db {shown(db)} is a directory; expected a SQLite file path (it is created if missing)")
    return db


def existing_file(path: Path, what: str) -> Path:
    """Exit 2 unless ``path`` names an existing regular file (or a pipe): not a directory, device or nothing."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        fail(f"{what} file {shown(path)}: cannot read it ({exc.strerror or type(exc).__name__})")
    if stat.S_ISDIR(mode):
        fail(f"{what} file {shown(path)} is a directory; expected a file")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        fail(f"{what} file {shown(path)} is not a regular file (a device or socket?)")
    return path


@contextmanager
def reading(path: Path | str, what: str) -> Iterator[None]:
    """Turn a reader's decoding, JSON, nesting and file errors inside the block into one exit-2 message.

    For library readers (datasets, calibration files) that open ``path`` themselves: whatever they raise about
    the file's bytes is reported as a problem of ``what`` file ``path``.
    """
    where = f"{what} file {shown(path)}"
    try:
        yield
    except UnicodeDecodeError as exc:
        fail(f"{where} is not UTF-8 text (bad byte at offset {exc.start})")
    except json.JSONDecodeError as exc:
        fail(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        fail(f"{where}: JSON nested too deeply")
    except ValueError as exc:
        if not _int_limit(exc):
            raise
        fail(f"{where}: holds an integer longer than the parser accepts ({exc})")
    except (IsADirectoryError, FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        fail(f"{where}: cannot read it ({exc.strerror or type(exc).__name__})")


def _int_limit(exc: ValueError) -> bool:
    """Whether ``exc`` is the interpreter refusing an over-long integer literal (``int_max_str_digits``)."""
    return "integer string conversion" in str(exc)


def iter_json_lines(path: Path, what: str) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a JSON-lines file (or ``-``) with their 1-based numbers."""
    for number, line in enumerate(read_text(path, what).splitlines(), start=1):
        if line.strip():
            yield number, line


_PROMPT_KEYS = {"messages", "chunks", "question", "request_id", "metadata"}


def load_prompt(path: Path) -> PromptRecord:
    """Load ``{"messages", "chunks", "question"}`` or a logged :class:`PromptRecord`."""
    where = f"prompt file {shown(path)}"
    data = read_json(path, "prompt")
    if not isinstance(data, dict):
        fail(f'{where}: expected a JSON object {{"messages": [...], "chunks": [...]}}, got {json_kind(data)}')
    try:
        if "sha256" in data and "normalized" in data:
            return load_record(data)  # validated, and its derived fields checked against its messages
        unknown = set(data) - _PROMPT_KEYS
        if unknown:
            fail(f"{where}: unknown fields {sorted(unknown)[:10]}; expected {sorted(_PROMPT_KEYS)}")
        for key in ("messages", "chunks"):
            if not isinstance(data.get(key), list):
                fail(f"{where}: '{key}' must be a list, got {json_kind(data.get(key))}")
        question = data.get("question")
        if question is not None and not isinstance(question, str):
            fail(f"{where}: 'question' must be a string, got {json_kind(question)}")
        request_id = data.get("request_id")
        if request_id is not None and not isinstance(request_id, str):
            fail(f"{where}: 'request_id' must be a string, got {json_kind(request_id)}")
        metadata = data.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            fail(f"{where}: 'metadata' must be an object, got {json_kind(metadata)}")
        return record_from_messages(
            data["messages"], data["chunks"], question=question, request_id=request_id, metadata=metadata
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        fail(f"{where}: {'.'.join(map(str, err['loc'])) or 'record'}: {err['msg']}")
    except CitelockError as exc:
        fail(f"{where}: {exc}")


def load_store_ids(path: Path) -> set[str]:
    """Read a chunk store (JSON lines of ``{"id", "text"}``) and return its ids."""
    ids: set[str] = set()
    for number, line in iter_json_lines(path, "store"):
        row = loads_checked(line, f"store file {shown(path)} line {number}")
        if not isinstance(row, dict):
            fail(
                f'store file {shown(path)} line {number}: expected {{"id": "...", "text": "..."}}, got {json_kind(row)}'
            )
        if not isinstance(row.get("id"), str):
            fail(f"store file {shown(path)} line {number}: 'id' must be a string, got {json_kind(row.get('id'))}")
        ids.add(row["id"])
    return ids
