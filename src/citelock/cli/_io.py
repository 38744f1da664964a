"""Reading the command line's input files with errors that name the file and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError

from citelock.cli._app import EXIT_INPUT
from citelock.errors import CitelockError
from citelock.prompt._serialize import record_from_messages
from citelock.records import PromptRecord

__all__ = ["MAX_INPUT_BYTES", "fail", "load_prompt", "load_store_ids", "read_json", "read_text"]

MAX_INPUT_BYTES = 64 * 1024 * 1024


def fail(message: str) -> NoReturn:
    """Print an input error to stderr and exit with code 2."""
    typer.echo(f"citelock: error: {message}", err=True)
    raise typer.Exit(EXIT_INPUT)


def read_text(path: Path, what: str) -> str:
    """Read a UTF-8 file, refusing missing, oversized and non-UTF-8 files."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        fail(f"{what} file {path}: cannot read it ({exc.strerror})")
    if size > MAX_INPUT_BYTES:
        fail(f"{what} file {path} is {size} bytes; the limit is {MAX_INPUT_BYTES} bytes")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{what} file {path} is not UTF-8 text (bad byte at offset {exc.start})")


def read_json(path: Path, what: str) -> Any:
    """Read a JSON file with a clear error for invalid JSON."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{what} file {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")


_PROMPT_KEYS = {"messages", "chunks", "question", "request_id", "metadata"}


def load_prompt(path: Path) -> PromptRecord:
    """Load ``{"messages", "chunks", "question"}`` or a logged :class:`PromptRecord`."""
    data = read_json(path, "prompt")
    if not isinstance(data, dict):
        fail(
            f'prompt file {path}: expected a JSON object {{"messages": [...], "chunks": [...]}}, '
            f"got {type(data).__name__}"
        )
    try:
        if "sha256" in data and "normalized" in data:
            return PromptRecord.model_validate(data)
        unknown = set(data) - _PROMPT_KEYS
        if unknown:
            fail(f"prompt file {path}: unknown fields {sorted(unknown)}; expected {sorted(_PROMPT_KEYS)}")
        for key in ("messages", "chunks"):
            if not isinstance(data.get(key), list):
                fail(f"prompt file {path}: '{key}' must be a list, got {type(data.get(key)).__name__}")
        question = data.get("question")
        if question is not None and not isinstance(question, str):
            fail(f"prompt file {path}: 'question' must be a string, got {type(question).__name__}")
        return record_from_messages(
            data["messages"],
            data["chunks"],
            question=question,
            request_id=data.get("request_id"),
            metadata=data.get("metadata"),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        fail(f"prompt file {path}: {'.'.join(map(str, err['loc']))}: {err['msg']}")
    except CitelockError as exc:
        fail(f"prompt file {path}: {exc}")


def load_store_ids(path: Path) -> set[str]:
    """Read a chunk store (JSON lines of ``{"id", "text"}``) and return its ids."""
    ids: set[str] = set()
    for number, line in enumerate(read_text(path, "store").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            fail(f"store file {path} line {number}: not valid JSON ({exc.msg})")
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            fail(f'store file {path} line {number}: expected {{"id": "...", "text": "..."}}')
        ids.add(row["id"])
    return ids
