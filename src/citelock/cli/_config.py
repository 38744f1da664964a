"""``citelock config show | check | init``, and how every command reads the config file.

:func:`load_config` is the one place a command reads ``citelock.toml`` (``--config``, ``$CITELOCK_CONFIG`` or
discovered): a file that fails validation exits 2 before anything else runs, and its unknown keys are printed as
warnings with their file, line and did-you-mean. :func:`config_store` gives the store commands their database
below ``--db`` and ``$CITELOCK_DB``; :func:`note_surface` warns when a surface filter names no surface of the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock.cli._app import EXIT_OK, app
from citelock.cli._io import fail, is_stdin, shown
from citelock.config import STARTER, Config, Origin, show_lines, suggest
from citelock.errors import UsageError

__all__ = ["ConfigOption", "config_app", "config_store", "load_config", "note_surface"]

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="citelock.toml (or a pyproject.toml with [tool.citelock]); default: $CITELOCK_CONFIG, else the closest "
        "citelock.toml or [tool.citelock] walking up from here",
        show_default=False,
    ),
]

config_app = typer.Typer(
    help="The config file (citelock.toml or [tool.citelock]): show resolved values and origins, check, init.",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")


def load_config(path: Path | None, *, strict: bool = False, warn: bool = True) -> Config:
    """The config file (``--config``, ``$CITELOCK_CONFIG`` or discovered), validated; exit 2 when it is invalid.

    Unknown keys are printed as warnings on standard error, each with its file, line and did-you-mean (errors,
    exit 2, under ``strict``); ``warn=False`` for a second read in the same command (warned once).
    """
    if path is not None and is_stdin(path):
        fail("--config reads a file: standard input ('-') is not accepted here")
    try:
        config = Config.load(path, strict=strict)
    except UsageError as exc:
        fail(str(exc))
    for issue in config.warnings if warn else ():
        typer.echo(f"citelock: warning: {issue}", err=True)
    return config


def config_store(path: Path | None) -> str | None:
    """The store the config names (``$CITELOCK_DB`` above the file's ``store``), or None."""
    return load_config(path).store


def note_surface(path: Path | None, surface: str | None) -> None:
    """Warn (with a did-you-mean) when ``surface`` filters by a name the config file does not define."""
    if surface is None:
        return
    config = load_config(path, warn=False)
    if config.surface_names and surface not in config.surface_names:
        hint = suggest(surface, config.surface_names)
        did = f"; did you mean {hint!r}?" if hint else ""
        typer.echo(f"citelock: warning: surface {surface!r} is not in {config.path}{did}", err=True)


_SECRET_URL = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@]*:)(?P<password>[^@]*)(?P<tail>@)", re.IGNORECASE)


def _masked(key: str, value: Any) -> Any:
    """A secret is never printed: an ``api_key`` shows as stars, a URL's password too."""
    if not isinstance(value, str):
        return value
    if key.endswith("api_key"):
        return "********"
    return _SECRET_URL.sub(lambda m: f"{m['head']}********{m['tail']}", value)


def _entries(config: Config) -> list[tuple[str, Any, Origin]]:
    rows: list[tuple[str, Any, Origin]] = []
    for table, entries in (("judges", config.judges), ("backends", config.backends)):
        for name, entry in entries.items():
            for key in entry.model_fields_set:
                value = getattr(entry, key)
                value = value.model_dump() if hasattr(value, "model_dump") else value
                origin = config.file_origin((table, name, key))
                rows.append((f"{table}.{name}.{key}", _masked(key, value), origin))
    return rows


@config_app.command("show")
def show(
    config: ConfigOption = None,
    surface: Annotated[
        str | None, typer.Option("--surface", help="the surface to resolve (default: default_surface)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print keys, values and origins as JSON")] = False,
) -> None:
    """Print the resolved values and where each came from (file:line, env, flag or default).

    Like `git config --show-origin`: the store, the default surface and backend, the named judges and backends,
    then every key of the surface (--surface, else default_surface), inherited keys naming the surface they came
    from. Secrets are masked.
    """
    loaded = load_config(config)
    rows = [(k, _masked(k, v), o) for k, v, o in loaded.top_level()] + _entries(loaded)
    name = surface or loaded.default_surface
    if name is not None:
        try:
            settings = loaded.surface_settings(name)
        except UsageError as exc:
            fail(str(exc))
        rows += [(f"surfaces.{name}.{k}", v, o) for k, v, o in settings.rows()]
    if as_json:
        data = {
            "file": str(loaded.path) if loaded.path is not None else None,
            "values": [{"key": k, "value": v, "origin": str(o)} for k, v, o in rows],
        }
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return
    typer.echo(f"# config file: {shown(loaded.path) if loaded.path is not None else '(none found: defaults)'}")
    for line in show_lines(rows):
        typer.echo(line)


@config_app.command("check")
def check(
    config: ConfigOption = None,
    strict: Annotated[bool, typer.Option("--strict", help="unknown keys are errors (exit 2), not warnings")] = False,
) -> None:
    """Validate the config file: exit 0 when it is valid, 2 when it is not (each problem names file, line, key).

    Every surface is resolved (inherit, routing files, the judges it names), as a command would; nothing is
    opened, written or loaded.
    """
    loaded = load_config(config, strict=strict)
    if loaded.path is None:
        fail("no config file found: give --config PATH, set CITELOCK_CONFIG, or run `citelock config init`")
    for name in loaded.surface_names:
        try:
            loaded.surface_settings(name, routing=_no_model_judge(loaded, name))
        except UsageError as exc:
            fail(str(exc))
    count = len(loaded.surface_names)
    warned = f", {len(loaded.warnings)} warning(s)" if loaded.warnings else ""
    typer.echo(f"{shown(loaded.path)}: ok ({count} surface{'s' if count != 1 else ''}{warned})")
    raise typer.Exit(EXIT_OK)


def _no_model_judge(config: Config, surface: str) -> bool:
    """True unless checking the surface's inline thresholds would load an in-process model (check loads none)."""
    judge = config.surface_settings(surface, routing=False).judge
    entry = config.judges.get(judge) if judge is not None else None
    return not (entry is not None and entry.thresholds is not None and entry.kind == "llm" and entry.base_url is None)


@config_app.command("init")
def init(
    path: Annotated[Path, typer.Argument(help="where to write the starter file")] = Path("citelock.toml"),
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing file")] = False,
) -> None:
    """Write a commented starter citelock.toml: one high-stakes and one low-stakes surface, a judge, the store."""
    if is_stdin(path):
        typer.echo(STARTER, nl=False)
        return
    if path.exists() and not force:
        fail(f"{shown(path)} exists; give --force to overwrite it")
    if path.is_dir() or not path.parent.is_dir():
        fail(f"{shown(path)}: expected a file path in an existing folder")
    path.write_text(STARTER, encoding="utf-8")
    typer.echo(f"wrote {shown(path)}: `citelock config check` validates it, `citelock config show` prints it")
