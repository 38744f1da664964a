"""The gateway as an ASGI application (FastAPI): ``POST /v1/chat/completions``, ``GET /v1/models``, health.

:func:`create_app` takes plain :class:`~citelock.gateway.GatewaySettings` (surfaces by name, the upstream, the
store, the limits). Each request: the key is checked (once any key exists, every request needs one: 401 for
none or a wrong one, 403 for a surface the key does not name), the body is read against the size limit and
translated, then it runs through its surface's door (:mod:`citelock.gateway._door`) under the per-request
timeout (504 past it). Every failure is OpenAI's error envelope with a status that says what happened; no
response ever carries a traceback. The upstream's API key stays in the gateway's environment.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from citelock._version import __version__
from citelock.errors import MissingExtraError

try:
    from fastapi import FastAPI, Request
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError:  # pragma: no cover - the gateway extra is missing
    raise MissingExtraError("gateway", "fastapi") from None
from citelock.gateway._deadline import deadline_error
from citelock.gateway._door import Doors, relay
from citelock.gateway._envelope import (
    GatewayError,
    answer_headers,
    blocked_error,
    completion_json,
    failure,
)
from citelock.gateway._keys import GatewayKey, GatewayKeys
from citelock.gateway._request import GatewayRequest, read_request
from citelock.gateway._settings import GatewaySettings
from citelock.gateway._sse import sse_chunks

__all__ = ["create_app"]

_log = logging.getLogger("citelock.gateway")


def _error_response(error: GatewayError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def _key(request: Request, keys: GatewayKeys | None) -> GatewayKey | None:
    """The caller's key; None while no key exists (the gateway is open until the first key is made)."""
    if keys is None:
        return None
    token = _bearer(request)
    # Inline, not in a worker thread: one indexed read (WAL readers never wait for a writer) costs less than
    # the thread hop would.
    key = keys.lookup(token) if token else None
    if key is not None or not keys.any():
        return key
    message = (
        "a gateway key is required: send 'Authorization: Bearer KEY' with a key made by 'citelock gateway key create'"
        if not token
        else "the gateway key is not valid (unknown or revoked)"
    )
    raise GatewayError(401, message, type="authentication_error", code="invalid_api_key")


def _allow(key: GatewayKey | None, surface: str) -> None:
    if key is not None and not key.allows(surface):
        raise GatewayError(
            403,
            f"this gateway key may not call surface {surface!r}; it may call {list(key.surfaces)}",
            type="permission_error",
            code="surface_not_allowed",
        )


def _install_handlers(app: FastAPI) -> None:
    @app.exception_handler(GatewayError)
    async def _gateway(request: Request, exc: GatewayError) -> Response:
        return _error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        error = GatewayError(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}", type=kind)
        return _error_response(error)

    @app.exception_handler(Exception)
    async def _any(request: Request, exc: Exception) -> Response:
        _log.exception("gateway request failed")
        return _error_response(failure(exc))


async def _completions(request: Request) -> Response:
    state = request.app.state
    settings: GatewaySettings = state.settings
    keys: GatewayKeys | None = state.keys
    key = await _key(request, keys)
    raw = await _read_body(request, settings.limits.max_body_bytes)
    parsed = read_request(raw, settings)
    _allow(key, parsed.surface.name)
    doors: Doors = state.doors
    limit = settings.limits.timeout_s
    try:
        if parsed.chunks is not None and not parsed.stream:
            return await _whole(doors, parsed, limit)  # its door keeps the limit (and the record of a timeout)
        async with asyncio.timeout(limit):
            if parsed.chunks is None:
                return await _passthrough(doors, parsed)
            return await _streamed(doors, parsed, limit)
    except TimeoutError:
        raise deadline_error(limit) from None
    except Exception as exc:
        raise failure(exc) from exc


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is over ``limit`` (a declared length is checked before reading)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise GatewayError(
            413, f"the request body is {declared} bytes; this gateway takes at most {limit}", code="body_too_large"
        )
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise GatewayError(
                413, f"the request body is over this gateway's limit of {limit} bytes", code="body_too_large"
            )
        parts.append(part)
    return b"".join(parts)


async def _passthrough(doors: Doors, request: GatewayRequest) -> Response:
    """A request without chunks on a surface that passes such requests through: the upstream's answer, unguarded."""
    headers = {"x-citelock-decision": "passthrough", "x-citelock-surface": request.surface.name}
    answered = await doors.passthrough(request)
    if request.stream:
        return StreamingResponse(relay(answered), media_type="text/event-stream", headers=headers)
    return JSONResponse(answered.model_dump(mode="json", exclude_unset=True), headers=headers)


async def _whole(doors: Doors, request: GatewayRequest, timeout_s: float) -> Response:
    answered = await doors.answer(request, timeout_s)
    guarded = answered.guarded
    surface = request.surface
    headers = answer_headers(guarded, surface.name)
    if guarded.served:
        content, finish = guarded.rendered, answered.finish_reason
    elif surface.on_block == "refuse":
        content, finish = surface.refusal, "content_filter"
    else:
        raise blocked_error(guarded, surface.name)
    body = completion_json(
        guarded, content, model=answered.model, finish_reason=finish, completion_id=answered.completion_id,
        usage=answered.usage,
    )  # fmt: skip
    return Response(body, media_type="application/json", headers=headers)


async def _streamed(doors: Doors, request: GatewayRequest, timeout_s: float) -> Response:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    request_id, events = await doors.stream(request)
    first = await anext(events)  # an upstream that cannot be reached is an HTTP error, before any event is sent

    async def rest() -> AsyncIterator[Any]:
        yield first
        try:
            while True:
                try:
                    event = await asyncio.wait_for(anext(events), max(deadline - loop.time(), 0.0))
                except StopAsyncIteration:
                    return
                yield event
        finally:
            await events.aclose()  # type: ignore[attr-defined]  # also when the client went away: closes upstream

    model = request.arguments.get("model") or (await doors.models())[0]
    body = sse_chunks(rest(), request.surface, f"chatcmpl-{uuid.uuid4().hex}", str(model), request_id)
    headers = {
        "x-citelock-surface": request.surface.name, "x-citelock-request-id": request_id, "cache-control": "no-cache"
    }  # fmt: skip
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


def create_app(settings: GatewaySettings, *, doors: Doors | None = None) -> FastAPI:
    """The gateway application.

    Args:
        settings: Surfaces, upstream, store and limits (see :class:`~citelock.gateway.GatewaySettings`).
        doors: The per-surface clients to use (None: built from ``settings`` when the app starts).

    Raises:
        MissingExtraError: the ``gateway`` extra is not installed.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if app.state.doors is None:
            app.state.doors = await asyncio.to_thread(Doors, settings)
        app.state.keys = GatewayKeys(app.state.doors.engine) if app.state.doors.engine is not None else None
        app.state.ready = True
        try:
            yield
        finally:
            await app.state.doors.aclose()

    app = FastAPI(
        title="citelock gateway", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
        openapi_url=None,
    )  # fmt: skip
    app.state.settings = settings
    app.state.doors = doors
    app.state.keys = None
    app.state.ready = False
    _install_handlers(app)
    # a plain Starlette route: the body is read and checked here, so FastAPI's per-request parameter solving
    # would only add cost to the hot path
    app.router.routes.append(Route("/v1/chat/completions", _completions, methods=["POST"]))

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        await _key(request, request.app.state.keys)
        try:
            names = await request.app.state.doors.models()
        except Exception as exc:
            raise failure(exc) from exc
        return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "citelock"} for n in names]}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> Response:
        return await _ready(request)

    return app


async def _ready(request: Request) -> Response:
    """Ready: started, the store answers, and the upstream lists its models (or the bundled model is loaded)."""
    state = request.app.state
    if not state.ready:
        return _error_response(GatewayError(503, "starting", type="server_error"))
    doors: Doors = state.doors
    checks: dict[str, str] = {}
    try:
        if doors.engine is not None:
            from sqlalchemy import text

            def ping() -> None:
                with doors.engine.connect() as conn:  # type: ignore[union-attr]
                    conn.execute(text("SELECT 1"))

            await asyncio.to_thread(ping)
            checks["store"] = "ok"
        await doors.ping()
        checks["upstream" if doors.upstream else "model"] = "ok"
    except Exception as exc:
        error = failure(exc)
        return JSONResponse({**error.body(), "checks": checks}, status_code=503)
    return JSONResponse({"status": "ready", "checks": checks})
