"""Unknown keys and their did-you-mean (``stakse`` → ``stakes``), found by walking the file against the schema.

The schema's models say which keys each table takes; a ``dict[str, Model]`` field (``judges``, ``backends``,
``surfaces``) takes any name, each entry a table of that model. :func:`unknown_keys` reports every key the schema
does not know, with the closest known key of the same table (:func:`difflib.get_close_matches`), and
:func:`strip_unknown` returns the data without them (what a non-strict load validates). :func:`schema_key_paths`
lists every key path the schema knows (``NAME`` for an entry's name), which a test misspells one by one.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from citelock.config._env import KeyPath
from citelock.config._schema import ConfigFile

__all__ = ["NAME", "UnknownKey", "schema_key_paths", "strip_unknown", "suggest", "unknown_keys"]

NAME = "NAME"
"""The placeholder for a named entry (a surface's, judge's or backend's name) in :func:`schema_key_paths`."""


@dataclass(frozen=True)
class UnknownKey:
    """A key the schema does not know.

    Attributes:
        path: The key's full path.
        suggestion: The closest known key of the same table, or None when none is close.
        known: Every key that table takes.
    """

    path: KeyPath
    suggestion: str | None
    known: tuple[str, ...]

    def message(self) -> str:
        """``unknown key surfaces.legal.stakse; did you mean 'stakes'?`` (or the keys the table takes)."""
        key = ".".join(self.path)
        if self.suggestion is not None:
            return f"unknown key {key}; did you mean {self.suggestion!r}?"
        return f"unknown key {key}; expected one of {', '.join(self.known)}"


def suggest(word: str, known: tuple[str, ...]) -> str | None:
    """The known key closest to ``word``, or None when none is close enough."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return close[0] if close else None


def _children(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """``("model", M)`` for a field holding a table of ``M``, ``("map", M)`` for ``dict[str, M]``, else None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _children(arg)
            if found is not None:
                return found
        return None
    if origin is dict:
        value = typing.get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return ("map", value)
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ("model", annotation)
    return None


def _walk(data: Mapping[str, Any], model: type[BaseModel], path: KeyPath) -> Iterator[UnknownKey]:
    known = tuple(model.model_fields)
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            yield UnknownKey((*path, key), suggest(key, known), known)
            continue
        kind = _children(field.annotation)
        if kind is None or not isinstance(value, Mapping):
            continue
        if kind[0] == "model":
            yield from _walk(value, kind[1], (*path, key))
        else:
            for name, entry in value.items():
                if isinstance(entry, Mapping):
                    yield from _walk(entry, kind[1], (*path, key, name))


def unknown_keys(data: Mapping[str, Any], model: type[BaseModel] = ConfigFile) -> list[UnknownKey]:
    """Every key of ``data`` the schema does not know, in file order."""
    return list(_walk(data, model, ()))


def strip_unknown(data: Mapping[str, Any], unknown: list[UnknownKey]) -> dict[str, Any]:
    """``data`` without the ``unknown`` keys (a deep copy of the tables on their paths)."""
    out: dict[str, Any] = dict(data)
    for item in unknown:
        table = out
        for part in item.path[:-1]:
            table[part] = dict(table[part])
            table = table[part]
        table.pop(item.path[-1], None)
    return out


def schema_key_paths(model: type[BaseModel] = ConfigFile, path: KeyPath = ()) -> list[KeyPath]:
    """Every key path the schema knows (a named entry's name is :data:`NAME`)."""
    out: list[KeyPath] = []
    for key, field in model.model_fields.items():
        out.append((*path, key))
        kind = _children(field.annotation)
        if kind is not None:
            inner = (*path, key) if kind[0] == "model" else (*path, key, NAME)
            out.extend(schema_key_paths(kind[1], inner))
    return out
