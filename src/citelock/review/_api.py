"""The desk's JSON API (``/api/v1``): the same reads and actions as the pages, for scripts and other tools.

Authenticate with ``Authorization: Bearer <token>`` (``citelock review token NAME``) or, from a page, with the
session cookie plus its ``X-CSRF-Token`` header. Errors are ``{"detail": "..."}`` with 400 (bad input),
401 (not signed in), 403 (not permitted, or CSRF), 404 (no such entry) and 409 (someone else recorded an
outcome first: nothing was recorded). The OpenAPI description is at ``/api/openapi.json`` (signed in).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse, StreamingResponse

from citelock.metrics._false_pass import statuses_json
from citelock.reasons import REASONS, ReasonCode
from citelock.review._export import fix_list_csv, fix_list_jsonl, labels_jsonl
from citelock.review._views import ChunkView, PromptState
from citelock.review._web import api_user, api_writer, desk_of
from citelock.store import Credential, QueueEntry, QueueFilter, QueueRow, ReasonCount, Resolution
from citelock.store._queue import EscalationCategory, Outcome

__all__ = ["EntryOut", "OutcomeIn", "QueueOut", "ReasonOut", "UserOut", "router"]

router = APIRouter(prefix="/api/v1", tags=["review"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "not signed in"},
    400: {"description": "bad input (the detail says what was expected)"},
}


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class UserOut(_Out):
    """The signed-in account."""

    username: str
    role: str
    kind: str


class ReasonOut(_Out):
    """One reason code: what it means and what to do."""

    code: ReasonCode
    layer: str | None
    family: str
    description: str
    judged: bool
    fix: str


class QueueOut(_Out):
    """A page of the queue under a filter, with the counts per reason."""

    counts: list[ReasonCount]
    rows: list[QueueRow]
    next_after: str | None = Field(description="pass as `after` for the next page")
    prev_before: str | None = Field(description="pass as `before` for the previous page")


class EntryOut(_Out):
    """One entry with its history, the meaning of its reason, and its chunks as sent."""

    entry: QueueEntry
    history: list[Resolution]
    reason: ReasonOut
    prompt_state: PromptState
    prompt_problem: str
    cited: ChunkView | None
    related: ChunkView | None


class OutcomeIn(BaseModel):
    """An outcome to record as the authenticated account.

    ``revision`` is the revision you saw: leave it out (or null) for an open entry's first outcome; give the
    current outcome's revision to re-review it. Someone else's outcome recorded meanwhile answers 409.
    """

    model_config = ConfigDict(extra="forbid")

    outcome: Outcome
    note: str | None = None
    category: EscalationCategory | None = None
    chunk_id: str | None = None
    revision: int | None = Field(default=None, ge=0)


def _reason(code: ReasonCode) -> ReasonOut:
    info = REASONS[code]
    return ReasonOut(
        code=code,
        layer=None if info.layer is None else info.layer.value,
        family=info.family,
        description=info.description,
        judged=info.judged,
        fix=info.fix,
    )


def _filter(
    reason: Annotated[str | None, Query(description="a reason code")] = None,
    surface: Annotated[str | None, Query()] = None,
    week: Annotated[str | None, Query(description="ISO week, e.g. 2025-W07")] = None,
    status: Annotated[str | None, Query(description="open (default), resolved, accept, repair, escalate, all")] = None,
    reviewer: Annotated[str | None, Query()] = None,
) -> QueueFilter:
    return QueueFilter.parse(reason=reason, surface=surface, week=week, status=status, reviewer=reviewer)


@router.get("/me", responses=_ERRORS)
def me(user: Annotated[Credential, Depends(api_user)]) -> UserOut:
    """The authenticated account."""
    return UserOut(username=user.username, role=user.role, kind=user.kind)


@router.get("/reasons", responses=_ERRORS)
def reasons(user: Annotated[Credential, Depends(api_user)]) -> list[ReasonOut]:
    """Every reason code with its meaning and typical fix."""
    return [_reason(code) for code in REASONS]


@router.get("/queue", responses=_ERRORS)
def queue(
    request: Request,
    user: Annotated[Credential, Depends(api_user)],
    where: Annotated[QueueFilter, Depends(_filter)],
    after: str | None = None,
    before: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> QueueOut:
    """A page of entries in the queue's order (reason, age, id), by keyset, and the counts per reason."""
    desk = desk_of(request)
    page = desk.browser.page(where, after=after, before=before, limit=limit)
    return QueueOut(
        counts=desk.browser.counts(where),
        rows=list(page.rows),
        next_after=page.next_after,
        prev_before=page.prev_before,
    )


@router.get("/entries/{entry_id}", responses={**_ERRORS, 404: {"description": "no such entry"}})
def entry(request: Request, entry_id: str, user: Annotated[Credential, Depends(api_user)]) -> EntryOut:
    """One entry: the finding, its outcome history, and the cited chunk as sent with the verified span offsets."""
    view = desk_of(request).entry(entry_id)
    return EntryOut(
        entry=view.entry,
        history=list(view.history),
        reason=_reason(view.entry.reason),
        prompt_state=view.prompt_state,
        prompt_problem=view.prompt_problem,
        cited=view.cited,
        related=view.related,
    )


@router.post(
    "/entries/{entry_id}/outcome",
    status_code=201,
    responses={
        **_ERRORS,
        403: {"description": "not permitted (a reviewer re-reviewing another's outcome), or CSRF refused"},
        404: {"description": "no such entry"},
        409: {"description": "someone else recorded an outcome first; nothing was recorded"},
    },
)
def record_outcome(
    request: Request, entry_id: str, body: OutcomeIn, user: Annotated[Credential, Depends(api_writer)]
) -> Resolution:
    """Record accept / repair / escalate for an entry as the authenticated account (who and when are stored)."""
    return desk_of(request).record_outcome(
        entry_id,
        user,
        body.outcome,
        note=body.note,
        category=body.category,
        chunk_id=body.chunk_id,
        revision=body.revision,
    )


@router.get("/metrics", responses=_ERRORS)
def metrics(
    request: Request, user: Annotated[Credential, Depends(api_user)], surface: str | None = None
) -> JSONResponse:
    """Every metric of every scope with its definition: what ``citelock metrics --json`` prints."""
    desk = desk_of(request)
    report, _ = desk.metrics(surface=surface or None)
    statuses, _ = desk.judge_status(surface=surface or None)
    return JSONResponse({**report.to_json(), "judge": statuses_json(statuses)})


def _stream(lines: Iterator[str], media_type: str, filename: str) -> StreamingResponse:
    return StreamingResponse(
        (line.encode("utf-8") for line in lines),
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _reviewed(
    request: Request,
    user: Annotated[Credential, Depends(api_user)],
    where: Annotated[QueueFilter, Depends(_filter)],
) -> Iterator[tuple[QueueEntry, Resolution]]:
    """The reviewed entries under the request's filter, for a signed-in account (streamed when iterated)."""
    return desk_of(request).browser.reviewed(where)


Reviewed = Annotated[Iterator[tuple[QueueEntry, Resolution]], Depends(_reviewed)]


@router.get("/export/fixes.csv", responses=_ERRORS, response_class=StreamingResponse)
def export_fixes_csv(items: Reviewed) -> StreamingResponse:
    """The fix list: one row per reviewed entry and its current outcome (CSV, streamed)."""
    return _stream(fix_list_csv(items), "text/csv; charset=utf-8", "citelock-fixes.csv")


@router.get("/export/fixes.jsonl", responses=_ERRORS, response_class=StreamingResponse)
def export_fixes_jsonl(items: Reviewed) -> StreamingResponse:
    """The fix list as JSON lines (streamed)."""
    return _stream(fix_list_jsonl(items), "application/x-ndjson", "citelock-fixes.jsonl")


@router.get("/export/labels.jsonl", responses=_ERRORS, response_class=StreamingResponse)
def export_labels(request: Request, user: Annotated[Credential, Depends(api_user)]) -> StreamingResponse:
    """Hand labels from accepted support findings, for ``citelock calibrate --format labels``."""
    samples = desk_of(request).queue.calibration_samples()
    return _stream(labels_jsonl(samples), "application/x-ndjson", "citelock-labels.jsonl")
