"""The gateway's door to the one request: per surface, the configured client a request runs through.

A door adds no request logic of its own. With an upstream server each surface holds a :func:`citelock.wrap`
client over one ``openai.AsyncOpenAI`` (the server kind decides how the per-request constraint is sent; the
caller's messages are sent exactly as given); without one, a :class:`citelock.Citelock` over the bundled model
(the ``local`` backend, loaded once per worker and shared by the surfaces). Every surface writes to the same
store: the prompt log (hash-chained, appends serialized across processes), the result store and the review queue.

Internal calls this module depends on (named so a refactor of the runner finds them): the wrapped client's
``_prepare`` (check, locate, constrain, log through the request core's one runner), ``_finish`` (verify, parse,
guard, repair, persist a whole answer) and ``_job`` (the stream job of a prepared call, here under the surface's
show policy), and :func:`citelock.stream._drive.astream_events`: the steps the wrapped client's own ``create``
makes, run here one by one so the request's time limit cuts only the wait for the upstream.

What a whole request costs beyond the upstream's own time (``benchmarks/bench_gateway.py``): a surface whose
guard does no I/O of its own (the free checks, the built-in ``lexical`` judge) runs its local steps on the
event loop, with no worker-thread hop; a surface with a judge that calls a model runs each in a worker thread.
The constraint goes upstream as pre-serialized JSON through the SDK's client (its connection pool, keep-alive,
typed errors), not through ``create``'s per-call parameter transform (a llama.cpp grammar is often over 100 kB).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any, TypeVar

from sqlalchemy import Engine

from citelock._wrap import AsyncWrappedOpenAI, wrap
from citelock.backends._protocol import Backend
from citelock.errors import BackendError, BackendTimeoutError, MissingExtraError, UsageError
from citelock.gateway._deadline import DEADLINE, Deadline, GatedSinks, deadline_error, timed_out
from citelock.gateway._envelope import GatewayError, dumps
from citelock.gateway._request import GatewayRequest, local_turns, with_system
from citelock.gateway._settings import GatewaySettings, GatewaySurface
from citelock.guard import Guard
from citelock.pipeline import Citelock, GuardedAnswer, Sink
from citelock.prompt import PromptTemplate
from citelock.records import Answer
from citelock.store import PromptLog, ResultStore, ReviewQueue, make_engine
from citelock.telemetry._hook import answer_trace, stream_trace

__all__ = ["LOCAL_MODEL", "Answered", "Doors", "relay"]

LOCAL_MODEL = "citelock-local"
"""The model name the gateway reports when it serves the bundled model."""

_IN_PROCESS_JUDGES = frozenset({"lexical"})
"""Judges that answer in microseconds without I/O: a guard made of these runs on the event loop."""

_log = logging.getLogger("citelock.gateway")
_JSON = {"content-type": "application/json"}
_T = TypeVar("_T")


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
        self.sinks = None if self.engine is None else GatedSinks(ReviewQueue(self.engine), ResultStore(self.engine))
        sinks: tuple[Sink, ...] = (self.sinks,) if self.sinks is not None else ()
        config = _config(settings)
        guards = {name: _guard(config, name, s) for name, s in settings.surfaces.items()}
        self._inline = {name: _in_process(guard) for name, guard in guards.items()}
        self._pending: set[asyncio.Future[Any]] = set()  # finishing steps that outlived their request's limit
        target = _upstream(config, settings)
        self.client: Any = None
        self._whole_client: Any = None
        self._raw_body = False
        self.model = target.model
        self._wrapped: dict[str, AsyncWrappedOpenAI] = {}
        self._local: dict[str, Citelock] = {}
        if target.url is not None:
            self.client = _upstream_client(target, settings.limits.timeout_s)
            # whole answers go through the SDK's aiohttp transport when it is there (a third less CPU a call);
            # streams, pass-through and the model list through its default (httpx) client
            self._whole_client = _upstream_client(target, settings.limits.timeout_s, aiohttp=True) or self.client
            self._raw_body = "content" in inspect.signature(self._whole_client.post).parameters
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

    async def answer(self, request: GatewayRequest, timeout_s: float | None = None) -> Answered:
        """Answer one request, whole (constrained, logged, guarded, repaired, persisted), within ``timeout_s``.

        ``timeout_s`` (None: the settings' limit) bounds the request: past it this raises the 504, and the store
        holds the request's timeout record (see :mod:`citelock.gateway._deadline`), never its unserved result.
        """
        deadline = Deadline(timeout_s if timeout_s is not None else self.settings.limits.timeout_s)
        token = DEADLINE.set(deadline)  # this request's task, and the worker threads it starts, see it
        try:
            if self.client is None:
                return await self._local_answer(request, deadline)
            return await self._upstream_answer(request, deadline)
        finally:
            DEADLINE.reset(token)

    async def _local_answer(self, request: GatewayRequest, deadline: Deadline) -> Answered:
        question, history, system = local_turns(request)
        config = self._local_config(request.surface.name, system)
        request_id = uuid.uuid4().hex
        work = asyncio.ensure_future(
            config.aanswer(question, request.evidence, policy=request.policy, history=history, request_id=request_id)
        )
        return Answered(await self._within(work, deadline, deadline.timeout_s, request_id), LOCAL_MODEL)

    def _local_config(self, surface: str, system: str | None) -> Citelock:
        """The surface's bundled-model client; with the caller's system prompt, a copy whose template carries it."""
        config = self._local[surface]
        if system is None:
            return config
        from citelock.prompt import load_template

        base = config.template if isinstance(config.template, PromptTemplate) else None
        template = with_system(base or load_template(config.template or "answer_structured"), system)
        return Citelock(
            config.backend, log=config.log, guard=config.guard, sinks=config.sinks, policy=config.policy,
            template=template,
        )  # fmt: skip

    async def _within(self, work: asyncio.Future[_T], deadline: Deadline, remaining: float, request_id: str) -> _T:
        """``work``'s result if it claims its delivery within ``remaining`` seconds, else the 504.

        Past the limit ``work`` runs on, and its sink writes the request's timeout record instead of its result.
        """
        try:
            return await asyncio.wait_for(asyncio.shield(work), max(remaining, 0.0))
        except TimeoutError:
            if not deadline.expire():
                return await work  # its result was complete and is being written: answer it
            self._pending.add(work)
            work.add_done_callback(self._settled)
            raise deadline_error(deadline.timeout_s, request_id) from None

    def _settled(self, work: asyncio.Future[Any]) -> None:
        self._pending.discard(work)
        if not work.cancelled() and work.exception() is not None:
            _log.error("a request past its time limit failed while finishing", exc_info=work.exception())

    async def _upstream_answer(self, request: GatewayRequest, deadline: Deadline) -> Answered:
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline.timeout_s
        name = request.surface.name
        wrapped = self._wrapped[name]
        inline = self._inline[name]
        arguments = {**self._arguments(request), "chunks": request.evidence, "citelock_policy": request.policy}
        model = None if "model" in arguments else await wrapped.backend.transport.amodel()
        with answer_trace() as trace:  # the spans wrap's own create makes, when the otel extra is installed
            with trace.assembling() as assembled:
                prepared = assembled(await _step(inline, wrapped._prepare, arguments, model))
            abstained = await _step(inline, wrapped._abstained, prepared)
            if abstained is not None:  # the runner's early abstention: answered without calling the upstream
                return _answered(abstained, abstained.choices[0])
            started = perf_counter()
            try:
                with trace.generating(prepared.record, wrapped.backend) as done:
                    async with asyncio.timeout_at(end):  # the one step the limit cuts: the wait for the upstream
                        response, choice = await self._send(wrapped, prepared)
                    done(response)
            except TimeoutError:
                deadline.expire()
                await _step(inline, self._record_timeout, wrapped, prepared, deadline)
                raise deadline_error(deadline.timeout_s, prepared.record.request_id) from None
            except BackendTimeoutError:  # the SDK's own timeout: the upstream did not answer in time either
                deadline.expire()
                await _step(inline, self._record_timeout, wrapped, prepared, deadline)
                raise
            latency = perf_counter() - started
            if inline:
                response = wrapped._finish(prepared, response, choice, latency)
            else:
                work = asyncio.ensure_future(asyncio.to_thread(wrapped._finish, prepared, response, choice, latency))
                response = await self._within(work, deadline, end - loop.time(), prepared.record.request_id)
        return _answered(response, choice)

    async def _send(self, wrapped: AsyncWrappedOpenAI, prepared: Any) -> tuple[Any, Any]:
        """The prepared call, sent as one pre-serialized JSON body through the SDK's client; (response, choice).

        Raises:
            BackendError: typed, as the transport raises it (the SDK's exception is ``__cause__``).
        """
        from openai.types.chat import ChatCompletion

        transport = wrapped.backend.transport
        arguments = dict(prepared.arguments)
        body = {**arguments, **(arguments.pop("extra_body", None) or {})}
        body.pop("extra_body", None)
        request_id = prepared.record.request_id
        try:
            if self._raw_body:
                response = await self._whole_client.post(
                    "/chat/completions", cast_to=ChatCompletion, content=dumps(body), options={"headers": _JSON}
                )
            else:  # an SDK without ``content=``: it serializes the body itself
                response = await self._whole_client.post("/chat/completions", cast_to=ChatCompletion, body=body)
        except Exception as exc:
            raise transport.failure(_refused(exc), request_id) from exc
        if not response.choices:
            raise BackendError(
                "the server returned no choices", provider=self._provider, citelock_request_id=request_id
            )
        return response, response.choices[0]

    def _record_timeout(self, wrapped: AsyncWrappedOpenAI, prepared: Any, deadline: Deadline) -> None:
        """Store the result of a request whose upstream did not answer in time: blocked, no claims, the limit."""
        if self.sinks is None:
            return
        guard = wrapped.citelock.guard
        if guard.policy is None:  # pragma: no cover - every gateway surface has a policy
            return
        result = guard.run(prepared.record, Answer(claims=()), known_ids=wrapped.citelock.known_ids)
        self.sinks.write(timed_out(result, deadline.timeout_s))

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
            question, history, system = local_turns(request)
            config = self._local_config(surface.name, system)
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
        """Close the upstream client and the store's connections (after the requests still finishing)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self.client is not None:
            await self.client.close()
            if self._whole_client is not self.client:
                await self._whole_client.close()
        if self.engine is not None:
            self.engine.dispose()


def _answered(response: Any, choice: Any) -> Answered:
    """The door's answer from the wrapped client's guarded SDK response and its first choice."""
    usage = response.usage.model_dump() if getattr(response, "usage", None) is not None else None
    return Answered(response.citelock, str(response.model), response.id, choice.finish_reason or "stop", usage)


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


async def _step(inline: bool, fn: Callable[..., _T], *args: Any) -> _T:
    """One local step of a request: on the event loop (a guard without I/O), else in a worker thread."""
    return fn(*args) if inline else await asyncio.to_thread(fn, *args)


def _in_process(guard: Guard) -> bool:
    """Whether a guard's checks do no I/O: no judge, or only in-process judges that answer in microseconds."""
    judges = (guard.judge, guard.escalate, guard.relevance_judge)
    return all(j is None or getattr(j, "name", None) in _IN_PROCESS_JUDGES for j in judges)


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


def _upstream_client(target: _Target, timeout_s: float, *, aiohttp: bool = False) -> Any:
    """The upstream's ``openai.AsyncOpenAI`` (one pool of kept-alive connections per worker).

    ``aiohttp``: over the SDK's aiohttp transport, or None when the SDK or aiohttp lacks it.
    """
    try:
        import openai
    except ImportError:
        raise MissingExtraError("gateway", "openai") from None
    # No retries here: a 429 is passed on to the caller with its Retry-After, a 5xx is a 502 at once.
    options: dict[str, Any] = {"max_retries": 0, "timeout": timeout_s}
    if aiohttp:
        try:
            import aiohttp as _aiohttp  # noqa: F401
            from openai import DefaultAioHttpClient
        except ImportError:
            return None
        options["http_client"] = DefaultAioHttpClient()
    return openai.AsyncOpenAI(base_url=target.url, api_key=target.key or "not-needed", **options)


def _refused(exc: Exception) -> Exception:
    """``exc``, except that a refused connection the aiohttp transport reports as a timeout is a connection error.

    (The transport maps ``aiohttp.ClientConnectorError`` by its base class, ``ClientConnectionError``, to
    ``httpx.ConnectTimeout``: the SDK then raises ``APITimeoutError``, a 504 where the truth is a 502.)
    """
    import openai

    if not isinstance(exc, openai.APITimeoutError):
        return exc
    cause: BaseException | None = exc
    while cause is not None:
        if type(cause).__name__ == "ClientConnectorError":
            return openai.APIConnectionError(
                message=f"the upstream refused the connection: {cause}", request=exc.request
            )
        cause = cause.__cause__ or cause.__context__
    return exc
