"""What one gateway serves: its surfaces, the upstream server, the store and the limits of every request.

Each surface is a :class:`~citelock.SurfacePolicy` plus the door's own settings.

:class:`GatewaySurface` holds what a surface means at the HTTP door and nowhere else: what a blocked answer
becomes (``on_block``: an HTTP 400 error, or a 200 refusal with ``finish_reason: content_filter``), the refusal
text, and when a streamed claim may be shown. :class:`GatewaySettings` is a frozen value that round-trips
through JSON, so ``--workers N`` hands every worker process the same settings (workers are stateless).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from citelock.config._schema import DEFAULT_REFUSAL
from citelock.constraint import DEFAULT_POLICY, SpanPolicy
from citelock.guard import SurfacePolicy
from citelock.stream import Show

__all__ = [
    "DEFAULT_REFUSAL",
    "GatewayLimits",
    "GatewaySettings",
    "GatewaySurface",
    "OnBlock",
]

OnBlock = Literal["error", "refuse"]
"""What a blocked answer becomes: ``error`` (HTTP 400, OpenAI's error envelope, ``type: citelock_blocked``) or
``refuse`` (HTTP 200, the surface's refusal text, ``finish_reason: content_filter``)."""


class GatewaySurface(BaseModel):
    """One surface as the gateway serves it.

    Attributes:
        policy: The surface's guard policy (name, stakes, ``on_fail``, sampling...).
        on_block: ``error`` (the default) or ``refuse`` (see :data:`OnBlock`).
        refusal: The content of a refused answer (``on_block="refuse"``).
        show: When a streamed claim reaches the caller (None: the policy's default, ``after_judge`` on a
            high-stakes surface, ``immediately`` on a low-stakes one).
        span_policy: The span policy requested when a request names none.
        passthrough: A request without ``citelock.chunks`` is sent upstream as it is and its answer returned
            unguarded, marked ``x-citelock-decision: passthrough`` (False, the default: such a request is a 400).
            Only with an upstream server.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: SurfacePolicy
    on_block: OnBlock = "error"
    refusal: str = Field(default=DEFAULT_REFUSAL, min_length=1)
    show: Show | None = None
    span_policy: SpanPolicy = DEFAULT_POLICY
    passthrough: bool = False

    @property
    def name(self) -> str:
        """The surface's name (its policy's)."""
        return self.policy.name


class GatewayLimits(BaseModel):
    """What one request may hold, and how long it may take.

    Attributes:
        max_body_bytes: The largest request body (413 above it).
        max_chunks: The most chunks one request may carry (400 above it).
        max_chunk_chars: The longest chunk text (400 above it).
        timeout_s: The most one request may take, upstream call and checks included (504 past it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = Field(default=1_000_000, ge=1)
    max_chunks: int = Field(default=64, ge=1)
    max_chunk_chars: int = Field(default=20_000, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)


class GatewaySettings(BaseModel):
    """Everything a gateway worker needs (JSON-serializable: every worker of ``--workers N`` gets a copy).

    Attributes:
        surfaces: The surfaces by name.
        default_surface: The surface of a request that names none (None: every request must name one).
        db: The store (SQLite path or PostgreSQL URL): prompt log, results, review queue, gateway keys. None
            keeps nothing (no log, no keys: every request is let in).
        upstream: The upstream OpenAI-compatible server's base URL (``http://host:port/v1``); None serves the
            bundled model in-process (the ``local`` backend).
        server: The upstream's kind (as :func:`citelock.wrap` takes it: ``openai``, ``vllm``, ``sglang``,
            ``llama.cpp``, ``llama-cpp-python``); None lets ``wrap`` decide.
        upstream_key_env: The environment variable holding the upstream's API key (it never leaves the gateway).
        model: The model name sent upstream when a request names none (None: the upstream's first listed).
        limits: Body, chunk and time limits.
        config: The config file the surfaces came from (``citelock gateway --config``): every worker loads it
            and builds each surface's guard from it (its judges, escalation and relevance judges). None: each
            surface's guard is ``Guard(policy)`` (the default judge).
        backend: A ``[backends.NAME]`` entry of ``config`` (kind ``openai``) to use as the upstream: its base
            URL, server kind, model and API key (read from the environment by each worker) replace ``upstream``,
            ``server``, ``model`` and ``upstream_key_env``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    surfaces: Mapping[str, GatewaySurface]
    default_surface: str | None = None
    db: str | None = None
    upstream: str | None = None
    server: str | None = None
    upstream_key_env: str = "CITELOCK_UPSTREAM_API_KEY"
    model: str | None = None
    limits: GatewayLimits = GatewayLimits()
    config: str | None = None
    backend: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.backend is not None and self.config is None:
            raise ValueError(f"backend {self.backend!r} names a [backends] entry: give the config file too")
        if not self.surfaces:
            raise ValueError("a gateway needs at least one surface")
        for key, surface in self.surfaces.items():
            if key != surface.name:
                raise ValueError(f"surface {key!r} holds a policy named {surface.name!r}; the names must match")
        if self.default_surface is not None and self.default_surface not in self.surfaces:
            raise ValueError(
                f"default_surface {self.default_surface!r} is not one of the surfaces {sorted(self.surfaces)}"
            )
        return self

    @classmethod
    def from_config(
        cls,
        path: str | None,
        *,
        on_block: OnBlock | None = None,
        refusal: str | None = None,
        span_policy: SpanPolicy = DEFAULT_POLICY,
        **settings: Any,
    ) -> GatewaySettings:
        """Settings whose surfaces are the config file's (each with its stream show policy and gateway keys).

        Each surface's ``on_block`` and ``refusal`` are its ``[surfaces.NAME.gateway]`` keys; ``on_block`` /
        ``refusal`` given here win over the file's for every surface (as a flag does), and a key neither sets is
        the default (``error``, :data:`DEFAULT_REFUSAL`). ``span_policy`` is applied to each surface. The store is
        the config's ``store`` unless ``db`` is given.

        Raises:
            InputError: the config file is missing, invalid, or names no surface.
            pydantic.ValidationError: the settings do not fit together.
        """
        from citelock.config import Config
        from citelock.errors import InputError

        config = Config.load(path)
        if not config.surface_names:
            raise InputError(f"{config.path or 'the config'} names no surface; add a [surfaces.NAME] table")
        surfaces = {}
        for name in config.surface_names:
            resolved = config.surface_settings(name)
            surfaces[name] = GatewaySurface(
                policy=resolved.policy,
                on_block=on_block or resolved.on_block or "error",
                refusal=refusal or resolved.refusal or DEFAULT_REFUSAL,
                show=resolved.show,
                span_policy=span_policy,
            )
        default = config.default_surface or config.surface_names[0]
        where = str(config.path) if config.path is not None else None
        if settings.get("db") is None:
            settings["db"] = config.store
        return cls.model_validate({"surfaces": surfaces, "default_surface": default, "config": where, **settings})

    @classmethod
    def of(
        cls,
        surfaces: Mapping[str, SurfacePolicy | GatewaySurface],
        default_surface: str | None = None,
        **settings: object,
    ) -> GatewaySettings:
        """Settings from plain surface policies (each gets the door's defaults) or gateway surfaces.

        Raises:
            pydantic.ValidationError: names that do not match, an unknown default surface, a bad limit.
        """
        wrapped = {
            name: s if isinstance(s, GatewaySurface) else GatewaySurface(policy=s) for name, s in surfaces.items()
        }
        return cls.model_validate({"surfaces": wrapped, "default_surface": default_surface, **settings})
