"""The desk's pages: sign-in, the queue, an entry (and its actions), the logged prompt, metrics and exports.

Server-rendered HTML that works without JavaScript; the one script (``review.js``) adds the keyboard
shortcuts. Every form posts the session's CSRF token; every outcome is recorded under the signed-in account.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Query, Request
from starlette.background import BackgroundTask
from starlette.responses import RedirectResponse, Response

from citelock.errors import AlreadyResolvedError, InputError, NotPermittedError, StoreIntegrityError
from citelock.reasons import REASONS
from citelock.records import ReasonCode
from citelock.review._charts import bars_chart, live_rate_chart, rates_chart, scope_groups
from citelock.review._passwords import authenticate
from citelock.review._purge import SessionPurge
from citelock.review._security import LOGIN_COOKIE, SESSION_COOKIE, csrf_ok, new_login_token, safe_next, same_origin
from citelock.review._throttle import SignInThrottle
from citelock.review._web import desk_of, form_user, page_user, render
from citelock.store import Credential, QueueFilter, QueueRow

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50

FilterQuery = Annotated[str | None, Query()]


def _filter(
    reason: FilterQuery = None,
    surface: FilterQuery = None,
    week: FilterQuery = None,
    status: FilterQuery = None,
    reviewer: FilterQuery = None,
) -> QueueFilter:
    return QueueFilter.parse(reason=reason, surface=surface, week=week, status=status, reviewer=reviewer)


def _cookie(response: Response, request: Request, name: str, value: str, *, max_age: int | None) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.app.state.secure_cookies or request.url.scheme == "https",
    )


# --- signing in and out ---------------------------------------------------------------------------------------


@router.get("/login")
def login_page(request: Request, next: str = "/") -> Response:
    """The sign-in form (the only page a signed-out visitor gets)."""
    token = request.cookies.get(LOGIN_COOKIE) or new_login_token()
    response = render(request, "login.html", {"next": safe_next(next), "login_token": token, "error": None})
    _cookie(response, request, LOGIN_COOKIE, token, max_age=3600)
    return response


@router.post("/login")
def login(
    request: Request,
    username: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    login_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    """Check the name and password; on success start a session and go where the visitor was headed."""
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    if not same_origin(request) or not csrf_ok(cookie, login_token):
        return render(
            request,
            "error.html",
            {
                "status": 403,
                "title": "Sign-in refused",
                "message": "the sign-in form expired or came from another site: open the sign-in page again",
            },
            status_code=403,
        )
    desk = desk_of(request)
    throttle: SignInThrottle = request.app.state.sign_in_throttle
    address = request.client.host if request.client is not None else None
    wait = throttle.retry_after(username, address)
    if wait is not None:  # refused before the password is checked: a throttled guess teaches nothing
        response = render(
            request,
            "login.html",
            {
                "next": safe_next(next),
                "login_token": cookie,
                "error": f"too many failed sign-ins: try again in {wait} seconds",
            },
            status_code=429,
        )
        response.headers["Retry-After"] = str(wait)
        return response
    account = authenticate(desk.accounts, username, password)
    if account is None:
        throttle.failed(username, address)
        response = render(
            request,
            "login.html",
            {"next": safe_next(next), "login_token": cookie, "error": "wrong name or password"},
            status_code=401,
        )
        return response
    throttle.succeeded(username)
    lifetime: timedelta = request.app.state.session_lifetime
    token = desk.accounts.open(account.username, kind="session", lifetime=lifetime)
    response = RedirectResponse(safe_next(next), status_code=303)
    _cookie(response, request, SESSION_COOKIE, token, max_age=int(lifetime.total_seconds()))
    response.delete_cookie(LOGIN_COOKIE, path="/")
    purge: SessionPurge | None = request.app.state.purge_sessions
    if purge is not None:  # runs after the response is sent, at most once per purge interval
        response.background = BackgroundTask(purge)
    return response


@router.post("/logout")
def logout(request: Request, user: Annotated[Credential, Depends(form_user)]) -> Response:
    """End the session (server-side) and forget the cookie."""
    desk_of(request).accounts.close(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


# --- the queue ------------------------------------------------------------------------------------------------


def _groups(rows: tuple[QueueRow, ...]) -> list[tuple[Any, list[QueueRow]]]:
    groups: list[tuple[Any, list[QueueRow]]] = []
    for row in rows:
        if not groups or groups[-1][0] != row.entry.reason:
            groups.append((row.entry.reason, []))
        groups[-1][1].append(row)
    return groups


@router.get("/")
def queue_page(
    request: Request,
    user: Annotated[Credential, Depends(page_user)],
    where: Annotated[QueueFilter, Depends(_filter)],
    after: FilterQuery = None,
    before: FilterQuery = None,
    done: FilterQuery = None,
) -> Response:
    """Entries grouped by reason code, with counts and ages, filters and keyset pagination."""
    desk = desk_of(request)
    counts = desk.browser.counts(where)
    page = desk.browser.page(where, after=after or None, before=before or None, limit=PAGE_SIZE)
    shown = [c for c in counts if where.reason is None or c.reason == where.reason]
    context = {
        "where": where,
        "params": where.query(),
        "counts": counts,
        "total": sum(c.count for c in shown),
        "page": page,
        "groups": _groups(page.rows),
        "facets": desk.facets(),
        "reasons": REASONS,
        "done": _done(request, done),
    }
    return render(request, "queue.html", context)


def _done(request: Request, entry_id: str | None) -> Any:
    """The outcome just recorded (for the confirmation line), or None."""
    if not entry_id:
        return None
    try:
        return desk_of(request).queue.resolution(entry_id)
    except (KeyError, InputError):
        return None


# --- one entry ------------------------------------------------------------------------------------------------


def _entry_response(
    request: Request,
    entry_id: str,
    where: QueueFilter,
    *,
    status_code: int = 200,
    error: str | None = None,
    form: dict[str, str] | None = None,
    done: str | None = None,
) -> Response:
    desk = desk_of(request)
    try:
        view = desk.entry(entry_id)
    except KeyError:
        return _error(request, 404, "No such entry", f"no queue entry has the id {entry_id!r}")
    previous, following = desk.browser.neighbours(view.entry.id, where)
    context = {
        "view": view,
        "entry": view.entry,
        "where": where,
        "params": where.query(),
        "previous": previous,
        "following": following,
        "error": error,
        "form": form or {},
        "done": _done(request, done),
    }
    return render(request, "entry.html", context, status_code=status_code)


@router.get("/entries/{entry_id}")
def entry_page(
    request: Request,
    entry_id: str,
    user: Annotated[Credential, Depends(page_user)],
    where: Annotated[QueueFilter, Depends(_filter)],
    done: FilterQuery = None,
) -> Response:
    """The claim, the cited chunk as sent with the span highlighted, every verdict, the answer, the actions."""
    return _entry_response(request, entry_id, where, done=done)


@router.post("/entries/{entry_id}/outcome")
def record_outcome(
    request: Request,
    entry_id: str,
    user: Annotated[Credential, Depends(form_user)],
    outcome: Annotated[str, Form()] = "",
    note: Annotated[str, Form()] = "",
    category: Annotated[str, Form()] = "",
    chunk_id: Annotated[str, Form()] = "",
    revision: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
    surface: Annotated[str, Form()] = "",
    week: Annotated[str, Form()] = "",
    status: Annotated[str, Form()] = "",
    reviewer: Annotated[str, Form()] = "",
) -> Response:
    """Record accept / repair / escalate (accept / reject on an audit sample) as the signed-in account; then on."""
    desk = desk_of(request)
    where = QueueFilter.parse(reason=reason, surface=surface, week=week, status=status, reviewer=reviewer)
    form = {"outcome": outcome, "note": note, "category": category, "chunk_id": chunk_id}
    try:
        seen = int(revision) if revision.strip() else None
        resolution = desk.record_outcome(
            entry_id,
            user,
            outcome,  # type: ignore[arg-type]  # checked by the queue
            note=note,
            category=category or None,  # type: ignore[arg-type]
            chunk_id=chunk_id,
            revision=seen,
        )
    except ValueError as exc:
        status_code = 409 if isinstance(exc, AlreadyResolvedError) else 400
        message = str(exc) if isinstance(exc, InputError) else f"revision must be a number, got {revision!r}"
        return _entry_response(request, entry_id, where, status_code=status_code, error=message, form=form)
    except NotPermittedError as exc:
        return _entry_response(request, entry_id, where, status_code=403, error=str(exc), form=form)
    except KeyError:
        return _error(request, 404, "No such entry", f"no queue entry has the id {entry_id!r}")
    _, following = desk.browser.neighbours(resolution.entry_id, where)
    params = {**where.query(), "done": resolution.entry_id}
    target = f"/entries/{following}" if following else "/"
    return RedirectResponse(f"{target}?{urlencode(params)}", status_code=303)


# --- the logged prompt ----------------------------------------------------------------------------------------


@router.get("/prompts/{request_id}")
def prompt_page(
    request: Request,
    request_id: str,
    user: Annotated[Credential, Depends(page_user)],
    entry: FilterQuery = None,
) -> Response:
    """The whole logged prompt as sent: every message, chunk bodies delimited, the entry's span marked."""
    desk = desk_of(request)
    try:
        view = desk.prompt(request_id, entry_id=entry or None)
    except KeyError:
        return _error(request, 404, "Not in the prompt log", f"request {request_id!r} is not in the prompt log")
    except StoreIntegrityError as exc:
        return _error(request, 409, "The logged prompt fails its integrity check", str(exc))
    except InputError as exc:
        return _error(request, 400, "Bad request", str(exc))
    return render(request, "prompt.html", {"view": view, "entry_id": entry or ""})


# --- metrics and exports --------------------------------------------------------------------------------------


@router.get("/metrics")
def metrics_page(
    request: Request,
    user: Annotated[Credential, Depends(page_user)],
    surface: FilterQuery = None,
) -> Response:
    """What ``citelock metrics`` computes, per surface and per week, as charts and tables."""
    desk = desk_of(request)
    report, computed = desk.metrics(surface=surface or None)
    statuses, _ = desk.judge_status(surface=surface or None)
    by_surface, by_week = scope_groups(report)
    volume = [(v.key or "", int(v.numerator)) for v in report.scope() if v.name == "queue_volume"]
    outcomes = desk.browser.outcome_counts(QueueFilter(surface=surface or None, status="all"))
    context = {
        "report": report,
        "surface": surface or "",
        "surfaces": desk.facets().surfaces,
        "computed": computed,
        "charts": [
            rates_chart(report, by_surface, "Headline rates by surface"),
            rates_chart(report, by_week, "Headline rates by ISO week (all surfaces, last 12 weeks)"),
            bars_chart(volume, "Review queue volume by reason"),
            bars_chart(sorted(outcomes.items()), "Review outcomes", css="bar-outcome"),
        ],
        "statuses": statuses,
        # a chart only for surfaces with an audit plan (the others have no estimate to draw)
        "judge_charts": [live_rate_chart(s) for s in statuses if any(r.status != "no_audit" for r in s.window)],
        "by_surface": by_surface,
        "by_week": by_week,
    }
    return render(request, "metrics.html", context)


@router.get("/audit")
def audit_page(
    request: Request,
    user: Annotated[Credential, Depends(page_user)],
    surface: FilterQuery = None,
) -> Response:
    """Audit samples of judged citations, open first: a reviewer's accept (supported) or reject is the label."""
    desk = desk_of(request)
    items = desk.queue.items(reason=ReasonCode.AUDIT_SAMPLE, surface=surface or None)
    open_items = [e for e, r in items if r is None]
    labeled = [(e, r) for e, r in items if r is not None]  # newest label first
    tally: dict[tuple[str, str], list[int]] = {}
    for entry, resolution in items:
        stratum = entry.audit.stratum if entry.audit is not None else "?"
        row = tally.setdefault((entry.surface, stratum), [0, 0, 0])
        row[0] += 1
        if resolution is not None:
            row[1 if resolution.outcome == "accept" else 2] += 1
    statuses, computed = desk.judge_status(surface=surface or None)
    context = {
        "surface": surface or "",
        "surfaces": desk.facets().surfaces,
        "open_items": open_items[:PAGE_SIZE],
        "open_count": len(open_items),
        "labeled": sorted(labeled, key=lambda er: er[1].resolved_at, reverse=True)[:PAGE_SIZE],
        "tally": sorted(tally.items()),
        "statuses": statuses,
        "computed": computed,
    }
    return render(request, "audit.html", context)


@router.get("/export")
def export_page(
    request: Request,
    user: Annotated[Credential, Depends(page_user)],
    where: Annotated[QueueFilter, Depends(_filter)],
) -> Response:
    """Links to the fix list (CSV, JSON lines) and the hand labels, under the queue's filters."""
    desk = desk_of(request)
    reviewed = where.model_copy(update={"status": "resolved" if where.status in ("open", "all") else where.status})
    context = {
        "where": reviewed,
        "params": reviewed.query(),
        "reviewed": sum(c.count for c in desk.browser.counts(reviewed)),
        "samples": len(desk.queue.calibration_samples()),
        "facets": desk.facets(),
    }
    return render(request, "export.html", context)


def _error(request: Request, status: int, title: str, message: str) -> Response:
    return render(request, "error.html", {"status": status, "title": title, "message": message}, status_code=status)
