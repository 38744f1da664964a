"""Typed backend errors: what failed, at which provider, with which status and request id, and whether to retry.

Every error a remote backend raises is a :class:`BackendError` (a :class:`citelock.RuntimeFailure`), so callers
can tell "the server broke" from "fix your call" and decide on a retry from :attr:`BackendError.retryable`
instead of parsing messages.
"""

from __future__ import annotations

__all__ = [
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendRefusalError",
    "BackendTimeoutError",
    "SchemaRejectedError",
    "TruncatedOutputError",
    "retryable_status",
]

from citelock.errors import RuntimeFailure

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def retryable_status(status: int | None) -> bool:
    """Whether an HTTP status is worth retrying (timeouts, conflicts, rate limits, server errors)."""
    return status in _RETRYABLE_STATUS


class BackendError(RuntimeFailure):
    """A backend call failed.

    Attributes:
        provider: Which backend or server kind failed (``openai``, ``llama-cpp-python``, ``instructor``...).
        status: The HTTP status, when there was a response.
        request_id: The provider's request id (``x-request-id`` header or completion id), when known.
        citelock_request_id: The id of the logged prompt this call was for, when known.
        retryable: True when sending the same request again may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        request_id: str | None = None,
        citelock_request_id: str | None = None,
        retryable: bool = False,
    ) -> None:
        self.provider = provider
        self.status = status
        self.request_id = request_id
        self.citelock_request_id = citelock_request_id
        self.retryable = retryable
        where = [f"provider={provider}"]
        if status is not None:
            where.append(f"status={status}")
        if request_id:
            where.append(f"request_id={request_id}")
        if citelock_request_id:
            where.append(f"prompt={citelock_request_id}")
        where.append("retryable" if retryable else "not retryable")
        super().__init__(f"{message} ({', '.join(where)})")


class BackendTimeoutError(BackendError):
    """The call did not complete in time (retryable)."""


class BackendConnectionError(BackendError):
    """The server could not be reached (retryable: it may be starting or restarting)."""


class BackendHTTPError(BackendError):
    """The server answered with an error status; :attr:`retryable` follows the status."""


class SchemaRejectedError(BackendHTTPError):
    """The server refused the constraint itself (unsupported ``response_format``, schema too large).

    Not retryable as is: send the schema another way (a different delivery in the server's profile) or a
    weaker span policy.
    """


class BackendRefusalError(BackendError):
    """The model refused to answer (OpenAI ``message.refusal``); :attr:`refusal` holds its text."""

    def __init__(
        self,
        message: str,
        *,
        refusal: str,
        provider: str,
        status: int | None = None,
        request_id: str | None = None,
        citelock_request_id: str | None = None,
        retryable: bool = False,
    ) -> None:
        self.refusal = refusal
        super().__init__(
            message,
            provider=provider,
            status=status,
            request_id=request_id,
            citelock_request_id=citelock_request_id,
            retryable=retryable,
        )


class TruncatedOutputError(BackendError):
    """The output stopped at ``max_tokens`` before the JSON was complete.

    Not retryable as is (the same budget truncates again); :attr:`partial` holds what arrived and
    :attr:`max_tokens` the budget it hit.
    """

    def __init__(
        self,
        message: str,
        *,
        partial: str,
        max_tokens: int,
        provider: str,
        status: int | None = None,
        request_id: str | None = None,
        citelock_request_id: str | None = None,
        retryable: bool = False,
    ) -> None:
        self.partial = partial
        self.max_tokens = max_tokens
        super().__init__(
            message,
            provider=provider,
            status=status,
            request_id=request_id,
            citelock_request_id=citelock_request_id,
            retryable=retryable,
        )
