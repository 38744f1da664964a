"""What a surface of the config builds: its :class:`~citelock.Guard`, a client's constructor arguments, a backend.

Thin on purpose: each function returns the same objects a caller would pass by hand (``Guard(policy, judge,
escalate=..., relevance_judge=...)``; ``Citelock(backend, log=..., guard=..., sinks=...)``), so a surface behaves
the same whichever door it was built for. Also the high-stakes notice that names the config key to set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from citelock.config._config import Config, SurfaceSettings, judges_for
from citelock.errors import UsageError
from citelock.guard import Guard

if TYPE_CHECKING:
    from citelock.backends import Backend

__all__ = ["audit_notice", "backend_for", "client_arguments", "guard_for", "judges_for"]


def guard_for(config: Config, surface: str | None, overrides: Mapping[str, Any] | None = None) -> Guard:
    """The guard of ``surface`` (default: the config's default surface; with neither, the free checks only)."""
    return config.guard(surface, **(overrides or {}))


def backend_for(config: Config, name: str) -> Backend:
    """The backend of the ``[backends.NAME]`` entry (its key read from the environment).

    Raises:
        UsageError: no such backend (the known ones are named).
    """
    from citelock.backends import make_backend

    entry = config.backends.get(name)
    if entry is None:
        known = ", ".join(config.backends) or "(none)"
        raise UsageError(f"backend {name!r} is not in {config.path or 'the config'}; its backends: {known}")
    options = {k: v for k, v in entry.model_dump(exclude={"kind"}).items() if v is not None}
    return make_backend(entry.kind, **options)


def client_arguments(config: Config, surface: str | None, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~citelock.Citelock` constructor arguments a surface of ``config`` gives (``overrides`` win).

    ``backend``: the ``default_backend`` entry (else the constructor's default); ``guard``: :func:`guard_for`;
    ``log``: the store; ``sinks``: the review queue and result store on the store when a surface policy runs.
    """
    args: dict[str, Any] = dict(overrides)
    if "guard" not in args:
        args["guard"] = guard_for(config, surface)
    if "backend" not in args and config.data.default_backend is not None:
        args["backend"] = backend_for(config, config.data.default_backend)
    store = config.store
    if "log" not in args and store is not None:
        args["log"] = store
    if "sinks" not in args and store is not None and args["guard"].policy is not None:
        from citelock.store import ResultStore, ReviewQueue

        args["sinks"] = [ReviewQueue(store), ResultStore(store)]
    return args


def audit_notice(settings: SurfaceSettings, judge: str, config: Config) -> str | None:
    """The notice of a high-stakes surface on the shipped default routing, naming the config key to set.

    None when the surface has its own routing. Without an audit plan the notice names ``[surfaces.NAME.audit]``;
    with one, it says the samples are drawn and how to refit from them.
    """
    policy = settings.policy
    if policy.stakes != "high" or policy.routing is not None:
        return None
    where = config.path or "citelock.toml"
    refit = f"`citelock calibrate --from-store DB --surface {policy.name} --fit`"
    head = (
        f"surface {policy.name!r} is high-stakes and routes judge {judge!r} with the shipped default thresholds, "
        "not fitted on your traffic: "
    )
    if policy.audit is None:
        return (
            f"{head}set [surfaces.{policy.name}.audit] in {where} (e.g. `audit = {{ near_pass_rate = 0.25 }}`) to "
            f"draw audit samples, label them, then refit with {refit} and set surfaces.{policy.name}.routing"
        )
    return f"{head}audit samples are drawn (surfaces.{policy.name}.audit): label them, then refit with {refit}"
