"""The loaded configuration: :class:`Config`, what every door (CLI, library, gateway) reads surfaces from.

Loading is validation: :meth:`Config.load` finds the file (:mod:`citelock.config._discover`), reads the environment
references (:mod:`citelock.config._env`), reports unknown keys with a did-you-mean (a warning, an error under
``strict``), validates against the schema (:mod:`citelock.config._schema`), resolves every surface's ``inherit``
and checks each surface's policy and the judges and backends it names. Anything wrong raises
:class:`~citelock.errors.InputError` naming the file, line and key, before any store is opened or model loaded.

Precedence, highest first: a flag or keyword argument (``overrides``), the environment (``CITELOCK_DB`` for the
store, ``CITELOCK_SURFACE`` for the default surface), the file, the defaults. Every resolved value carries its
:class:`~citelock.config.Origin`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from citelock.config._discover import ConfigSource, discover
from citelock.config._env import KeyPath, interpolate
from citelock.config._lines import key_lines, line_of
from citelock.config._origins import Origin
from citelock.config._schema import (
    DEFAULT_REFUSAL,
    AlarmsConfig,
    AuditConfig,
    BackendConfig,
    ConfigFile,
    GatewayConfig,
    JudgeConfig,
    StreamConfig,
    SurfaceConfig,
)
from citelock.config._suggest import strip_unknown, suggest, unknown_keys
from citelock.errors import InputError, UsageError
from citelock.guard import AuditPlan, Guard, SurfacePolicy
from citelock.judges import JUDGE_NAMES

if TYPE_CHECKING:
    from citelock.judges import Judge, RelevanceJudge

__all__ = ["DB_ENV", "SURFACE_ENV", "Config", "ConfigIssue", "SurfaceSettings", "judges_for"]

DB_ENV = "CITELOCK_DB"
"""The environment variable that names the store (above the file's ``store``)."""

SURFACE_ENV = "CITELOCK_SURFACE"
"""The environment variable that names the surface a command runs (above the file's ``default_surface``)."""

_NESTED = ("audit", "stream", "alarms", "gateway")
_POLICY_KEYS = (
    "stakes",
    "on_fail",
    "sample_rate",
    "seed",
    "fail_closed",
    "diagnose",
    "serve_unverified",
    "relevance",
    "abstain_below",
)


@dataclass(frozen=True)
class ConfigIssue:
    """A problem found in the file that does not stop a non-strict load (an unknown key).

    Attributes:
        where: ``file:line``.
        message: What is wrong and the did-you-mean.
        path: The key's path.
    """

    where: str
    message: str
    path: KeyPath

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class SurfaceSettings:
    """One surface resolved from the file, the environment and the overrides.

    Attributes:
        name: The surface's name.
        policy: Its :class:`~citelock.SurfacePolicy` (routing included when a file or thresholds give one).
        judge: The support judge's name (a ``[judges]`` entry or a built-in judge), or None (the default judge).
        escalate: The escalation judge's ``[judges]`` name, or None.
        relevance_judge: The relevance judge's ``[judges]`` name, or None.
        show: The stream show policy, or None (the default per stakes).
        alarms: The alarm thresholds of ``citelock metrics --check``.
        on_block: What a blocked answer becomes at the gateway (``error`` or ``refuse``), or None (``error``).
        refusal: The gateway's refusal text, or None (:data:`~citelock.config._schema.DEFAULT_REFUSAL`).
        values: Every resolved key (``audit.seed`` for nested ones) and its value.
        origins: Every resolved key and where its value came from.
    """

    name: str
    policy: SurfacePolicy
    judge: str | None
    escalate: str | None
    relevance_judge: str | None
    show: Literal["immediately", "after_checks", "after_judge"] | None
    alarms: AlarmsConfig
    on_block: Literal["error", "refuse"] | None = None
    refusal: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, Any, Origin]]:
        """Every key of the surface (``audit.seed`` for nested ones), its resolved value and its origin.

        A key neither the file nor an override set shows the value the policy takes by default.
        """
        rows: list[tuple[str, Any, Origin]] = []
        policy = self.policy.model_dump(mode="json")
        for key, info in SurfaceConfig.model_fields.items():
            if key in _NESTED:
                subs: dict[str, type[BaseModel]] = {
                    "audit": AuditConfig,
                    "stream": StreamConfig,
                    "alarms": AlarmsConfig,
                    "gateway": GatewayConfig,
                }
                sub_model = subs[key]
                if key == "audit" and self.policy.audit is None:
                    rows.append((key, None, Origin("default")))
                    continue
                for sub in sub_model.model_fields:
                    full = f"{key}.{sub}"
                    value = self.values.get(full, _nested_default(self, key, sub))
                    rows.append((full, value, self.origins.get(full, Origin("default"))))
                continue
            default = policy.get(key) if key in policy else info.default
            if key == "routing" and self.policy.routing is not None and key not in self.values:
                default = f"{self.policy.routing.method} ({self.policy.routing.source or self.policy.routing.judge})"
            rows.append((key, self.values.get(key, default), self.origins.get(key, Origin("default"))))
        return rows


def _nested_default(settings: SurfaceSettings, key: str, sub: str) -> Any:
    if key == "audit" and settings.policy.audit is not None:
        return getattr(settings.policy.audit, sub)
    if key == "alarms":
        return getattr(settings.alarms, sub)
    if key == "gateway":
        return "error" if sub == "on_block" else DEFAULT_REFUSAL
    if sub == "show":  # the stream's own default per stakes (citelock.stream.default_show)
        return settings.show or ("after_judge" if settings.policy.stakes == "high" else "immediately")
    return None


class Config:
    """The configuration of every surface, judge and backend, and the store (see the module docstring).

    Example:
        >>> config = Config.load()  # citelock.toml / [tool.citelock] / CITELOCK_CONFIG; defaults without one
        >>> config.surface("legal").stakes  # doctest: +SKIP
        'high'

    Attributes:
        source: The file it was read from (None: no file, every value its default).
        warnings: Unknown keys found by a non-strict load (each with its did-you-mean).
    """

    def __init__(
        self,
        data: ConfigFile,
        *,
        source: ConfigSource | None = None,
        warnings: tuple[ConfigIssue, ...] = (),
        environ: Mapping[str, str] | None = None,
        lines: Mapping[KeyPath, int] | None = None,
        variables: Mapping[KeyPath, list[str]] | None = None,
    ) -> None:
        self.data = data
        self.source = source
        self.warnings = warnings
        self._environ = dict(os.environ if environ is None else environ)
        self._lines = dict(lines or {})
        self._variables = dict(variables or {})
        self._surfaces = {name: self._inherited(name) for name in data.surfaces}
        self._check_references()
        for name in data.surfaces:
            self.surface_settings(name, routing=False)

    # -- loading -------------------------------------------------------------------------------------------------

    @classmethod
    def load(
        cls, path: str | Path | None = None, *, strict: bool = False, environ: Mapping[str, str] | None = None
    ) -> Config:
        """Find, read and validate the config file (see :mod:`citelock.config._discover` for where it looks).

        Args:
            path: The file (``--config``); None: ``CITELOCK_CONFIG``, else the closest ``citelock.toml`` or
                ``pyproject.toml`` with ``[tool.citelock]`` walking up from the working directory.
            strict: Unknown keys are errors, not warnings.
            environ: The environment to read (default: ``os.environ``).

        Raises:
            InputError: the file is missing (when named), unparsable or invalid: the message names the file,
                the line, the key and what is allowed (under ``strict``, every unknown key with its did-you-mean).
        """
        env = dict(os.environ if environ is None else environ)
        source = discover(path, environ=env)
        if source is None:
            return cls(ConfigFile(), environ=env)
        lines = _relative_lines(key_lines(source.text), source.prefix)

        def where(key: KeyPath) -> str:
            line = line_of(lines, key)
            return f"{source.path}:{line}" if line is not None else str(source.path)

        data, variables = interpolate(source.data, env, where)
        unknown = unknown_keys(data)
        issues = tuple(ConfigIssue(where(u.path), u.message(), u.path) for u in unknown)
        if strict and issues:
            raise InputError("; ".join(str(i) for i in issues) + " (--strict: unknown keys are errors)")
        data = _relative_paths(strip_unknown(data, unknown), source.path.parent)
        try:
            model = ConfigFile.model_validate(data)
        except ValidationError as exc:
            raise InputError(_validation_message(exc, (), where)) from None
        return cls(model, source=source, warnings=issues, environ=env, lines=lines, variables=variables)

    @property
    def path(self) -> Path | None:
        """The config file's path (None without one)."""
        return self.source.path if self.source is not None else None

    def _where(self, key: KeyPath) -> str:
        if self.source is None:
            return "config"
        line = line_of(self._lines, key)
        return f"{self.source.path}:{line}" if line is not None else str(self.source.path)

    def file_origin(self, key: KeyPath, inherited: str | None = None) -> Origin:
        """The origin of a key of the file (its line, the variables interpolated into it)."""
        assert self.source is not None
        return Origin(
            "file",
            str(self.source.path),
            line_of(self._lines, key),
            inherited,
            tuple(self._variables.get(key, ())),
        )

    # -- top-level values ----------------------------------------------------------------------------------------

    @property
    def surface_names(self) -> tuple[str, ...]:
        """The surfaces the file names, in file order."""
        return tuple(self.data.surfaces)

    @property
    def default_surface(self) -> str | None:
        """``CITELOCK_SURFACE``, else the file's ``default_surface``, else None."""
        return self._environ.get(SURFACE_ENV) or self.data.default_surface

    @property
    def store(self) -> str | None:
        """The store (prompt log, queue, results): ``CITELOCK_DB``, else the file's ``store``, else None."""
        return self._environ.get(DB_ENV) or self.data.store

    @property
    def backends(self) -> Mapping[str, BackendConfig]:
        """The named backends, their environment references read (``api_key`` included)."""
        return dict(self.data.backends)

    @property
    def judges(self) -> Mapping[str, JudgeConfig]:
        """The named judges."""
        return dict(self.data.judges)

    def top_level(self) -> list[tuple[str, Any, Origin]]:
        """``store``, ``default_surface`` and ``default_backend`` with where each came from."""
        rows: list[tuple[str, Any, Origin]] = []
        for key, env in (("store", DB_ENV), ("default_surface", SURFACE_ENV), ("default_backend", None)):
            if env is not None and self._environ.get(env):
                rows.append((key, self._environ[env], Origin("env", env)))
            elif getattr(self.data, key) is not None:
                rows.append((key, getattr(self.data, key), self.file_origin((key,))))
            else:
                rows.append((key, None, Origin("default")))
        return rows

    # -- surfaces ------------------------------------------------------------------------------------------------

    def has_surface(self, name: str | None) -> bool:
        """True when the file names this surface."""
        return name is not None and name in self.data.surfaces

    def surface(self, name: str | None = None, **overrides: Any) -> SurfacePolicy:
        """The :class:`~citelock.SurfacePolicy` of surface ``name`` (default: :attr:`default_surface`).

        Args:
            name: The surface.
            overrides: Surface keys that win over the file (``stakes="low"``, ``on_fail="mark"``, ...).

        Raises:
            UsageError: no such surface (with a did-you-mean), or the overrides make an invalid policy.
        """
        return self.surface_settings(name, overrides).policy

    def surface_settings(
        self,
        name: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        *,
        flags: Mapping[str, str] | None = None,
        routing: bool = True,
    ) -> SurfaceSettings:
        """Surface ``name`` resolved: its policy, judge names, show policy, alarms, values and their origins.

        Args:
            name: The surface (default: :attr:`default_surface`).
            overrides: Surface keys that win over the environment and the file.
            flags: For each overridden key, the option that set it (``{"stakes": "--stakes"}``), for its origin.
            routing: Read the routing file or build the judge's inline routing (False: validate without them).

        Raises:
            UsageError: no such surface, or the resolved values make an invalid policy (the key is named).
        """
        name = self._surface_name(name)
        resolved = dict(self._surfaces[name])
        for key, value in (overrides or {}).items():
            if value is None:
                continue
            if key not in SurfaceConfig.model_fields:
                known = tuple(SurfaceConfig.model_fields)
                hint = suggest(key, known)
                raise UsageError(f"surface {name!r}: no key {key!r}" + (f"; did you mean {hint!r}?" if hint else ""))
            label = (flags or {}).get(key, key)
            if isinstance(value, Mapping) and key in _NESTED:
                for sub, v in value.items():
                    resolved[f"{key}.{sub}"] = (v, Origin("flag", label))
            else:
                resolved[key] = (value, Origin("flag", label))
        return self._settings(name, resolved, routing=routing)

    def _surface_name(self, name: str | None) -> str:
        chosen = name if name is not None else self.default_surface
        if chosen is None:
            raise UsageError(
                "no surface named and no default_surface: give a surface name (--surface NAME) or set "
                f"default_surface in {self.path or 'citelock.toml'}"
            )
        if chosen not in self.data.surfaces:
            hint = suggest(chosen, self.surface_names)
            where = self.path or "the config (no config file found)"
            known = f"; its surfaces: {', '.join(self.surface_names)}" if self.surface_names else ""
            did = f"; did you mean {hint!r}?" if hint else ""
            raise UsageError(f"surface {chosen!r} is not in {where}{did}{known}")
        return chosen

    def _inherited(self, name: str, seen: tuple[str, ...] = ()) -> dict[str, tuple[Any, Origin]]:
        """A surface's keys (``audit.seed`` for nested ones) with origins, its ``inherit`` chain applied."""
        if name in seen:
            chain = " -> ".join((*seen, name))
            raise InputError(f"{self._where(('surfaces', seen[0], 'inherit'))}: surfaces inherit in a circle: {chain}")
        own = self.data.surfaces[name]
        out: dict[str, tuple[Any, Origin]] = {}
        if own.inherit is not None:
            if own.inherit not in self.data.surfaces:
                hint = suggest(own.inherit, self.surface_names)
                did = f"; did you mean {hint!r}?" if hint else f"; its surfaces: {', '.join(self.surface_names)}"
                raise InputError(
                    f"{self._where(('surfaces', name, 'inherit'))}: surfaces.{name}.inherit = {own.inherit!r}: "
                    f"no such surface{did}"
                )
            for key, (value, origin) in self._inherited(own.inherit, (*seen, name)).items():
                if key == "inherit":
                    continue
                inherited = origin.inherited or own.inherit
                out[key] = (value, Origin(origin.kind, origin.name, origin.line, inherited, origin.variables))
        for key in own.model_fields_set:
            value = getattr(own, key)
            if isinstance(value, BaseModel):
                for sub in value.model_fields_set:
                    out[f"{key}.{sub}"] = (getattr(value, sub), self.file_origin(("surfaces", name, key, sub)))
                out.setdefault(key, ({}, self.file_origin(("surfaces", name, key))))
            else:
                out[key] = (value, self.file_origin(("surfaces", name, key)))
        return out

    def _settings(self, name: str, resolved: dict[str, tuple[Any, Origin]], *, routing: bool) -> SurfaceSettings:
        values = {k: v for k, (v, _) in resolved.items()}
        where = self._surface_where(name, resolved)
        policy_data: dict[str, Any] = {"name": name, "stakes": values.get("stakes", "high")}
        for key in _POLICY_KEYS[1:]:
            if key in values:
                policy_data[key] = None if values[key] == "never" else values[key]
        if "audit" in values:
            plan = {k.removeprefix("audit."): v for k, v in values.items() if k.startswith("audit.")}
            policy_data["audit"] = _validated(AuditPlan, plan, f"{where('audit')}: surfaces.{name}.audit")
        if routing:
            policy_data["routing"] = self._routing(name, values, where)
        policy = _validated(SurfacePolicy, policy_data, f"{where('stakes')}: surfaces.{name}")
        alarms = {k.removeprefix("alarms."): v for k, v in values.items() if k.startswith("alarms.")}
        show = values.get("stream.show")
        gateway = {k.removeprefix("gateway."): v for k, v in values.items() if k.startswith("gateway.")}
        door = _validated(GatewayConfig, gateway, f"{where('gateway')}: surfaces.{name}.gateway")
        origins = {k: o for k, (_, o) in resolved.items() if k not in _NESTED}
        origins.setdefault("stakes", Origin("default"))
        return SurfaceSettings(
            name=name,
            policy=policy,
            judge=values.get("judge"),
            escalate=values.get("escalate"),
            relevance_judge=values.get("relevance_judge"),
            show=show,
            alarms=_validated(AlarmsConfig, alarms, f"{where('alarms')}: surfaces.{name}.alarms"),
            on_block=door.on_block,
            refusal=door.refusal,
            values={k: v for k, v in values.items() if k not in _NESTED},
            origins=origins,
        )

    def _surface_where(self, name: str, resolved: dict[str, tuple[Any, Origin]]) -> Any:
        def where(key: str) -> str:
            origin = resolved.get(key, (None, None))[1]
            if isinstance(origin, Origin) and origin.kind == "file" and origin.line is not None:
                return f"{origin.name}:{origin.line}"
            if isinstance(origin, Origin) and origin.kind == "flag":
                return origin.name
            return self._where(("surfaces", name))

        return where

    def _routing(self, name: str, values: Mapping[str, Any], where: Any) -> Any:
        from citelock.judges._routing import Routing, load_surface_routing

        path = values.get("routing")
        judge = values.get("judge")
        entry = self.data.judges.get(judge) if isinstance(judge, str) else None
        if path is None and entry is not None:
            path = entry.routing
        if path is not None:
            try:
                return load_surface_routing(path, name)
            except UsageError as exc:
                raise InputError(f"{where('routing')}: surfaces.{name}.routing: {exc}") from None
        if entry is not None and entry.thresholds is not None:
            assert isinstance(judge, str)
            built = self.make_judge(judge)
            t = entry.thresholds
            return Routing(
                pass_at=t.pass_at,
                fail_below=t.fail_below,
                judge=built.name,
                judge_version=built.version,
                method="manual",
                source=f"{self.path}: judges.{judge}.thresholds",
            )
        return None

    def _check_references(self) -> None:
        """Every judge, surface and backend a key names exists, and the relevance judge can be asked."""
        d = self.data
        names: dict[str, tuple[str | None, Mapping[str, Any]]] = {
            "default_surface": (d.default_surface, d.surfaces),
            "default_backend": (d.default_backend, d.backends),
        }
        for key, (value, table) in names.items():
            if value is not None and value not in table:
                hint = suggest(value, tuple(table))
                did = f"; did you mean {hint!r}?" if hint else f"; expected one of {', '.join(table) or '(none)'}"
                raise InputError(f"{self._where((key,))}: {key} = {value!r}: no such entry{did}")
        for surface, keys in self._surfaces.items():
            if keys.get("relevance", (None,))[0] == "judged" and "relevance_judge" not in keys:
                origin = keys["relevance"][1]
                line = f"{origin.name}:{origin.line}" if origin.line is not None else self._where(("surfaces",))
                raise InputError(
                    f"{line}: surfaces.{surface}.relevance = 'judged' asks a relevance judge: set "
                    f"surfaces.{surface}.relevance_judge to a [judges] entry of kind 'llm' with a base_url"
                )
            for key in ("judge", "escalate", "relevance_judge"):
                if key not in keys:
                    continue
                value, origin = keys[key]
                builtin = key == "judge" and value in JUDGE_NAMES
                line = f"{origin.name}:{origin.line}" if origin.line is not None else self._where(("surfaces",))
                if not builtin and value not in d.judges:
                    known = (*d.judges, *(JUDGE_NAMES if key == "judge" else ()))
                    hint = suggest(value, tuple(known))
                    did = f"; did you mean {hint!r}?" if hint else f"; expected one of {', '.join(known) or '(none)'}"
                    raise InputError(f"{line}: surfaces.{surface}.{key} = {value!r}: no such judge{did}")
                entry = d.judges.get(value)
                if key != "judge" and (entry is None or entry.kind != "llm" or entry.base_url is None):
                    raise InputError(
                        f"{line}: surfaces.{surface}.{key} = {value!r}: expected a [judges] entry of kind 'llm' "
                        "with a base_url (an OpenAI-compatible server)"
                    )

    # -- building ------------------------------------------------------------------------------------------------

    def make_judge(self, name: str) -> Any:
        """The support judge named ``name``: a ``[judges]`` entry, else a built-in judge (``lexical``, ...).

        Raises:
            UsageError: no such judge.
        """
        from citelock.judges import make_judge

        entry = self.data.judges.get(name)
        if entry is None:
            return make_judge(name)
        if entry.base_url is not None:
            return make_judge(entry.kind, base_url=entry.base_url, api_model=entry.model)
        return make_judge(entry.kind, model=Path(entry.model) if entry.model is not None else None)

    def guard(self, surface: str | None = None, **overrides: Any) -> Guard:
        """The :class:`~citelock.Guard` of a surface: its policy, judge, escalation and relevance judges.

        Args:
            surface: The surface (default: :attr:`default_surface`; with neither, the free checks only).
            overrides: Surface keys that win over the file.
        """
        if surface is None and self.default_surface is None:
            if overrides:
                raise UsageError("surface overrides need a surface: name one, or set default_surface in the config")
            return Guard()
        settings = self.surface_settings(surface, overrides)
        judge, escalate, relevance = judges_for(self, settings)
        return Guard(settings.policy, judge, escalate=escalate, relevance_judge=relevance)


def judges_for(config: Config, settings: SurfaceSettings) -> tuple[Judge | None, Judge | None, RelevanceJudge | None]:
    """The surface's support judge (None: the guard's default), escalation judge and relevance judge."""
    judge = config.make_judge(settings.judge) if settings.judge is not None else None
    escalate = config.make_judge(settings.escalate) if settings.escalate is not None else None
    relevance = None
    if settings.relevance_judge is not None:
        from citelock.judges import OpenAICompleter, RelevanceJudge

        entry = config.judges[settings.relevance_judge]
        relevance = RelevanceJudge(OpenAICompleter(base_url=entry.base_url, model=entry.model))
    return judge, escalate, relevance


def _validated(model: type[BaseModel], data: Mapping[str, Any], where: str) -> Any:
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{where}{'.' + key if key else ''}: {err['msg']}") from None


def _validation_message(exc: ValidationError, prefix: KeyPath, where: Any) -> str:
    """``file:line: surfaces.legal.stakes: Input should be 'low' or 'high' (got 'hihg')`` for each error."""
    parts = []
    for err in exc.errors()[:5]:
        loc = tuple(str(p) for p in err["loc"] if not str(p).startswith(("function-", "literal[", "float", "int")))
        key = ".".join((*prefix, *loc))
        got = err.get("input")
        shown = f" (got {got!r})" if not isinstance(got, dict | list) and err["type"] != "missing" else ""
        parts.append(f"{where((*prefix, *loc))}: {key or 'config'}: {err['msg']}{shown}")
    return "; ".join(parts)


def _relative_lines(lines: Mapping[KeyPath, int], prefix: tuple[str, ...]) -> dict[KeyPath, int]:
    """The lines of the config's own keys (a ``pyproject.toml``'s ``tool.citelock.`` prefix taken off)."""
    n = len(prefix)
    return {k[n:]: v for k, v in lines.items() if k[:n] == prefix and len(k) > n}


def _relative_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``routing`` file paths, relative to the config file's folder, made absolute (a command runs anywhere)."""

    def fix(table: Any) -> Any:
        if isinstance(table, dict) and isinstance(table.get("routing"), str):
            path = Path(table["routing"]).expanduser()
            return {**table, "routing": str(path if path.is_absolute() else folder / path)}
        return table

    for key in ("surfaces", "judges"):
        if isinstance(data.get(key), dict):
            data[key] = {name: fix(entry) for name, entry in data[key].items()}
    return data
