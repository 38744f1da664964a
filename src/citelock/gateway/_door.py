"""The gateway's door to the one request: per surface, the configured client a request runs through.

A door adds no request logic of its own. With an upstream server each surface holds a :func:`citelock.wrap`
client over one ``openai.AsyncOpenAI`` (the server kind decides how the per-request constraint is sent; the
caller's messages are sent exactly as given); without one, a :class:`citelock.Citelock` over the bundled model
(the ``local`` backend, loaded once per worker and shared by the surfaces). Every surface writes to the same
store: the prompt log (hash-chained, appends serialized across processes), the result store and the review queue.

Internal calls this module depends on (named so a refactor of the runner finds them): the wrapped client's
``_prepare`` (check, locate, constrain, log through the request core's one runner) and ``_job`` (the stream job
of a prepared call, here under the surface's show policy), and :func:`citelock.stream._drive.astream_events`,
the same three the wrapped client's own ``stream=True`` call makes.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from citelock._wrap import AsyncWrappedOpenAI, wrap
from citelock.backends._protocol import Backend
from citelock.errors import MissingExtraError, UsageError
from citelock.gateway._envelope import GatewayError
from citelock.gateway._request import GatewayRequest, local_turns
from citelock.gateway._settings import GatewaySettings, GatewaySurface
from citelock.guard import Guard
from citelock.pipeline import Citelock, GuardedAnswer, Sink
from citelock.store import PromptLog, ResultStore, ReviewQueue, make_engine
from citelock.telemetry._hook import stream_trace

__all__ = ["LOCAL_MODEL", "Answered", "Doors", "relay"]

LOCAL_MODEL = "citelock-local"
"""The model name the gateway reports when it serves the bundled model."""


@dataclass(frozen=True)
class Answered:
    """A guarded answer and what the upstream said about it (its completion id, model and usage)."""

    guarded: GuardedAnswer
    model: str
    completion_id: str | None = None
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None


class Doors:
    """Per surface, the client its requests run through (built once per worker process).

    Args:
        settings: The gateway's settings.
        engine: The store's engine (None: from ``settings.db``; no store when that is None too).
        local: The bundled-model backend to share (None: loaded on first use), used when there is no upstream.
    """

    def __init__(
        self, settings: GatewaySettings, *, engine: Engine | None = None, local: Backend | None = None
    ) -> None:
        self.settings = settings
        self.engine = engine if engine is not None or settings.db is None else make_engine(settings.db)
        self.log = PromptLog(self.engine) if self.engine is not None else None
        sinks: tuple[Sink, ...] = ()
        if self.engine is not None:
            sinks = (ReviewQueue(self.engine), ResultStore(self.engine))
        config = _config(settings)
        guards = {name: _guard(config, name, s) for name, s in settings.surfaces.items()}
        target = _upstream(config, settings)
        self.client: Any = None
        self.model = target.model
        self._wrapped: dict[str, AsyncWrappedOpenAI] = {}
        self._local: dict[str, Citelock] = {}
        if target.url is not None:
            self.client = _upstream_client(target, settings.limits.timeout_s)
            for name, surface in settings.surfaces.items():
                self._wrapped[name] = wrap(
                    self.client, guard=guards[name], log=self.log, sinks=sinks, server=target.server,
                    policy=surface.span_policy, content="raw",
                )  # fmt: skip
        else:
            from citelock.backends import make_backend

            shared = local if local is not None else make_backend("local")  # one model for every surface
            for name, surface in settings.surfaces.items():
                self._local[name] = Citelock(
                    shared, log=self.log, guard=guards[name], sinks=sinks, policy=surface.span_policy
                )

    @property
    def _provider(self) -> str:
        return next(iter(self._wrapped.values())).backend.provider if self._wrapped else "local"

    @property
    def upstream(self) -> bool:
        """Whether requests go to an upstream server (else the bundled model)."""
        return self.client is not None

    async def models(self) -> list[str]:
        """The model names this gateway serves (the upstream's, or the bundled model's)."""
        if self.client is None:
            return [LOCAL_MODEL]
        if self.model is not None:
            return [self.model]
        wrapped = next(iter(self._wrapped.values()))
        return [await wrapped.backend.transport.amodel()]

    async def ping(self) -> None:
        """Ask the upstream for its models (readiness); the bundled model is ready once loaded.

        Raises:
            BackendError: the upstream cannot be reached or fails.
        """
        if self.client is None:
            return
        from citelock.runtime._transport import map_openai_error

        try:
            await self.client.models.list()
        except Exception as exc:
            raise map_openai_error(exc, provider=self._provider) from exc

    def _arguments(self, request: GatewayRequest) -> dict[str, Any]:
        arguments = dict(request.arguments)
        if "model" not in arguments and self.model is not None:
            arguments["model"] = self.model
        return arguments

    async def answer(self, request: GatewayRequest) -> Answered:
        """Answer one request, whole (constrained, logged, guarded, repaired, persisted)."""
        surface = request.surface
        if self.client is None:
            question, history = local_turns(request)
            config = self._local[surface.name]
            guarded = await config.aanswer(question, request.evidence, policy=request.policy, history=history)
            return Answered(guarded, LOCAL_MODEL)
        wrapped = self._wrapped[surface.name]
        response = await wrapped.chat.completions.create(
            **self._arguments(request), chunks=request.evidence, citelock_policy=request.policy
        )
        choice = response.choices[0]
        usage = response.usage.model_dump() if getattr(response, "usage", None) is not None else None
        return Answered(response.citelock, str(response.model), response.id, choice.finish_reason or "stop", usage)

    async def passthrough(self, request: GatewayRequest) -> Any:
        """Send a request without chunks upstream as it is (a surface with ``passthrough``): its answer, unguarded.

        Returns the upstream's completion, or with ``stream`` its open stream of chunks (see :func:`relay`).

        Raises:
            GatewayError: 400 when the gateway serves the bundled model (it answers only with citations).
            BackendError: the upstream failed.
        """
        if self.client is None:
            raise GatewayError(
                400, "pass-through needs an upstream server; send citelock.chunks", param="citelock.chunks"
            )
        from citelock.runtime._transport import map_openai_error

        extra = {"stream": True} if request.stream else {}
        try:
            return await self.client.chat.completions.create(**self._arguments(request), **extra)
        except Exception as exc:
            raise map_openai_error(exc, provider=self._provider) from exc

    async def stream(self, request: GatewayRequest) -> tuple[str, AsyncIterator[Any]]:
        """Open one streamed request: its request id, and citelock's stream events (the last is ``done``).

        The events follow the surface's show policy. The request is checked and (upstream) prepared and logged
        here; generation starts with the first event.
        """
        surface = request.surface
        if self.client is None:
            question, history = local_turns(request)
            config = self._local[surface.name]
            request_id = uuid.uuid4().hex
            events = config.astream(
                question, request.evidence, policy=request.policy, history=history, show=surface.show,
                request_id=request_id,
            )  # fmt: skip
            return request_id, events
        from citelock.stream._drive import astream_events

        wrapped = self._wrapped[surface.name]
        arguments = {**self._arguments(request), "chunks": request.evidence, "citelock_policy": request.policy}
        model = None if "model" in arguments else await wrapped.backend.transport.amodel()
        streamed = stream_trace()
        with streamed.assembling() as assembled:
            prepared = assembled(await asyncio.to_thread(wrapped._prepare, arguments, model))
        job = wrapped._job(prepared, surface.show)
        return prepared.record.request_id, _closing(streamed.aevents(job, astream_events))

    async def aclose(self) -> None:
        """Close the upstream client and the store's connections."""
        if self.client is not None:
            await self.client.close()
        if self.engine is not None:
            self.engine.dispose()


async def _closing(events: Any) -> AsyncIterator[Any]:
    """``events``, closed however iteration ends (a client that went away closes the upstream stream)."""
    try:
        async for event in events:
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


async def relay(opened: Any) -> AsyncIterator[bytes]:
    """A pass-through stream's chunks as SSE, then ``data: [DONE]`` (the upstream stream is closed either way)."""
    try:
        async for chunk in opened:
            yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n".encode()
        yield b"data: [DONE]\n\n"
    finally:
        await opened.close()


@dataclass(frozen=True)
class _Target:
    url: str | None
    server: str | None
    model: str | None
    key: str | None


def _config(settings: GatewaySettings) -> Any:
    if settings.config is None:
        return None
    from citelock.config import Config

    return Config.load(settings.config)


def _guard(config: Any, name: str, surface: GatewaySurface) -> Guard:
    """The surface's guard: the config's (its judges) when the surfaces came from one, else ``Guard(policy)``."""
    if config is not None and config.has_surface(name):
        guard: Guard = config.guard(name)
        return guard
    return Guard(surface.policy)


def _upstream(config: Any, settings: GatewaySettings) -> _Target:
    """Where requests go: a ``[backends.NAME]`` of the config, else ``--upstream`` (None: the bundled model)."""
    if settings.backend is None:
        key = os.environ.get(settings.upstream_key_env)
        return _Target(settings.upstream, settings.server, settings.model, key)
    entry = config.backends.get(settings.backend)
    if entry is None or entry.kind != "openai":
        known = [n for n, e in config.backends.items() if e.kind == "openai"]
        raise UsageError(
            f"backend {settings.backend!r} is not an openai backend of {config.path}; its openai backends: {known}"
        )
    if entry.base_url is None:
        raise UsageError(f"backend {settings.backend!r} has no base_url; the gateway needs the upstream's /v1 URL")
    return _Target(entry.base_url, entry.server, entry.model or settings.model, entry.api_key)


def _upstream_client(target: _Target, timeout_s: float) -> Any:
    try:
        import openai
    except ImportError:
        raise MissingExtraError("gateway", "openai") from None
    # No retries here: a 429 is passed on to the caller with its Retry-After, a 5xx is a 502 at once.
    return openai.AsyncOpenAI(base_url=target.url, api_key=target.key or "not-needed", max_retries=0, timeout=timeout_s)
