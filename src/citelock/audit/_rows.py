"""Reading an audit's input: JSONL or Parquet rows exported from another system, or the prompt log plus answers.

Every input becomes a stream of :class:`AuditItem` s, one per answer, in a stable order: the inputs in the order
given, the rows of each in file order. An item carries a *key* that is unique per input row and the same on
every rerun of the same input (the resume and deduplication key: a hash of the input's absolute path, the row
number and the row's content), where the row came from (``source``, 1-based ``row``), and either the row as read
(``payload``) or why it could not be read (``error``). Reading never stops at a bad row: the row becomes an item
with an error, reported and counted by the audit.

The row format is :class:`AuditRow` (JSON Schema ``schemas/audit_row.v1.json``): ``messages`` exactly as sent,
the ``chunks`` meant to be in them, the ``answer``, and optionally ``question``, ``request_id``, ``created_at`` and
``metadata``. In Parquet, nested values may be nested columns or JSON text in a string column, and a null is the
same as an absent field.

The prompt log (a SQLite file or a ``postgresql://`` URL) stores prompts, not answers: an audit of the log reads
the answers from answer files (:class:`AnswerRow`, ``schemas/audit_answer.v1.json``: ``{request_id, answer}``
rows, JSONL or Parquet) and takes each answer's prompt, exactly as logged and verified against its hash, from
the log. ``since``/``until`` keep the answers whose prompt was logged in that window.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from citelock.errors import InputError, MissingExtraError, StoreIntegrityError, json_kind, json_refusal
from citelock.records import Chunk, Message

__all__ = [
    "AnswerRow",
    "AuditItem",
    "AuditRow",
    "InputKind",
    "ReadStats",
    "answer_row_problem",
    "answer_row_schema",
    "check_inputs",
    "count_rows",
    "input_kind",
    "read_items",
    "row_problem",
    "row_schema",
]

InputKind = Literal["jsonl", "parquet", "log"]
"""What an input is: a JSON-lines file, a Parquet file, or a prompt log (SQLite file or database URL)."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_PARQUET_MAGIC = b"PAR1"
_PARQUET_BATCH = 256
_JSON_TEXT_FIELDS = ("messages", "chunks", "metadata")
_MESSAGE_CHARS = 200


class AuditRow(BaseModel):
    """One exported answer to audit: the prompt exactly as sent, its chunks and the answer.

    Attributes:
        messages: The chat messages exactly as sent to the model.
        chunks: The chunks that were meant to be in them, with their full text (their bodies are located in the
            messages; a chunk cut short is ``truncated``, one not there ``missing``).
        answer: The model's answer: free text with inline markers (``[c-1]``), or ``{"claims": [...]}``, or
            ``{"text": "..."}`` (see ``answer.v1.json``), as an object or as JSON text.
        question: The user's question, if known (located in the prompt for ``SPAN_ONLY_IN_QUESTION``).
        request_id: The request's id in the exporting system. Without one, the audit derives a deterministic id
            from the row's content, so reruns agree.
        created_at: When the request was made (ISO 8601; without a time zone it is UTC): the week its results
            count in. Default: when it is audited.
        metadata: Anything else worth carrying on the prompt record (user, trace ids): JSON values.
    """

    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(min_length=1)
    chunks: list[Chunk]
    answer: str | dict[str, Any]
    question: str | None = None
    request_id: str | None = Field(default=None, min_length=1, max_length=200)
    created_at: datetime | None = None
    metadata: dict[str, Any] | None = None


class AnswerRow(BaseModel):
    """An answer to a prompt in the prompt log, for an audit of the log.

    Attributes:
        request_id: The logged prompt's request id.
        answer: The model's answer (as in :class:`AuditRow`).
    """

    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1, max_length=200)
    answer: str | dict[str, Any]


@dataclass(frozen=True)
class AuditItem:
    """One input answer, as read (picklable: it crosses process boundaries).

    Attributes:
        key: Unique per input row and stable across reruns of the same input: the resume and dedup key.
        source: The input it came from (a file name as given, or the answers file of a log audit).
        row: Its 1-based position in ``source`` (the line number in a JSONL file, the row in a Parquet file).
        payload: The row as read (``{messages, chunks, answer, ...}``), or for the prompt log
            ``{"record": <PromptRecord JSON>, "answer": ...}``; None when the row could not be read.
        error: Why the row could not be read (bad JSON, not UTF-8, not an object ...); then ``payload`` is None.
        logged: The payload is a logged record and its answer (a prompt log audit), not an exported row.
    """

    key: str
    source: str
    row: int
    payload: dict[str, Any] | None = None
    error: str | None = None
    logged: bool = False


@dataclass
class ReadStats:
    """What reading skipped on purpose (not errors), for the summary.

    Attributes:
        outside_window: Log answers whose prompt was logged outside ``since``/``until``.
    """

    outside_window: int = 0


def input_kind(target: str) -> InputKind:
    """Whether ``target`` is a JSONL file, a Parquet file or a prompt log (by URL, magic bytes, then suffix).

    Raises:
        InputError: a path that does not exist or is not a file.
    """
    if "://" in target:
        return "log"
    path = Path(target).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise InputError(f"audit input {target}: {what}; expected a JSONL or Parquet file, or a prompt log")
    with path.open("rb") as handle:
        head = handle.read(len(_SQLITE_MAGIC))
    if head.startswith(_SQLITE_MAGIC):
        return "log"
    if head.startswith(_PARQUET_MAGIC) or path.suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    return "jsonl"


def read_items(
    inputs: Sequence[str],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    answers: Sequence[str] = (),
    stats: ReadStats | None = None,
) -> Iterator[AuditItem]:
    """Stream the items of ``inputs`` in a stable order (inputs as given, rows in file order).

    The inputs and options are checked when this is called, before the first item is read.

    Args:
        inputs: JSONL / Parquet files of :class:`AuditRow` rows, or one prompt log (a SQLite file or a
            ``postgresql://`` URL).
        since: With a prompt log: only answers whose prompt was logged at or after this time.
        until: With a prompt log: only answers whose prompt was logged before this time.
        answers: With a prompt log: the JSONL / Parquet files of :class:`AnswerRow` rows.
        stats: Filled with what was skipped on purpose (answers outside the window).

    Raises:
        InputError: no inputs, an input that does not exist, a log mixed with files, a log without answer
            files, ``since``/``until``/``answers`` without a log, ``since`` not before ``until``.
        MissingExtraError: a Parquet input without pyarrow (``pip install citelock[audit]``).
    """
    kinds = check_inputs(inputs, answers=answers, since=since, until=until)
    stats = stats if stats is not None else ReadStats()
    if kinds == ["log"]:
        return _log_items(inputs[0], answers, since, until, stats)
    return _files_items(inputs, kinds)


def check_inputs(
    inputs: Sequence[str],
    *,
    answers: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[InputKind]:
    """The kind of each input, after checking that they can be audited together (see :func:`read_items`).

    Raises:
        InputError: as :func:`read_items`.
        MissingExtraError: a Parquet input or answers file without pyarrow.
    """
    kinds = [input_kind(target) for target in inputs]
    if not kinds:
        raise InputError("no audit input: give JSONL or Parquet files, or a prompt log")
    answer_kinds = [input_kind(source) for source in answers]
    if "log" in answer_kinds:
        raise InputError("--answers: expected JSONL or Parquet files of answers, got a database")
    if "parquet" in (*kinds, *answer_kinds):
        _parquet_module()
    if "log" in kinds:
        if len(kinds) > 1:
            raise InputError("audit one prompt log at a time, and not together with JSONL or Parquet files")
        if not answers:
            raise InputError(
                f"the prompt log {inputs[0]} stores prompts, not answers: give the answers with --answers FILE "
                '(JSONL or Parquet rows {"request_id": ..., "answer": ...})'
            )
        since, until = _utc(since), _utc(until)
        if since is not None and until is not None and since >= until:
            raise InputError(f"--since {since.isoformat()} is not before --until {until.isoformat()}")
        return kinds
    if since is not None or until is not None:
        raise InputError("--since/--until select prompts by the time they were logged: they need a prompt log input")
    if answers:
        raise InputError("--answers gives the answers of a prompt log: it needs a prompt log input")
    return kinds


def count_rows(inputs: Sequence[str], *, answers: Sequence[str] = ()) -> int:
    """How many rows the inputs hold (non-blank JSONL lines, Parquet rows; a log's answers), for progress."""
    total = 0
    for target in answers or inputs:
        kind = input_kind(target)
        if kind == "parquet":
            total += int(_parquet_module().ParquetFile(Path(target).expanduser()).metadata.num_rows)
        elif kind == "jsonl":
            with Path(target).expanduser().open("rb") as handle:
                total += sum(1 for line in handle if line.strip())
    return total


def _files_items(inputs: Sequence[str], kinds: Sequence[InputKind]) -> Iterator[AuditItem]:
    for target, kind in zip(inputs, kinds, strict=True):
        yield from _file_items(target, kind)


def _parquet_module() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("audit", "pyarrow") from None
    return pq


def input_path(source: str) -> str:
    """An input file as the audit names it (in keys, the manifest and the report's order): its absolute path."""
    return os.path.abspath(os.path.expanduser(source))


def _file_items(target: str, kind: InputKind) -> Iterator[AuditItem]:
    """The rows of one JSONL or Parquet file, as items keyed by (absolute path, row, content)."""
    where = input_path(target)
    rows = _jsonl_rows(target) if kind == "jsonl" else _parquet_rows(target)
    for number, payload, digest, error in rows:
        yield AuditItem(
            key=_key(where, number, digest),
            source=target,
            row=number,
            payload=payload,
            error=error,
        )


def _key(where: str, row: int, digest: str) -> str:
    return hashlib.sha256(f"{where}\x1f{row}\x1f{digest}".encode()).hexdigest()[:32]


_Row = tuple[int, dict[str, Any] | None, str, str | None]
"""(1-based row, payload or None, content digest, error or None)."""


def _jsonl_rows(target: str) -> Iterator[_Row]:
    """Each non-blank line of a JSON-lines file, parsed; a line that is not a JSON object becomes an error."""
    with Path(target).expanduser().open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            digest = hashlib.sha256(raw.rstrip(b"\r\n")).hexdigest()
            payload, error = _parse_line(raw)
            yield number, payload, digest, error


def _parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (bad byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} at column {exc.colno}"
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as exc:  # anything else the parser refuses: an integer longer than int_max_str_digits
        return None, json_refusal(exc, text)
    if not isinstance(value, dict):
        return None, f"expected a JSON object {{messages, chunks, answer, ...}}, got {json_kind(value)}"
    return value, None


def _parquet_rows(target: str) -> Iterator[_Row]:
    """Each row of a Parquet file as a JSON-like dict (nulls dropped, JSON-text nested columns parsed)."""
    pq = _parquet_module()
    try:
        file = pq.ParquetFile(Path(target).expanduser())
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError with its own message
        raise InputError(f"audit input {target}: not a readable Parquet file ({exc})") from None
    number = 0
    for batch in file.iter_batches(batch_size=_PARQUET_BATCH):
        for values in batch.to_pylist():
            number += 1
            try:
                payload = _from_parquet(values)
                digest = hashlib.sha256(_canonical_bytes(payload)).hexdigest()
            except (ValueError, UnicodeEncodeError, RecursionError) as exc:
                yield number, None, f"unreadable:{number}", str(exc)
                continue
            yield number, payload, digest, None


def _from_parquet(values: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = _jsonable(values)
    for name in _JSON_TEXT_FIELDS:
        text = row.get(name)
        if isinstance(text, str):
            try:
                row[name] = json.loads(text)
            except ValueError as exc:  # JSONDecodeError, or an integer longer than int_max_str_digits
                problem = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else None
                problem = problem or json_refusal(exc, text)
                raise ValueError(f"{name}: a string column must hold JSON text ({problem})") from None
    return row


def _jsonable(value: Any) -> Any:
    """A Parquet value as JSON-like data: nulls in structs dropped, times as ISO 8601 text."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("a binary column that is not UTF-8 text") from None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ValueError(f"a value of type {type(value).__name__} that is not JSON data")


def _canonical_bytes(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no spaces); raises UnicodeEncodeError on a lone surrogate."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _log_items(
    target: str, answers: Sequence[str], since: datetime | None, until: datetime | None, stats: ReadStats
) -> Iterator[AuditItem]:
    """The answers of ``answers`` joined to their logged prompts (verified), within ``since``/``until``."""
    from citelock.store import PromptLog

    since, until = _utc(since), _utc(until)
    log = PromptLog(target)
    for source in answers:
        kind = input_kind(source)
        where = input_path(source)
        rows = _jsonl_rows(source) if kind == "jsonl" else _parquet_rows(source)
        for number, payload, digest, error in rows:
            key = _key(where, number, digest)
            if payload is None:
                yield AuditItem(key=key, source=source, row=number, error=error)
                continue
            problem = answer_row_problem(payload)
            if problem is not None:
                yield AuditItem(key=key, source=source, row=number, error=problem)
                continue
            request_id = payload["request_id"]
            try:
                record = log.get(request_id)
            except KeyError:
                yield AuditItem(
                    key=key, source=source, row=number, error=f"request id {request_id!r} is not in the prompt log"
                )
                continue
            except StoreIntegrityError as exc:  # this row's prompt cannot be trusted: reported, the audit goes on
                yield AuditItem(key=key, source=source, row=number, error=f"store integrity failure: {exc}")
                continue
            created = record.created_at if record.created_at.tzinfo else record.created_at.replace(tzinfo=UTC)
            if (since is not None and created < since) or (until is not None and created >= until):
                stats.outside_window += 1
                continue
            yield AuditItem(
                key=key,
                source=source,
                row=number,
                payload={"record": record.model_dump(mode="json"), "answer": payload["answer"]},
                logged=True,
            )


def row_schema() -> dict[str, Any]:
    """The JSON Schema of an exported row (:class:`AuditRow`; ``schemas/audit_row.v1.json``)."""
    return AuditRow.model_json_schema(mode="serialization")


def answer_row_schema() -> dict[str, Any]:
    """The JSON Schema of a log audit's answer row (:class:`AnswerRow`; ``schemas/audit_answer.v1.json``)."""
    return AnswerRow.model_json_schema(mode="serialization")


@cache
def _validator(which: str) -> Any:
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    return Draft202012Validator(row_schema() if which == "row" else answer_row_schema())


def row_problem(row: Mapping[str, Any]) -> str | None:
    """Why ``row`` does not match ``audit_row.v1.json`` (the most relevant error, with its JSON path), or None.

    A row the model accepts in strict mode (no coercion: at least as strict as the schema generated from it)
    matches the schema; only a row it refuses is checked by the JSON Schema validator, whose verdict stands and
    whose error is reported. The strict check is about thirty times faster than the schema validator, which
    otherwise dominates an audit of small answers. ``created_at`` is left to the schema (a string there; its
    ISO 8601 form is checked when the row is audited).
    """
    return _problem(_validator("row"), row) if not _strictly_valid(AuditRow, row) else None


def answer_row_problem(row: Mapping[str, Any]) -> str | None:
    """Why ``row`` does not match ``audit_answer.v1.json``, or None (checked as :func:`row_problem` does)."""
    return _problem(_validator("answer"), row) if not _strictly_valid(AnswerRow, row) else None


def _strictly_valid(model: type[BaseModel], row: Mapping[str, Any]) -> bool:
    created = row.get("created_at")
    if created is not None and not isinstance(created, str):
        return False
    try:
        model.model_validate({k: v for k, v in row.items() if k != "created_at"}, strict=True)
    except ValidationError:
        return False
    return True


def _problem(validator: Any, row: Mapping[str, Any]) -> str | None:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    error = best_match(validator.iter_errors(row))
    if error is None:
        return None
    message = error.message if len(error.message) <= _MESSAGE_CHARS else error.message[: _MESSAGE_CHARS - 1] + "…"
    return f"schema: {error.json_path}: {message}"


def _utc(moment: datetime | None) -> datetime | None:
    """A time as UTC; one without a time zone is taken as UTC."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
