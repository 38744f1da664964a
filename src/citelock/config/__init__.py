"""Surfaces, judges, backends and the store, named once in ``citelock.toml`` (or ``[tool.citelock]``).

- :class:`Config`: :meth:`Config.load` finds and validates the file; ``config.surface("legal")`` is a
  :class:`~citelock.SurfacePolicy`; ``config.guard(...)`` its guard; ``config.store``, ``config.backends``,
  ``config.judges``.
- :class:`SurfaceSettings`: a surface resolved, with every value's :class:`Origin`.
- :class:`ConfigFile` and :func:`config_json_schema`: the schema (``schemas/config.v1.json``).
"""

from citelock.config._build import audit_notice, backend_for, client_arguments, guard_for, judges_for
from citelock.config._config import DB_ENV, SURFACE_ENV, Config, ConfigIssue, SurfaceSettings
from citelock.config._discover import CONFIG_ENV, CONFIG_NAME, ConfigSource, discover
from citelock.config._origins import Origin, show_lines
from citelock.config._schema import CONFIG_SCHEMA_ID, ConfigFile, config_json_schema
from citelock.config._starter import STARTER
from citelock.config._suggest import NAME, schema_key_paths, suggest, unknown_keys

__all__ = [
    "CONFIG_ENV",
    "CONFIG_NAME",
    "CONFIG_SCHEMA_ID",
    "DB_ENV",
    "NAME",
    "STARTER",
    "SURFACE_ENV",
    "Config",
    "ConfigFile",
    "ConfigIssue",
    "ConfigSource",
    "Origin",
    "SurfaceSettings",
    "audit_notice",
    "backend_for",
    "client_arguments",
    "config_json_schema",
    "discover",
    "guard_for",
    "judges_for",
    "schema_key_paths",
    "show_lines",
    "suggest",
    "unknown_keys",
]
