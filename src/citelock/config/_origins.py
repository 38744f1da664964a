"""Where each resolved value came from, as ``git config --show-origin`` prints it.

An :class:`Origin` is one of ``flag`` (a command-line option or a keyword argument), ``env`` (an environment
variable), ``file`` (a key of the config file, with its line; ``via`` names the surface it was inherited from and
the variables interpolated into it) or ``default``. :func:`show_lines` renders ``(key, value, origin)`` rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Origin", "OriginKind", "show_lines"]

OriginKind = Literal["flag", "env", "file", "default"]
"""Highest precedence first."""


@dataclass(frozen=True)
class Origin:
    """Where one value came from.

    Attributes:
        kind: ``flag``, ``env``, ``file`` or ``default``.
        name: The flag (``--stakes``), keyword or variable (``CITELOCK_DB``); for ``file``, the file's path.
        line: For ``file``: the key's line (None when the scanner did not place it).
        inherited: For ``file``: the surface the value was inherited from, if it was.
        variables: For ``file``: the environment variables interpolated into it.
    """

    kind: OriginKind
    name: str = ""
    line: int | None = None
    inherited: str | None = None
    variables: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "default":
            return "default"
        if self.kind != "file":
            return f"{self.kind} {self.name}"
        where = f"file {self.name}" + (f":{self.line}" if self.line is not None else "")
        if self.inherited is not None:
            where += f" (inherited from {self.inherited})"
        if self.variables:
            where += f" (env {', '.join(self.variables)})"
        return where


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "(none)"
    return json.dumps(value, ensure_ascii=False, default=str)


def show_lines(rows: Iterable[tuple[str, Any, Origin]]) -> list[str]:
    """``origin<TAB>key = value`` lines, the origin column first (as ``git config --show-origin``)."""
    rows = list(rows)
    width = max((len(str(origin)) for _, _, origin in rows), default=0)
    return [f"{origin!s:<{width}}  {key} = {_shown(value)}" for key, value, origin in rows]
