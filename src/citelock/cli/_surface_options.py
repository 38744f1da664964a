"""The surface options ``check``, ``answer`` and ``audit`` share, declared once and validated before anything runs.

``--judge --judge-base-url --judge-model --surface --stakes --sample-rate --on-fail --calibration
--escalate-base-url --relevance --relevance-base-url``: each is a field of :class:`SurfaceOptions` — its name,
type, default and help, once. A command takes them all with one parameter annotated :class:`SurfaceOptions` and the
:func:`surface_options` decorator, which lists the fields as the command's options in that parameter's place (typer
has no parameter groups of its own) and hands the command one frozen :class:`SurfaceOptions` built from what was
parsed. :func:`surface_setup` then turns it into what a command needs — a :class:`~citelock.guard.SurfacePolicy`,
its support judge and an optional stronger judge for escalation — so the way a surface is built from the command
line lives in one place; :meth:`SurfaceOptions.audit_settings` gives an audit's workers the same options. Every
check of a value or a combination happens in :func:`surface_setup`, first; a bad one exits 2 with a message naming
the option and what was expected.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from pydantic import ValidationError

from citelock.audit._work import AuditSettings
from citelock.cli._config import load_config
from citelock.cli._io import fail, is_stdin, read_json, reading, shown
from citelock.config import Config, SurfaceSettings, audit_notice, judges_for
from citelock.errors import UsageError
from citelock.guard import Guard, SurfacePolicy
from citelock.guard._audit import shipped_default_notice
from citelock.judges import DEFAULT_JUDGE, JUDGE_NAMES, Judge, make_judge
from citelock.judges._routing import Routing, load_surface_routing
from citelock.store import CachedJudge

__all__ = [
    "NO_SURFACE",
    "ON_FAIL",
    "RELEVANCE",
    "SurfaceOptions",
    "SurfaceSetup",
    "configured_setup",
    "flag_notice",
    "free_guard",
    "surface_options",
    "surface_setup",
]

ON_FAIL = ("block", "drop_claim", "mark")
STAKES = ("high", "low")
RELEVANCE = ("free", "judged", "off")


@dataclass(frozen=True)
class SurfaceOptions:
    """The surface options as parsed from the command line (each field is one option, in ``--help`` order).

    Attributes:
        judge: ``--judge``: the support judge ③ by name.
        judge_base_url: ``--judge-base-url``: ``--judge llm`` on an OpenAI-compatible server at this URL.
        judge_model: ``--judge-model``: a GGUF file, or with ``--judge-base-url`` the server's model.
        surface: ``--surface``: the surface whose policy runs.
        stakes: ``--stakes``: ``high`` or ``low``.
        sample_rate: ``--sample-rate``: low stakes, the fraction of citations judged.
        on_fail: ``--on-fail``: ``block``, ``drop_claim`` or ``mark``.
        calibration: ``--calibration``: a calibration file whose routing applies.
        escalate_base_url: ``--escalate-base-url``: the stronger LLM judge's server for citations routed to review.
        relevance: ``--relevance``: ``free``, ``judged`` or ``off`` (the ``OFF_QUESTION`` check).
        relevance_base_url: ``--relevance-base-url``: the relevance judge's server, for ``--relevance judged``.
        config: ``--config``: the config file whose surfaces ``--surface`` names (default: discovered).
    """

    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help=f"support judge ③: {', '.join(JUDGE_NAMES)} (a judging surface without --judge uses {DEFAULT_JUDGE})",
        ),
    ] = None
    judge_base_url: Annotated[
        str | None,
        typer.Option("--judge-base-url", help="--judge llm on an OpenAI-compatible server at this /v1 URL"),
    ] = None
    judge_model: Annotated[
        str | None,
        typer.Option("--judge-model", help="--judge llm: a GGUF file, or with --judge-base-url the server's model"),
    ] = None
    surface: Annotated[
        str | None,
        typer.Option(
            "--surface",
            help="run this surface's policy: the support judge ③, its routing and --on-fail; with a database, "
            "findings go to the review queue and results are stored for `citelock metrics`",
        ),
    ] = None
    stakes: Annotated[
        str | None,
        typer.Option(
            "--stakes",
            help="high: judge every surviving citation, fail closed (the default); low: judge a sample",
            show_default=False,
        ),
    ] = None
    sample_rate: Annotated[
        float | None,
        typer.Option("--sample-rate", min=0.0, max=1.0, help="low stakes: the fraction of citations judged (0..1)"),
    ] = None
    on_fail: Annotated[
        str | None,
        typer.Option(
            "--on-fail",
            help="what a failing claim does: block (refuse the whole answer, the default), drop_claim (serve the "
            "answer without it), mark (serve it marked unverified); its findings are queued either way",
        ),
    ] = None
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="CALIBRATION.json (citelock calibrate --fit --write): route the judge's scores with the "
            "thresholds for this surface's name, else its '*' entry; they must have been calibrated for the judge "
            "in use",
        ),
    ] = None
    escalate_base_url: Annotated[
        str | None,
        typer.Option(
            "--escalate-base-url",
            help="escalate citations the calibrated routing sends to review to the LLM judge on this "
            "OpenAI-compatible server (/v1 URL, its first listed model); without it they go to the review queue "
            "as UNCERTAIN_SUPPORT",
        ),
    ] = None

    relevance: Annotated[
        str | None,
        typer.Option(
            "--relevance",
            help="does the answer address the question (OFF_QUESTION)? free: the free check (the default); judged: "
            "also ask the relevance judge on --relevance-base-url about answers the free check does not pass "
            "(needs a surface policy); off: no relevance check",
            show_default=False,
        ),
    ] = None
    relevance_base_url: Annotated[
        str | None,
        typer.Option(
            "--relevance-base-url",
            help="--relevance judged: the relevance judge on this OpenAI-compatible server (/v1 URL, its first "
            "listed model)",
        ),
    ] = None

    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="citelock.toml (or a pyproject.toml with [tool.citelock]): the surfaces --surface names; default: "
            "$CITELOCK_CONFIG, else the closest citelock.toml or [tool.citelock] walking up from here",
            show_default=False,
        ),
    ] = None

    @property
    def runs_policy(self) -> bool:
        """True when the surface policy runs: any of --surface, --judge, --on-fail or --calibration was given."""
        return any(v is not None for v in (self.surface, self.judge, self.on_fail, self.calibration))

    def audit_settings(self) -> AuditSettings:
        """The same options as an audit's :class:`~citelock.audit.AuditSettings` (what each worker builds from)."""
        values = dataclasses.asdict(self)
        del values["config"]
        values["calibration"] = str(self.calibration) if self.calibration is not None else None
        values["stakes"] = self.stakes or "high"
        values["relevance"] = self.relevance or "free"
        return AuditSettings(**values)


NO_SURFACE = SurfaceOptions()
"""No surface option given (only the free deterministic checks): the default of a command's options parameter."""


def surface_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the surface options: its one parameter annotated :class:`SurfaceOptions` becomes them all.

    Typer reads a command's options from its signature: the returned function's signature lists every field of
    :class:`SurfaceOptions` (name, type, default and help) where that parameter stood, and calling it builds the
    frozen :class:`SurfaceOptions` from those values and passes it on under the parameter's name. Apply it below
    ``@app.command()``.

    Raises:
        TypeError: ``command`` has no parameter, or more than one, annotated :class:`SurfaceOptions`.
    """
    signature = inspect.signature(command, eval_str=True)
    slots = [p.name for p in signature.parameters.values() if p.annotation is SurfaceOptions]
    if len(slots) != 1:
        raise TypeError(f"{command.__name__}: expected one parameter annotated SurfaceOptions, found {len(slots)}")
    slot = slots[0]
    hints = get_type_hints(SurfaceOptions, include_extras=True)
    fields = dataclasses.fields(SurfaceOptions)
    names = [f.name for f in fields]
    group = [
        inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default, annotation=hints[f.name])
        for f in fields
    ]
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        parameters.extend(group if parameter.name == slot else [parameter])

    @functools.wraps(command)
    def run(**values: Any) -> None:
        chosen = SurfaceOptions(**{name: values.pop(name) for name in names})
        command(**values, **{slot: chosen})

    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return run


@dataclass(frozen=True)
class SurfaceSetup:
    """What a command needs to run a surface policy, built from the command line (and the config file).

    Attributes:
        policy: The surface's policy.
        judge: The support judge (cached per claim/passage), or None on a low-stakes surface that judges nothing.
        escalate: The stronger judge for citations routed to review, or None.
        guard: The :class:`~citelock.Guard` built from them (its routing checked before anything is written).
        settings: The surface as the config file resolved it (None: built from the flags alone).
        config: The config file's settings (None: none was found).
    """

    policy: SurfacePolicy
    judge: Judge | None
    escalate: Judge | None
    guard: Guard
    settings: SurfaceSettings | None = None
    config: Config | None = None

    def audit_settings(self, options: SurfaceOptions) -> AuditSettings:
        """The audit's :class:`~citelock.audit.AuditSettings`: the options, with the config's whole policy."""
        base = options.audit_settings()
        if self.settings is None or self.config is None:
            return base
        judge = _server_judge(self.config, self.settings.judge)
        escalate = _server_judge(self.config, self.settings.escalate)
        relevance = _server_judge(self.config, self.settings.relevance_judge)
        kind, url, model = judge if judge is not None else (None, None, None)
        return dataclasses.replace(
            base,
            surface=self.policy.name,
            judge=base.judge if options.judge is not None else kind,
            judge_base_url=base.judge_base_url or url,
            judge_model=base.judge_model or model,
            escalate_base_url=base.escalate_base_url or (escalate[1] if escalate is not None else None),
            relevance=self.policy.relevance,
            relevance_base_url=base.relevance_base_url or (relevance[1] if relevance is not None else None),
            calibration=None,
            policy=self.policy,
        )


def _server_judge(config: Config, name: str | None) -> tuple[str, str | None, str | None] | None:
    """A config judge as the audit's picklable (kind, base URL, model) triple."""
    if name is None:
        return None
    entry = config.judges.get(name)
    if entry is None:
        return (name, None, None)
    return (entry.kind, entry.base_url, entry.model)


def surface_setup(options: SurfaceOptions) -> SurfaceSetup | None:
    """Validate the surface options and build the surface (exit 2 with a clear message on bad usage).

    With a config file (``--config``, ``$CITELOCK_CONFIG`` or discovered) that names the surface (``--surface``,
    else ``$CITELOCK_SURFACE``, else its ``default_surface``), the whole surface comes from the file and each
    flag given overrides one key (see :func:`configured_setup`). Otherwise the surface is built from the flags:
    the policy runs when any of ``--surface``, ``--judge``, ``--on-fail`` or ``--calibration`` is given (surface
    name ``default`` when ``--surface`` is not); a surface that judges (high stakes, or a sample rate above 0)
    without ``--judge`` uses the default judge (:data:`citelock.judges.DEFAULT_JUDGE`), as
    :func:`citelock.answer` does. Nothing is read from a server here: a judge server that cannot be reached
    fails at its first call (exit 4).

    Returns:
        The policy and its judges, or None when only the free deterministic checks were asked for.
    """
    config = load_config(options.config)
    name = options.surface or config.default_surface
    if config.has_surface(name):
        return configured_setup(config, name, options)
    if options.surface is not None and config.surface_names:
        try:
            config.surface_settings(options.surface, routing=False)
        except UsageError as exc:
            fail(str(exc))
    stakes, relevance = options.stakes or "high", options.relevance or "free"
    return _flag_setup(dataclasses.replace(options, stakes=stakes, relevance=relevance))


_FLAGS = {
    "stakes": "--stakes",
    "sample_rate": "--sample-rate",
    "on_fail": "--on-fail",
    "relevance": "--relevance",
    "routing": "--calibration",
    "judge": "--judge",
}


def configured_setup(config: Config, name: str | None, options: SurfaceOptions) -> SurfaceSetup:
    """The surface ``name`` of the config file, each flag given overriding its key (exit 2 on bad usage)."""
    o = options
    _check_formats(o, judges=tuple(config.judges))
    ad_hoc_judge = o.judge_base_url is not None or o.judge_model is not None
    overrides = {
        "stakes": o.stakes,
        "sample_rate": o.sample_rate,
        "on_fail": o.on_fail,
        "relevance": o.relevance,
        "routing": str(o.calibration) if o.calibration is not None else None,
        "judge": o.judge if not ad_hoc_judge else None,
    }
    if o.calibration is not None:
        read_json(o.calibration, "calibration")
    try:
        settings = config.surface_settings(name, overrides, flags=_FLAGS)
        policy = settings.policy
        judge_name = settings.judge or (DEFAULT_JUDGE if policy.stakes == "high" or policy.sample_rate > 0 else None)
        if ad_hoc_judge:
            inner: Judge | None = _make_judge(o.judge or "llm", o.judge_base_url, o.judge_model)
        else:
            inner = config.make_judge(judge_name) if judge_name is not None else None
        built = CachedJudge(inner) if inner is not None else None
        escalate = (
            _make_judge("llm", o.escalate_base_url, None)
            if o.escalate_base_url is not None
            else (config.make_judge(settings.escalate) if settings.escalate is not None else None)
        )
        stronger = CachedJudge(escalate) if escalate is not None else None
        relevance = o.audit_settings().relevance_judge() or judges_for(config, settings)[2]
        guard = Guard(policy, built, escalate=stronger, relevance_judge=relevance)
    except UsageError as exc:
        fail(str(exc))
    notice = audit_notice(settings, built.name, config) if built is not None else None
    if notice is not None:
        typer.echo(f"notice: {notice}", err=True)
    return SurfaceSetup(policy, built, stronger, guard, settings=settings, config=config)


def _flag_setup(options: SurfaceOptions) -> SurfaceSetup | None:
    """The surface built from the flags alone (no config file names it)."""
    _check_values(options)
    if not options.runs_policy:
        return None
    o = options
    name = o.surface or "default"
    rate = o.sample_rate if o.sample_rate is not None else (1.0 if o.judge or o.stakes == "high" else 0.0)
    judge_name = o.judge or (DEFAULT_JUDGE if o.stakes == "high" or rate > 0 else None)
    routing: Routing | None = None
    if o.calibration is not None:
        read_json(o.calibration, "calibration")  # bounded, JSON, nesting: the file's own loader is then safe
        try:
            with reading(o.calibration, "calibration"):  # the loader reads UTF-8 only (no byte-order mark)
                routing = load_surface_routing(o.calibration, name)
        except UsageError as exc:
            fail(str(exc))
    try:
        policy = SurfacePolicy.model_validate(
            {
                "name": name,
                "stakes": o.stakes,
                "sample_rate": rate,
                "routing": routing,
                "on_fail": o.on_fail or "block",
                "relevance": o.relevance,
            }
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "surface"
        fail(f"surface {name!r}: {field}: {err['msg']}")
    try:
        built = CachedJudge(_make_judge(judge_name, o.judge_base_url, o.judge_model)) if judge_name else None
        stronger = CachedJudge(_make_judge("llm", o.escalate_base_url, None)) if o.escalate_base_url else None
        relevance = o.audit_settings().relevance_judge()
        guard = Guard(policy, built, escalate=stronger, relevance_judge=relevance)  # a foreign routing fails here
    except UsageError as exc:
        fail(str(exc))
    if policy.stakes == "high" and policy.routing is None and built is not None:
        typer.echo(f"notice: {flag_notice(policy.name, built.name)}", err=True)
    return SurfaceSetup(policy, built, stronger, guard)


def flag_notice(surface: str, judge: str) -> str:
    """The shipped-default notice of a surface built from flags: it names the config key that adds an audit."""
    return shipped_default_notice(surface, judge).replace(
        "configure an audit sample (SurfacePolicy(audit=AuditPlan()))",
        f"configure an audit sample ([surfaces.{surface}.audit] in citelock.toml: `citelock config init` writes a "
        "starter; in Python SurfacePolicy(audit=AuditPlan()))",
    )


def free_guard(options: SurfaceOptions) -> Guard:
    """The guard of a command run without a surface policy: the free checks, relevance as ``--relevance`` says."""
    return options.audit_settings().build_guard()


def _check_formats(o: SurfaceOptions, judges: tuple[str, ...] = ()) -> None:
    """Each option's own value, with a message naming the option (exit 2)."""
    if o.surface is not None and (not o.surface.strip() or not o.surface.isprintable()):
        fail(f"--surface {o.surface!r}: expected a non-empty printable surface name, e.g. --surface legal")
    if o.stakes is not None and o.stakes not in STAKES:
        fail(f"--stakes must be high or low, got {o.stakes!r}")
    if o.on_fail is not None and o.on_fail not in ON_FAIL:
        fail(f"--on-fail must be block, drop_claim or mark, got {o.on_fail!r}")
    if o.judge is not None and o.judge not in (*JUDGE_NAMES, *judges):
        fail(f"--judge: unknown judge {o.judge!r}; expected one of {', '.join((*JUDGE_NAMES, *judges))}")
    if o.sample_rate is not None and not math.isfinite(o.sample_rate):
        fail(f"--sample-rate must be a number from 0 to 1, got {o.sample_rate}")
    if o.judge != "llm" and (o.judge_base_url is not None or o.judge_model is not None):
        fail("--judge-base-url and --judge-model need --judge llm")
    urls = (
        ("--judge-base-url", o.judge_base_url),
        ("--escalate-base-url", o.escalate_base_url),
        ("--relevance-base-url", o.relevance_base_url),
    )
    for option, url in urls:
        if url is not None and not url.startswith(("http://", "https://")):
            fail(
                f"{option} {url!r}: expected an http(s) URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"
            )
    if o.relevance is not None and o.relevance not in RELEVANCE:
        fail(f"--relevance must be free, judged or off, got {o.relevance!r}")
    if o.relevance_base_url is not None and o.relevance not in ("judged", None):
        fail("--relevance-base-url is the judge of --relevance judged: give --relevance judged too")
    if o.calibration is not None and is_stdin(o.calibration):
        fail("--calibration reads a file: standard input ('-') is not accepted here")
    if o.judge_model is not None and o.judge_base_url is None and not Path(o.judge_model).is_file():
        fail(
            f"--judge-model {shown(o.judge_model)}: no such GGUF file (with --judge-base-url it names a server's model)"
        )


def _check_values(o: SurfaceOptions) -> None:
    """Each option's value and each combination, with a message naming the option (exit 2)."""
    _check_formats(o)
    if o.sample_rate is not None:
        if o.stakes == "high" and o.sample_rate != 1.0:
            fail(
                f"--sample-rate {o.sample_rate}: a high-stakes surface judges every citation, so sample_rate must "
                "be 1.0; give --stakes low to judge a sample"
            )
        if not o.runs_policy:
            fail("--sample-rate needs a surface policy: give --surface NAME (or --judge)")
    if o.relevance == "judged" and o.relevance_base_url is None:
        fail("--relevance judged asks a relevance judge: give --relevance-base-url (an OpenAI-compatible server)")
    if o.relevance_base_url is not None and o.relevance != "judged":
        fail("--relevance-base-url is the judge of --relevance judged: give --relevance judged too")
    if o.relevance == "judged" and not o.runs_policy:
        fail("--relevance judged needs a surface policy: give --surface NAME (the judge settles its answers)")
    if o.escalate_base_url is not None and o.calibration is None:
        fail("--escalate-base-url escalates citations routed to review: give --calibration (a routing) too")


def _make_judge(name: str, base_url: str | None, model: str | None) -> Judge:
    """The judge named on the command line: a server's model with a base URL, else a GGUF file for ``llm``."""
    if base_url is not None:
        return make_judge(name, base_url=base_url, api_model=model)
    return make_judge(name, model=Path(model) if model is not None else None)
