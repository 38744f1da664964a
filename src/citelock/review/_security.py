"""Who is asking, and may they: sessions, API tokens, CSRF, same-origin checks and the security headers.

- **Browser sessions**: signing in puts a random token in a cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure``
  over HTTPS, ``Path=/``); the database keeps only its SHA-256, with the account, an expiry and its last use.
  Signing out, disabling the account or leaving it unused past the idle timeout ends it server-side.
- **API tokens** (``Authorization: Bearer ...``, issued by ``citelock review token``) for scripts and tools. A
  browser never attaches them on its own, so they need no CSRF token.
- **CSRF**: every state-changing request made with a session cookie must carry the session's CSRF token (a
  synchronizer token: the ``csrf_token`` form field, or the ``X-CSRF-Token`` header for JSON), compared in
  constant time; and a request whose ``Origin`` names another site is refused whatever it carries. The sign-in
  form, before any session exists, is protected the same way with a double-submit cookie. ``SameSite=Strict``
  is a third, independent layer: another site's form does not even send the cookie.
- **Headers** on every response: a Content Security Policy that allows scripts, styles and images only from
  the desk itself (no inline script or style, no ``eval``, no framing, forms posting only to the desk),
  ``nosniff``, referrers only within the desk (``no-referrer`` would make browsers send ``Origin: null`` on the
  desk's own form posts), no caching of pages.
"""

from __future__ import annotations

import hmac
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citelock.store import AccountStore, Credential

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "LOGIN_COOKIE",
    "SESSION_COOKIE",
    "SecurityHeaders",
    "bearer_token",
    "csrf_ok",
    "new_login_token",
    "request_credential",
    "safe_next",
    "same_origin",
    "session_idle_timeout",
]

SESSION_COOKIE = "citelock_review_session"
LOGIN_COOKIE = "citelock_review_login"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]


class SecurityHeaders:
    """ASGI middleware adding the security headers to every HTTP response (pages: also ``no-store``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = str(scope.get("path", "")).startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control" or static]
                headers.extend(_HEADERS)
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header, or None."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def request_credential(request: Request, accounts: AccountStore) -> Credential | None:
    """The account behind the request's API token, else behind its session cookie, else None.

    A session left unused longer than the app's idle timeout (``request.app.state.idle_timeout``) is refused.
    """
    token = bearer_token(request)
    if token is not None:
        return accounts.credential(token, kind="token")
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        return accounts.credential(cookie, kind="session", idle=session_idle_timeout(request))
    return None


def session_idle_timeout(request: Request) -> timedelta | None:
    """How long a browser session of this app may stay unused (None: no limit)."""
    idle: timedelta | None = getattr(request.app.state, "idle_timeout", None)
    return idle


def csrf_ok(expected: str, given: str | None) -> bool:
    """Constant-time comparison of a CSRF token (an empty or missing one never matches)."""
    if not expected or not given:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


def same_origin(request: Request) -> bool:
    """False when the request's ``Origin`` (or, lacking it, ``Referer``) is not the desk's own.

    The desk's own origin is the scheme and ``Host`` the request arrived with, or one of the origins the app
    was told it is served at (``create_app(origins=...)``, ``citelock review serve --origin``: behind a
    TLS-terminating proxy the browser's origin is the proxy's). A request with neither header (a script, not a
    browser) passes this check; its token or CSRF token must still be right.
    """
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return True
    if origin == "null":
        return False
    parts = urlsplit(origin)
    declared: frozenset[str] = getattr(request.app.state, "origins", frozenset())
    if f"{parts.scheme}://{parts.netloc}".lower() in declared:
        return True
    return parts.scheme == request.url.scheme and parts.netloc == request.headers.get("host", "")


def new_login_token() -> str:
    """A fresh double-submit token for the sign-in form."""
    return secrets.token_urlsafe(32)


def safe_next(target: Any) -> str:
    """Where to go after signing in: a path on this site only (never ``//host`` or an absolute URL)."""
    text = str(target or "")
    if not text.startswith("/") or text.startswith("//") or text.startswith("/\\") or "\n" in text or "\r" in text:
        return "/"
    return text
