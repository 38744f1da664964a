"""Finding the config file the way Python tools find theirs, and reading its table.

Highest first: an explicit path (``--config PATH``, ``Config.load(path)``), then ``CITELOCK_CONFIG``, then the
closest ``citelock.toml`` or ``pyproject.toml`` with a ``[tool.citelock]`` table, walking up from the working
directory (in one folder ``citelock.toml`` wins). A ``pyproject.toml`` without that table is passed over, as ruff
and pytest do. No file found is not an error: every value then has its default.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from citelock.errors import InputError

__all__ = ["CONFIG_ENV", "CONFIG_NAME", "ConfigSource", "discover", "read_source"]

CONFIG_NAME = "citelock.toml"
"""The config file's own name."""

CONFIG_ENV = "CITELOCK_CONFIG"
"""The environment variable naming the config file (below an explicit path, above discovery)."""

_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ConfigSource:
    """The file a config came from.

    Attributes:
        path: The file.
        how: How it was found: ``explicit``, ``env`` (``CITELOCK_CONFIG``) or ``discovered``.
        prefix: The table the config lives under: ``()`` in ``citelock.toml``, ``("tool", "citelock")`` in
            ``pyproject.toml``.
        text: The file's text (for key line numbers).
        data: The config's table as ``tomllib`` parsed it.
    """

    path: Path
    how: str
    prefix: tuple[str, ...]
    text: str
    data: Mapping[str, Any]


def discover(
    path: str | Path | None = None, *, environ: Mapping[str, str] | None = None, start: Path | None = None
) -> ConfigSource | None:
    """The config file to read, or None when there is none.

    Raises:
        InputError: an explicit or ``CITELOCK_CONFIG`` file that does not exist or cannot be parsed, or a
            discovered one that cannot be parsed.
    """
    env = os.environ if environ is None else environ
    if path is not None:
        return read_source(Path(path), "explicit")
    if env.get(CONFIG_ENV):
        return read_source(Path(env[CONFIG_ENV]), "env")
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        own = folder / CONFIG_NAME
        if own.is_file():
            return read_source(own, "discovered")
        project = folder / "pyproject.toml"
        if project.is_file():
            source = read_source(project, "discovered")
            if source.prefix:  # it has a [tool.citelock] table
                return source
    return None


def read_source(path: Path, how: str) -> ConfigSource:
    """Read and parse one config file (a ``pyproject.toml`` yields its ``[tool.citelock]`` table).

    Raises:
        InputError: the file is missing, unreadable, too large, not UTF-8 or not valid TOML.
    """
    origin = {"explicit": "--config", "env": CONFIG_ENV, "discovered": "config file"}.get(how, "config file")
    if not path.is_file():
        raise InputError(f"{origin} {path}: no such file (expected a citelock.toml or a pyproject.toml)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{origin} {path}: cannot be read: {exc.strerror or exc}") from None
    if len(raw) > _MAX_BYTES:
        raise InputError(f"{origin} {path}: {len(raw)} bytes; a config file is expected under {_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise InputError(f"{origin} {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        table = tool.get("citelock") if isinstance(tool, dict) else None
        if table is None:
            if how != "discovered":
                raise InputError(f"{origin} {path}: has no [tool.citelock] table")
            return ConfigSource(path, how, (), text, {})
        if not isinstance(table, dict):
            raise InputError(f"{path}: tool.citelock must be a table")
        return ConfigSource(path, how, ("tool", "citelock"), text, table)
    return ConfigSource(path, how, (), text, data)
