"""Environment interpolation: a config file names a secret's variable, never the secret.

Two forms, anywhere a string is expected: ``"${VAR}"`` inside a string (``"postgresql://app:${PG_PASSWORD}@db/rag"``;
``$${`` writes a literal ``${``), and the table ``{ env = "VAR" }`` (optionally ``default = "..."``). A variable that
is not set, in either form without a default, is an error naming the variable and the key that needs it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from citelock.errors import InputError

__all__ = ["KeyPath", "interpolate"]

KeyPath = tuple[str, ...]
"""A key's path from the top of the file, e.g. ``("surfaces", "legal", "stakes")``."""

_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BAD_REFERENCE = re.compile(r"(?<!\$)\$\{(?![A-Za-z_][A-Za-z0-9_]*\})")


def interpolate(
    data: Mapping[str, Any], environ: Mapping[str, str], where: Any
) -> tuple[dict[str, Any], dict[KeyPath, list[str]]]:
    """Replace every environment reference in ``data``; return the new data and which variables fed which key.

    Args:
        data: The parsed TOML.
        environ: The environment to read.
        where: Called with a key path, returns the text naming its place (``citelock.toml:12``) for errors.

    Raises:
        InputError: a variable that is not set (and has no default), or a malformed reference.
    """
    used: dict[KeyPath, list[str]] = {}
    out = _walk(dict(data), (), environ, where, used)
    assert isinstance(out, dict)
    return out, used


def _walk(value: Any, path: KeyPath, environ: Mapping[str, str], where: Any, used: dict[KeyPath, list[str]]) -> Any:
    if isinstance(value, Mapping):
        if "env" in value and set(value) <= {"env", "default"}:
            return _table(value, path, environ, where, used)
        return {k: _walk(v, (*path, k), environ, where, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, path, environ, where, used) for v in value]
    if isinstance(value, str) and "${" in value:
        return _string(value, path, environ, where, used)
    return value


def _table(
    value: Mapping[str, Any], path: KeyPath, environ: Mapping[str, str], where: Any, used: dict[KeyPath, list[str]]
) -> str:
    key = ".".join(path)
    name, default = value["env"], value.get("default")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise InputError(f"{where(path)}: {key}: env = {name!r}: expected an environment variable's name")
    if default is not None and not isinstance(default, str):
        raise InputError(f"{where(path)}: {key}: default = {default!r}: expected a string")
    used.setdefault(path, []).append(name)
    found = environ.get(name, default)
    if found is None:
        raise InputError(f"{where(path)}: {key} reads the environment variable {name}, which is not set")
    return found


def _string(value: str, path: KeyPath, environ: Mapping[str, str], where: Any, used: dict[KeyPath, list[str]]) -> str:
    key = ".".join(path)
    if _BAD_REFERENCE.search(value):
        raise InputError(
            f"{where(path)}: {key}: {value!r}: expected ${{NAME}} with a variable name (or $${{ for a literal '${{')"
        )

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:  # "$${": a literal "${"
            return "${"
        used.setdefault(path, []).append(name)
        if name not in environ:
            raise InputError(f"{where(path)}: {key} reads the environment variable {name}, which is not set")
        return environ[name]

    return _REFERENCE.sub(replace, value)
