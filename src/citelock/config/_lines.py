"""Which line of a TOML file each key is on (``tomllib`` parses values but keeps no positions).

A small scanner over the text, not a second parser: it follows table headers (``[a.b]``, ``[[a]]``) and
``key = value`` lines (bare, quoted and dotted keys), skipping the bodies of multi-line strings and arrays, and maps
each key's full path to its 1-based line. A key inside an inline table (``audit = { seed = 1 }``) is not mapped on
its own: :func:`line_of` falls back to the nearest enclosing key that is, which is on the same line. This is enough
to point a person at a key; the values themselves always come from ``tomllib``. (``tomlkit`` keeps the document's
layout, but it has no line numbers either, and would be a dependency for this one lookup.)
"""

from __future__ import annotations

import re

from citelock.config._env import KeyPath

__all__ = ["key_lines", "line_of"]

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")
_PART = re.compile(r"""[A-Za-z0-9_-]+|"([^"]*)"|'([^']*)'""")


def _parts(dotted: str) -> KeyPath:
    out = []
    for match in _PART.finditer(dotted):
        quoted = match.group(1) if match.group(1) is not None else match.group(2)
        out.append(quoted if quoted is not None else match.group(0))
    return tuple(out)


def key_lines(text: str) -> dict[KeyPath, int]:
    """Every table's and key's path in ``text`` mapped to the line it is written on (first occurrence)."""
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    skip_until: str | None = None
    depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if skip_until is not None:  # inside a multi-line string
            if line.count(skip_until) % 2 == 1:
                skip_until = None
            continue
        if depth > 0:  # inside a multi-line array
            depth += line.count("[") - line.count("]")
            continue
        header = _HEADER.match(line)
        if header:
            table = _parts(header.group(1))
            for n in range(1, len(table) + 1):
                lines.setdefault(table[:n], number)
            continue
        key = _KEY.match(line)
        if key is None:
            continue
        path = (*table, *_parts(key.group(1)))
        for n in range(len(table) + 1, len(path) + 1):
            lines.setdefault(path[:n], number)
        rest = line[key.end() :]
        for quote in ('"""', "'''"):
            if rest.count(quote) % 2 == 1:
                skip_until = quote
        stripped = rest.split("#", 1)[0] if '"' not in rest and "'" not in rest else rest
        if stripped.strip().startswith("["):
            depth = max(0, stripped.count("[") - stripped.count("]"))
    return lines


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of ``path``, else of its nearest enclosing key that has one (None when nothing matches)."""
    for n in range(len(path), 0, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None
