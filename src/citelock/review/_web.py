"""What the pages and the API share: the templates (autoescaped), who is signed in, and the refusals.

Every template is rendered with autoescaping on for every value: model text, passages, notes, surface names
and ids are escaped wherever they appear, and no template marks a value ``|safe``. Attributes are always
quoted, and every link the desk builds is a path on the desk with its parameters URL-encoded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any
from urllib.parse import urlencode

import jinja2
from fastapi import Form, Header, HTTPException, Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response

from citelock.review._desk import ReviewDesk
from citelock.review._security import (
    SESSION_COOKIE,
    csrf_ok,
    request_credential,
    same_origin,
    session_idle_timeout,
)
from citelock.store import Credential

__all__ = [
    "CsrfRefused",
    "SignInRequired",
    "api_user",
    "api_writer",
    "desk_of",
    "form_user",
    "page_user",
    "render",
    "templates",
]


class SignInRequired(Exception):
    """A page asked for without a valid session: the answer is the sign-in page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


class CsrfRefused(Exception):
    """A state-changing request without the session's CSRF token, or from another origin."""


def _age(moment: datetime, now: datetime | None = None) -> str:
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _query(params: dict[str, Any], **changes: Any) -> str:
    merged = {**params, **changes}
    return urlencode({k: v for k, v in merged.items() if v not in (None, "")})


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resources.files("citelock.review") / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = _age
    env.filters["when"] = _when
    env.globals["query"] = _query
    return env


templates = Jinja2Templates(env=_environment())


def render(request: Request, name: str, context: dict[str, Any], *, status_code: int = 200) -> Response:
    """Render a page template with the signed-in user (if any) and the CSRF token in its context."""
    user: Credential | None = getattr(request.state, "user", None)
    base: dict[str, Any] = {"user": user, "csrf": user.csrf if user else "", "now": datetime.now(UTC), "alarms": ()}
    if user is not None:  # the banner: every alarm of every surface (computed at most once a minute)
        statuses, _ = desk_of(request).judge_status()
        base["alarms"] = tuple(a for s in statuses for a in s.alarms)
    return templates.TemplateResponse(request, name, {**base, **context}, status_code=status_code)


def desk_of(request: Request) -> ReviewDesk:
    """The desk the app serves."""
    desk: ReviewDesk = request.app.state.desk
    return desk


def _path_of(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def page_user(request: Request) -> Credential:
    """The signed-in account of a page request (browser session cookie only).

    Raises:
        SignInRequired: no valid session.
    """
    cookie = request.cookies.get(SESSION_COOKIE)
    accounts = desk_of(request).accounts
    user = accounts.credential(cookie, kind="session", idle=session_idle_timeout(request)) if cookie else None
    if user is None:
        raise SignInRequired(_path_of(request))
    request.state.user = user
    return user


def form_user(request: Request, csrf_token: Annotated[str, Form()] = "") -> Credential:
    """The signed-in account of a form post, whose CSRF token and origin are checked.

    Raises:
        SignInRequired: no valid session.
        CsrfRefused: a missing or wrong CSRF token, or another origin.
    """
    user = page_user(request)
    if not same_origin(request) or not csrf_ok(user.csrf, csrf_token):
        raise CsrfRefused()
    return user


def api_user(request: Request) -> Credential:
    """The account of an API request: a bearer token, or a browser session.

    Raises:
        HTTPException: 401 without valid credentials.
    """
    user = request_credential(request, desk_of(request).accounts)
    if user is None:
        raise HTTPException(
            status_code=401,
            detail="sign in (a session cookie) or send Authorization: Bearer <token> (citelock review token NAME)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    request.state.user = user
    return user


def api_writer(
    request: Request,
    x_csrf_token: Annotated[str | None, Header(alias="X-CSRF-Token", include_in_schema=False)] = None,
) -> Credential:
    """The account of a state-changing API request: a bearer token, or a session with its CSRF header.

    Raises:
        HTTPException: 401 without valid credentials; 403 for a session without its CSRF token or from
            another origin.
    """
    user = api_user(request)
    if user.kind == "session" and (not same_origin(request) or not csrf_ok(user.csrf, x_csrf_token)):
        raise HTTPException(
            status_code=403,
            detail="refused: a request made with a browser session must carry its X-CSRF-Token header "
            "and come from the desk's own origin",
        )
    return user
