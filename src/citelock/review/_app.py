"""The review desk as an ASGI application (FastAPI), and a function that serves it with uvicorn.

:func:`create_app` wires the pages, the JSON API, the static files (one stylesheet, one script), the security
headers and the error pages. A signed-out visitor gets the sign-in page and nothing else: every page redirects
there, every API route answers 401, and the OpenAPI description is served to signed-in accounts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, RedirectResponse, Response

from citelock._version import __version__
from citelock.errors import AlreadyResolvedError, InputError, NotPermittedError
from citelock.review import _api, _pages
from citelock.review._desk import ReviewDesk
from citelock.review._purge import PURGE_INTERVAL, SessionPurge
from citelock.review._security import SecurityHeaders
from citelock.review._throttle import SignInThrottle
from citelock.review._web import CsrfRefused, SignInRequired, api_user, render
from citelock.store import Credential

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "create_app", "serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8377


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _page_error(request: Request, status: int, title: str, message: str) -> Response:
    return render(request, "error.html", {"status": status, "title": title, "message": message}, status_code=status)


def _install_handlers(app: FastAPI) -> None:
    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, exc: SignInRequired) -> Response:
        # after signing in, a GET goes back where it was headed; a form post is not replayed
        target = exc.next_path if request.method in ("GET", "HEAD") else "/"
        return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)

    @app.exception_handler(CsrfRefused)
    async def _csrf(request: Request, exc: CsrfRefused) -> Response:
        message = (
            "refused: this form did not carry the session's CSRF token, or came from another site. "
            "Nothing was recorded; reload the page and try again."
        )
        if _is_api(request):
            return JSONResponse({"detail": message}, status_code=403)
        return _page_error(request, 403, "Request refused (CSRF)", message)

    def _json_or_page(request: Request, status: int, title: str, message: str) -> Response:
        if _is_api(request):
            return JSONResponse({"detail": message}, status_code=status)
        return _page_error(request, status, title, message)

    @app.exception_handler(AlreadyResolvedError)
    async def _conflict(request: Request, exc: AlreadyResolvedError) -> Response:
        return _json_or_page(request, 409, "Already resolved", str(exc))

    @app.exception_handler(NotPermittedError)
    async def _forbidden(request: Request, exc: NotPermittedError) -> Response:
        return _json_or_page(request, 403, "Not permitted", str(exc))

    @app.exception_handler(InputError)
    async def _bad_input(request: Request, exc: InputError) -> Response:
        return _json_or_page(request, 400, "Bad request", str(exc))

    @app.exception_handler(KeyError)
    async def _missing(request: Request, exc: KeyError) -> Response:
        return _json_or_page(
            request, 404, "Not found", f"nothing has the id {exc.args[0]!r}" if exc.args else "not found"
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', '')}" for err in exc.errors()
        )
        if _is_api(request):
            return JSONResponse({"detail": f"invalid request: {problems}"}, status_code=422)
        return _page_error(request, 400, "Bad request", f"invalid request: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if _is_api(request):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        return _page_error(request, exc.status_code, "Error", str(exc.detail))


def _origin(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") or parts.query:
        raise InputError(f"an origin is scheme://host[:port] (e.g. https://review.example.com), got {text!r}")
    return f"{parts.scheme}://{parts.netloc}".lower()


def create_app(
    desk: ReviewDesk | str | Path | Engine,
    *,
    session_lifetime: timedelta = timedelta(hours=12),
    idle_timeout: timedelta | None = timedelta(minutes=30),
    secure_cookies: bool = False,
    origins: Sequence[str] = (),
    sign_in_throttle: SignInThrottle | None = None,
    purge_interval: timedelta | None = PURGE_INTERVAL,
) -> FastAPI:
    """The review desk application.

    Args:
        desk: A :class:`ReviewDesk`, or the database to open one on (SQLite path, URL or engine).
        session_lifetime: How long a sign-in lasts.
        idle_timeout: A sign-in left unused longer than this ends (its visitor signs in again); None: never.
            Its last use is recorded at most once a minute, so it may end up to a minute early. API tokens
            have no idle timeout.
        secure_cookies: Mark cookies ``Secure`` even on plain HTTP (set it behind a TLS-terminating proxy;
            over HTTPS they are ``Secure`` anyway).
        origins: Origins the desk is served at besides the address it listens on (``https://review.example``
            behind a proxy): form posts from them pass the same-origin check.
        sign_in_throttle: Counts failed sign-ins (default: 5 per name, 20 per client address, in 15 minutes).
        purge_interval: After a sign-in, expired and idle sessions (and expired API tokens) are deleted, at most
            this often per process (10 minutes), after the response is sent; None: never (a cron job runs
            ``citelock review purge-sessions``).

    Raises:
        MissingExtraError: the ``review`` extra is not installed.
        InputError: an origin that is not ``scheme://host[:port]``, or an idle timeout or purge interval that is
            not positive.
    """
    if idle_timeout is not None and idle_timeout <= timedelta(0):
        raise InputError(f"the idle timeout must be positive, got {idle_timeout}")
    app = FastAPI(
        title="citelock review desk",
        version=__version__,
        description=_api.__doc__ or "",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.desk = desk if isinstance(desk, ReviewDesk) else ReviewDesk(desk)
    app.state.session_lifetime = session_lifetime
    app.state.idle_timeout = idle_timeout
    app.state.secure_cookies = secure_cookies
    app.state.origins = frozenset(_origin(o) for o in origins)
    app.state.sign_in_throttle = sign_in_throttle or SignInThrottle()
    app.state.purge_sessions = (
        None
        if purge_interval is None
        else SessionPurge(app.state.desk.accounts, idle=idle_timeout, interval=purge_interval)
    )
    app.add_middleware(SecurityHeaders)
    app.mount("/static", StaticFiles(directory=str(resources.files("citelock.review") / "static")), name="static")
    app.include_router(_pages.router)
    app.include_router(_api.router)
    _install_handlers(app)

    @app.get("/api/openapi.json", include_in_schema=False)
    def openapi(user: Annotated[Credential, Depends(api_user)]) -> dict[str, Any]:
        return app.openapi()

    return app


def serve(
    db: str | Path,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    session_lifetime: timedelta = timedelta(hours=12),
    idle_timeout: timedelta | None = timedelta(minutes=30),
    secure_cookies: bool = False,
    origins: Sequence[str] = (),
    purge_interval: timedelta | None = PURGE_INTERVAL,
) -> None:
    """Serve the desk with uvicorn until interrupted (binds to 127.0.0.1 unless told otherwise).

    The arguments after ``port`` are :func:`create_app`'s.
    """
    import uvicorn

    app = create_app(
        db,
        session_lifetime=session_lifetime,
        idle_timeout=idle_timeout,
        secure_cookies=secure_cookies,
        origins=origins,
        purge_interval=purge_interval,
    )
    uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=False, server_header=False)
