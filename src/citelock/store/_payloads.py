"""The prompt log's large constraint payloads, stored once each by content (sha256) in a table of their own.

A wrapped call's record carries the constraint it injected (``metadata["wrap"]["constraint"]``): for the
``substring`` policy on llama.cpp a grammar of 10-100 KB at 10 chunks, the same for every call over the same
chunks. The log stores such a payload (its JSON text, at least :data:`MIN_PAYLOAD_BYTES` bytes, every
value a string) once in ``citelock_prompt_payload`` under its sha256; the record's row keeps the record's JSON
with the payload replaced by a reference, ``{"$citelock_payload": "<sha256>"}``, and names the payload in its
``payload_sha256`` column. Reading splices the payload back: the text read is the record's JSON exactly as it was
written, and its ``record_sha256`` (which the hash chain commits to) is the hash of that whole text, as for a
record stored whole. A payload that no longer matches its hash, or is missing, makes the record unreadable.

The payload's JSON and hash are cached by the identity of its (immutable) string values (at most 64 payloads
and about 8 MB), so a repeated chunk set neither re-serializes nor re-hashes its grammar; a payload seen for the
first time is checked once against the record's own full serialization, and a record whose splice would not
give that exact text is stored whole.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pydantic_core
from sqlalchemy import Column, MetaData, String, Table, Text

from citelock.records import PromptRecord

__all__ = ["MIN_PAYLOAD_BYTES", "PAYLOAD_TABLE", "Split", "joined", "payload_table", "reference", "split_record"]

PAYLOAD_TABLE = "citelock_prompt_payload"
MIN_PAYLOAD_BYTES = 1024
"""Payloads whose JSON is shorter than this (UTF-8 bytes) stay inside their record."""
_REF_KEY = "$citelock_payload"
_CACHE_ENTRIES = 64
_CACHE_BYTES = 8_000_000


def payload_table(metadata: MetaData) -> Table:
    """The payload table, in the prompt log's metadata (append-only like the log)."""
    return Table(
        PAYLOAD_TABLE,
        metadata,
        Column("sha256", String(64), primary_key=True),
        Column("payload", Text, nullable=False),
    )


def reference(sha256: str) -> str:
    """The JSON text that stands for a payload inside a stored record."""
    return f'{{"{_REF_KEY}":"{sha256}"}}'


@dataclass(frozen=True)
class Split:
    """How one record is stored.

    Attributes:
        stored: The ``record`` column's text (the record's JSON, the payload replaced by its reference).
        record_sha256: sha256 of the record's whole JSON (the payload in place).
        payload_sha256: The payload's sha256 (None: the record is stored whole).
        payload: The payload's JSON text, UTF-8 (None: stored whole).
    """

    stored: str
    record_sha256: str
    payload_sha256: str | None = None
    payload: bytes | None = None


@dataclass(frozen=True)
class _Entry:
    values: tuple[str, ...]  # held, so the ids in the cache key stay these objects' ids
    data: bytes
    sha256: str
    splices: bool | None  # None: not yet checked against a record's full serialization


class _Cache:
    """Payload JSON and hash by the identity of the payload's string values (LRU bounded in entries and bytes).

    Thread-safe. An entry holds its string values, so no other object can take their ids while it is cached.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[tuple[str, int], ...], _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, payload: dict[str, str]) -> _Entry:
        key = tuple((name, id(value)) for name, value in payload.items())
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(a is b for a, b in zip(entry.values, payload.values(), strict=True)):
                self._entries.move_to_end(key)
                return entry
        data = pydantic_core.to_json(payload)
        entry = _Entry(tuple(payload.values()), data, hashlib.sha256(data).hexdigest(), None)
        self.put(key, entry)
        return entry

    def put(self, key: tuple[tuple[str, int], ...], entry: _Entry) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            self._bytes += 2 * len(entry.data) - (2 * len(old.data) if old is not None else 0)  # data and values
            self._entries[key] = entry
            while len(self._entries) > _CACHE_ENTRIES or (self._bytes > _CACHE_BYTES and len(self._entries) > 1):
                self._bytes -= 2 * len(self._entries.popitem(last=False)[1].data)

    def checked(self, payload: dict[str, str], entry: _Entry, splices: bool) -> None:
        key = tuple((name, id(value)) for name, value in payload.items())
        self.put(key, _Entry(entry.values, entry.data, entry.sha256, splices))


_cache = _Cache()


def _whole(record: PromptRecord) -> Split:
    text = record.model_dump_json()
    return Split(text, hashlib.sha256(text.encode("utf-8")).hexdigest())


def _payload_of(record: PromptRecord) -> tuple[dict[str, Any], dict[str, str]] | None:
    wrap = record.metadata.get("wrap")
    constraint = wrap.get("constraint") if isinstance(wrap, dict) else None
    if not isinstance(wrap, dict) or not isinstance(constraint, dict) or not constraint:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in constraint.items()):
        return None  # only immutable values are cached by identity; schemas stay inside the record
    return wrap, constraint


def split_record(record: PromptRecord) -> Split:
    """How ``record`` is stored: its large constraint payload apart when it has one, else whole."""
    found = _payload_of(record)
    if found is None:
        return _whole(record)
    wrap, payload = found
    entry = _cache.get(payload)
    if len(entry.data) < MIN_PAYLOAD_BYTES or entry.splices is False:
        return _whole(record)
    ref = reference(entry.sha256)
    slim = record.model_copy(
        update={"metadata": {**record.metadata, "wrap": {**wrap, "constraint": {_REF_KEY: entry.sha256}}}}
    )
    stored = slim.model_dump_json()
    at = stored.find(ref)
    if at < 0 or stored.find(ref, at + 1) >= 0:
        return _whole(record)  # the caller's own metadata holds this reference too: no unambiguous splice
    head, tail = stored[:at].encode("utf-8"), stored[at + len(ref) :].encode("utf-8")
    if entry.splices is None:
        splices = head + entry.data + tail == record.model_dump_json().encode("utf-8")
        _cache.checked(payload, entry, splices)
        if not splices:  # pragma: no cover - the serializer writes a value the same way wherever it sits
            return _whole(record)
    digest = hashlib.sha256(head)
    digest.update(entry.data)
    digest.update(tail)
    return Split(stored, digest.hexdigest(), entry.sha256, entry.data)


def joined(stored: str, payload_sha256: str | None, payload: str | None) -> tuple[str | None, str | None]:
    """The record's whole JSON from its stored text and payload, or None and what is wrong."""
    if payload_sha256 is None:
        return stored, None
    if payload is None:
        return None, f"its constraint payload {payload_sha256[:16]}… is missing from {PAYLOAD_TABLE}"
    if hashlib.sha256(payload.encode("utf-8")).hexdigest() != payload_sha256:
        return None, "its constraint payload was altered: it no longer matches its hash"
    ref = reference(payload_sha256)
    at = stored.find(ref)
    if at < 0:
        return None, "its content was altered: the reference to its constraint payload is gone"
    return stored[:at] + payload + stored[at + len(ref) :], None
