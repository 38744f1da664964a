"""The gateway's response shapes: OpenAI's error envelope, the ``chat.completion`` of a guarded answer, its headers.

Every error the gateway returns is OpenAI's envelope, ``{"error": {"message", "type", "param", "code"}}``, so any
OpenAI SDK raises its own typed exception for it; a blocked answer's envelope also carries the ``citelock``
object (the :class:`~citelock.GuardedAnswer` record). :class:`GatewayError` is how a route says "answer with
this status and this envelope"; the app turns it, and every other exception, into one JSON response (never a
traceback).
"""

from __future__ import annotations

import json
import time
from typing import Any

from citelock.pipeline import GuardedAnswer

try:
    import orjson

    def dumps(value: Any) -> bytes:
        """``value`` as compact UTF-8 JSON (orjson when installed: the gateway extra brings it)."""
        return orjson.dumps(value)
except ImportError:  # pragma: no cover - orjson is in the gateway extra

    def dumps(value: Any) -> bytes:
        """``value`` as compact UTF-8 JSON (orjson when installed: the gateway extra brings it)."""
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


__all__ = [
    "BLOCKED_TYPE",
    "GatewayError",
    "answer_headers",
    "blocked_error",
    "completion_json",
    "dumps",
    "error_body",
    "failure",
    "guarded_record",
]

BLOCKED_TYPE = "citelock_blocked"
"""The error ``type`` of an answer the guard blocked (surface ``on_block="error"``)."""


class GatewayError(Exception):
    """An HTTP error response in OpenAI's envelope.

    Attributes:
        status: The HTTP status.
        message: What went wrong and what was expected.
        type: The envelope's ``type`` (``invalid_request_error``, ``authentication_error``, ...).
        code: The envelope's ``code`` (None when there is none).
        param: The request field at fault (None when none).
        headers: Extra response headers (``Retry-After``, ``x-citelock-*``).
        extra: Extra top-level fields of the body (the ``citelock`` object of a blocked answer).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        """The JSON body: the error envelope and any extra fields."""
        return {**error_body(self.message, self.type, self.code, self.param), **self.extra}


def error_body(message: str, type: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error envelope."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def guarded_record(guarded: GuardedAnswer) -> dict[str, Any]:
    """The ``citelock`` object of a response: the :class:`~citelock.GuardedAnswer` record as JSON."""
    record: dict[str, Any] = guarded.model_dump(mode="json")
    return record


def answer_headers(guarded: GuardedAnswer, surface: str) -> dict[str, str]:
    """The ``x-citelock-*`` headers of a guarded answer."""
    return {
        "x-citelock-decision": guarded.decision,
        "x-citelock-request-id": guarded.request_id,
        "x-citelock-surface": surface,
    }


def first_reason(guarded: GuardedAnswer) -> str:
    """The first failing finding's reason code (the error ``code`` of a blocked answer)."""
    for finding in guarded.findings:
        return str(finding.reason.value)
    return "BLOCKED"


def blocked_error(guarded: GuardedAnswer, surface: str) -> GatewayError:
    """The 400 of an answer the guard blocked on a surface whose ``on_block`` is ``error``."""
    reasons = sorted({f.reason.value for f in guarded.findings})
    return GatewayError(
        400,
        f"the answer was blocked on surface {surface!r}: its citations did not pass verification "
        f"({', '.join(reasons) or 'no reason recorded'}); the findings are in the 'citelock' object",
        type=BLOCKED_TYPE,
        code=first_reason(guarded),
        headers=answer_headers(guarded, surface),
        extra={"citelock": guarded_record(guarded)},
    )


def completion_json(
    guarded: GuardedAnswer,
    content: str,
    *,
    model: str,
    finish_reason: str,
    completion_id: str | None = None,
    usage: dict[str, Any] | None = None,
) -> bytes:
    """A ``chat.completion`` whose message content is ``content``, with the ``citelock`` object beside it, as JSON.

    The ``citelock`` object (the :class:`~citelock.GuardedAnswer` record) is serialized by pydantic-core in one
    pass, not dumped to Python values first.
    """
    head = dumps(_completion(guarded, content, model, finish_reason, completion_id, usage))
    return head[:-1] + b',"citelock":' + guarded.model_dump_json().encode() + b"}"


def _completion(
    guarded: GuardedAnswer,
    content: str,
    model: str,
    finish_reason: str,
    completion_id: str | None,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    stats = guarded.generation
    return {
        "id": completion_id or f"chatcmpl-{guarded.request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage
        or {
            "prompt_tokens": stats.prompt_tokens or 0,
            "completion_tokens": stats.completion_tokens or 0,
            "total_tokens": (stats.prompt_tokens or 0) + (stats.completion_tokens or 0),
        },
    }


def _retry_after(exc: BaseException) -> str | None:
    """The upstream's ``Retry-After`` header, from the SDK's exception the backend error carries as its cause."""
    response = getattr(exc.__cause__, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    return str(value) if value is not None else None


def failure(exc: BaseException, request_id: str | None = None) -> GatewayError:
    """The error response for an exception a request raised (fail closed: never an unguarded answer).

    Usage and input mistakes are 400; an upstream 429 is a 429 with its ``Retry-After``; an upstream that timed
    out is 504; one that cannot be reached, answers 5xx, or returns output that cannot be guarded is 502; a
    store that cannot be written is 503; anything else is a 500 that names no more than the request id (the
    traceback goes to the gateway's log, never to the caller).
    """
    from citelock.errors import (
        BackendError,
        BackendTimeoutError,
        CitelockError,
        ModelOutputError,
        RuntimeFailure,
        UsageError,
    )

    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, UsageError):
        return GatewayError(400, str(exc))
    if isinstance(exc, BackendTimeoutError):
        return GatewayError(
            504, f"the upstream server did not answer in time: {exc}", type="timeout", code="upstream_timeout"
        )
    if isinstance(exc, BackendError):
        if exc.status == 429:
            after = _retry_after(exc)
            return GatewayError(
                429,
                f"the upstream server is rate limiting: {exc}",
                type="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"retry-after": after} if after is not None else {},
            )
        return GatewayError(
            502,
            f"the upstream server failed, so no guarded answer can be given (fail closed): {exc}",
            type="upstream_error",
            code="upstream_failed",
        )
    if isinstance(exc, ModelOutputError):
        return GatewayError(
            502,
            f"the upstream's output could not be guarded, so none is served (fail closed): {exc}",
            type="upstream_error",
            code="unguardable_output",
        )
    if isinstance(exc, RuntimeFailure | CitelockError):
        return GatewayError(503, f"the gateway could not complete the request: {exc}", type="server_error")
    if isinstance(exc, TimeoutError):
        return GatewayError(
            504, "the request did not complete within the gateway's time limit", type="timeout", code="request_timeout"
        )
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, SQLAlchemyError):
        return GatewayError(
            503, f"the store could not be reached or written ({type(exc).__name__}); retry later", type="server_error"
        )
    where = f" (request {request_id})" if request_id else ""
    return GatewayError(
        500, f"internal error{where}: {type(exc).__name__}; the gateway's log has the details", type="server_error"
    )
