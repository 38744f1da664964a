"""Every exception citelock raises, in one tree.

One root, :class:`CitelockError`, and two branches, so a caller can tell "fix your call" from "retry, or page
someone" by type, never by message::

    CitelockError
    ├── UsageError                    fix the call; retrying the same call fails again
    │   ├── InputError (ValueError)   malformed input data: what was expected, what arrived, where
    │   │   ├── ParseError            an answer given to citelock cannot be parsed (.where)
    │   │   └── AlreadyResolvedError  a queue entry has an outcome: a change is a named re-review
    │   ├── BudgetExceededError       the context does not fit max_chars and dropping was not allowed
    │   ├── NotPermittedError         the review-desk account's role does not allow the action
    │   └── MissingExtraError (ImportError)  an optional dependency is missing (.extra, .module)
    └── RuntimeFailure                something failed while running: the model, the server, the store
        ├── ModelOutputError          the model's output is unusable
        │   ├── UnparsedAnswerError   an answer cannot be parsed (.record, .generation)
        │   ├── ConstraintViolationError  a constraining backend produced output outside the schema
    │   ├── OutputBoundsError     output beyond the schema's bounds (claims, characters), from any backend
        │   └── JudgeOutputError      a judge answered other than one allowed word (.raw, .choices)
        ├── StoreIntegrityError       a stored record no longer matches its hash, or an append-only rule
        └── BackendError              a backend or server call failed (.provider .status .request_id
            │                         .citelock_request_id .retryable)
            ├── BackendTimeoutError
            ├── BackendConnectionError
            ├── ServerStartError      a managed server did not come up (message has its log tail)
            ├── BackendHTTPError
            │   └── SchemaRejectedError   the server refused the schema or grammar
            ├── BackendRefusalError   the model refused (.refusal)
            └── TruncatedOutputError  generation hit max_tokens mid-answer (.partial, .max_tokens)

Findings about an answer are never exceptions: they are values in a :class:`~citelock.GuardReport`.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

if TYPE_CHECKING:
    from citelock.records import Generation, PromptRecord

__all__ = [
    "AlreadyResolvedError",
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendRefusalError",
    "BackendTimeoutError",
    "BudgetExceededError",
    "CitelockError",
    "ConstraintViolationError",
    "InputError",
    "JudgeOutputError",
    "MissingExtraError",
    "ModelOutputError",
    "NotPermittedError",
    "OutputBoundsError",
    "ParseError",
    "RuntimeFailure",
    "SchemaRejectedError",
    "ServerStartError",
    "StoreIntegrityError",
    "TruncatedOutputError",
    "UnparsedAnswerError",
    "UsageError",
    "json_kind",
    "json_refusal",
]


class CitelockError(Exception):
    """Root of every error citelock raises.

    Every citelock error pickles with its message and attributes (a worker process or a Ray task can raise one
    and its driver re-raise it), whatever arguments its class's ``__init__`` requires.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[CitelockError], args: tuple[Any, ...], state: dict[str, Any]) -> CitelockError:
    """An unpickled citelock error: its message and attributes as they were, ``__init__`` not called again."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class UsageError(CitelockError):
    """The caller asked for something citelock cannot do as asked (fix the call, do not retry)."""


class InputError(UsageError, ValueError):
    """Input data is malformed: the message says what was expected, what arrived and where."""


class ParseError(InputError):
    """An answer could not be parsed; ``where`` points at the offending position or field."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{message} (at {where})" if where else message)


class BudgetExceededError(UsageError):
    """The assembled context does not fit the budget and the caller did not allow dropping chunks."""


class NotPermittedError(UsageError):
    """The review-desk account's role does not allow the action (a reviewer re-reviewing another's outcome)."""


class MissingExtraError(UsageError, ImportError):
    """An optional dependency is missing; the message names the exact ``pip install`` to run."""

    def __init__(self, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(f'this feature needs the optional dependency {module!r}: pip install "citelock[{extra}]"')


class RuntimeFailure(CitelockError):
    """Something failed at run time (backend, store, model); retrying may or may not help."""


class StoreIntegrityError(RuntimeFailure):
    """A stored record no longer matches its hash, or the store refused an append-only violation."""


class ModelOutputError(RuntimeFailure):
    """The model's output is unusable (the model, not the caller, is at fault)."""


class ConstraintViolationError(ModelOutputError):
    """A backend claimed to constrain decoding but its output broke the constraint."""


class OutputBoundsError(ModelOutputError):
    """A backend's output went beyond the request schema's bounds (more claims, or more characters, than it allows).

    Raised whatever the backend (one that ignored the constraint included): the output is cut there, so an
    unbounded answer costs no more than the schema's largest one.

    Attributes:
        bound: Which bound: ``claims`` or ``chars``.
        limit: The bound's value.
        got: What arrived when the output was cut (at least ``limit + 1``).
    """

    def __init__(self, message: str, *, bound: str, limit: int, got: int) -> None:
        self.bound = bound
        self.limit = limit
        self.got = got
        super().__init__(message)


class UnparsedAnswerError(ModelOutputError):
    """A backend's output could not be parsed as an answer (the naive baseline's "parse failure").

    Also the output of a call that declared a citation constraint and got back something that is not the schema's
    JSON (prose, ``{"text": ...}``): such output is parsed under its schema or not at all, never as free text.

    Attributes:
        record: The logged prompt the output was generated for.
        generation: The backend's raw output and accounting.
        where: The offending position or field, when the parser named one.
    """

    def __init__(self, message: str, *, record: PromptRecord, generation: Generation, where: str | None = None) -> None:
        self.record = record
        self.generation = generation
        self.where = where
        super().__init__(f"request {record.request_id}: {message}; raw output {generation.text[:200]!r}")


class JudgeOutputError(ModelOutputError):
    """The judge model answered something other than exactly one of the allowed words."""

    def __init__(self, raw: str, choices: tuple[str, ...]) -> None:
        self.raw = raw
        self.choices = choices
        super().__init__(f"judge output should be exactly one of {', '.join(choices)}; got {raw!r}")


class AlreadyResolvedError(InputError):
    """The review-queue entry already has an outcome (or a newer one than the reviewer saw).

    Outcomes are never overwritten: a change is a re-review, a new event by a named reviewer.
    """


_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def retryable_status(status: int | None) -> bool:
    """Whether an HTTP status is worth retrying (timeouts, conflicts, rate limits, server errors)."""
    return status in _RETRYABLE_STATUS


class _Where(TypedDict, total=False):
    """Where a backend call failed: the keyword arguments every :class:`BackendError` takes."""

    provider: Required[str]
    status: int | None
    request_id: str | None
    citelock_request_id: str | None
    retryable: bool


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


class ServerStartError(BackendError):
    """The managed server did not come up (it exited, or did not answer in time); the message has its log tail."""


class BackendHTTPError(BackendError):
    """The server answered with an error status; :attr:`retryable` follows the status."""


class SchemaRejectedError(BackendHTTPError):
    """The server refused the constraint itself (unsupported ``response_format``, schema too large).

    Not retryable as is: send the schema another way (a different delivery in the server's profile) or a
    weaker span policy.
    """


class BackendRefusalError(BackendError):
    """The model refused to answer (OpenAI ``message.refusal``); :attr:`refusal` holds its text."""

    def __init__(self, message: str, *, refusal: str, **where: Unpack[_Where]) -> None:
        self.refusal = refusal
        super().__init__(message, **where)


class TruncatedOutputError(BackendError):
    """The output stopped at ``max_tokens`` before the JSON was complete.

    Not retryable as is (the same budget truncates again); :attr:`partial` holds what arrived and
    :attr:`max_tokens` the budget it hit.
    """

    def __init__(self, message: str, *, partial: str, max_tokens: int, **where: Unpack[_Where]) -> None:
        self.partial = partial
        self.max_tokens = max_tokens
        super().__init__(message, **where)


def json_kind(value: object) -> str:
    """The JSON kind of a parsed value, for error messages.

    Returns ``an object``, ``an array``, ``a string``, ``a number``, ``a boolean`` or ``null`` (a Python type
    name for anything else).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Digits(str):
    """An integer literal too long for ``int()`` under the interpreter's digit limit (kept as its digits)."""


def json_refusal(exc: ValueError, text: str) -> str:
    """Why ``json.loads(text)`` refused ``text`` with ``exc``, naming where: for an error message.

    The decoder's own errors (``JSONDecodeError``) give their line and column. An integer literal longer than
    the interpreter's limit (``sys.get_int_max_str_digits()``, 4,300 digits by default) is refused with a
    plain ``ValueError`` that names no place; the text is parsed again keeping such literals as text, and the
    JSON path of the first one is named (``$.claims[0].n``).
    """
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    limit = sys.get_int_max_str_digits()

    def keep_long(digits: str) -> int | _Digits:
        return _Digits(digits) if limit and len(digits.lstrip("-")) > limit else int(digits)

    try:
        value = json.loads(text, parse_int=keep_long)
    except (ValueError, RecursionError):
        return f"not valid JSON: {exc}"
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _Digits):
            return (
                f"{where}: an integer of {len(item.lstrip('-'))} digits; the limit is {limit} digits "
                "(a JSON number this long is not a usable value)"
            )
        if isinstance(item, dict):
            pairs = [(sub, f"{where}.{key}" if len(where) < 200 else where) for key, sub in item.items()]
            stack.extend(reversed(pairs))  # popped in document order: the first long literal is named
        elif isinstance(item, list):
            items = [(sub, f"{where}[{i}]" if len(where) < 200 else where) for i, sub in enumerate(item)]
            stack.extend(reversed(items))
    return f"not valid JSON: {exc}"
