"""One OpenAI-compatible chat-completions transport, shared by the backends and the judges.

An :class:`OpenAITransport` holds what every caller of an OpenAI-compatible server needs and nothing else: the
``openai`` client (built from a base URL, or the caller's own ``openai.OpenAI`` / ``openai.AsyncOpenAI``), the
server's :class:`~citelock.runtime._profiles.ServerProfile`, the model name (asked of the server once when not
given) and the server's label (:attr:`OpenAITransport.provider`). It builds the fields every request shares,
sends a request, maps every ``openai`` SDK failure to a typed :class:`~citelock.errors.BackendError`
(:func:`map_openai_error`), and reads the output back out of a response (:func:`output_text`: the message content
or the forced tool call's arguments). What is sent beyond that
(a citation schema, a verdict schema, instructor's response model) is the caller's business.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Self

from citelock._steps import Step, arun_steps, run_steps
from citelock.errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendRefusalError,
    BackendTimeoutError,
    InputError,
    MissingExtraError,
    SchemaRejectedError,
    UsageError,
    retryable_status,
)
from citelock.runtime._profiles import UNNAMED_KIND, Output, ServerProfile, get_profile, said_kind

__all__ = [
    "CREATE_FIELDS",
    "OpenAITransport",
    "TransportUser",
    "map_openai_error",
    "output_text",
    "response_request_id",
]

_SCHEMA_WORDS = ("response_format", "json_schema", "schema", "tool", "grammar", "strict")
_OPENAI_URL = "https://api.openai.com/v1"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASYNC_ONLY = (
    "this holds an openai.AsyncOpenAI client, which only async code can use: call it from async code "
    "(citelock.aanswer), or pass an openai.OpenAI client"
)
CREATE_FIELDS = frozenset(
    {
        "messages",
        "model",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "seed",
        "response_format",
        "tools",
        "tool_choice",
        "top_p",
        "stop",
    }
)
"""The ``chat.completions.create`` keywords citelock sends as keywords; any other field travels in ``extra_body``."""


class OpenAITransport:
    """An OpenAI-compatible chat-completions endpoint: client, server profile and model, with typed failures.

    Build one with :meth:`connect` (from a base URL) or :meth:`from_client` (the caller's own client).

    Attributes:
        client: The ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client every request goes through.
        profile: The server's profile: how a schema travels, which keywords it takes, its limits.
        assumed: No server kind was configured: ``profile`` is the default for a server that is not OpenAI's
            (``llama-cpp-python``), an assumption about how it takes a constraint, not what it is.
        is_async: The client is an ``openai.AsyncOpenAI``: use :meth:`acomplete`.
    """

    def __init__(self, client: Any, profile: ServerProfile, *, model: str | None = None, assumed: bool = False) -> None:
        self.client = client
        self.profile = profile
        self.assumed = assumed
        self.is_async = _is_async_client(client)
        self._model = model
        self._said: str | None = None

    @classmethod
    def connect(
        cls,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        server: str | ServerProfile | None = None,
        timeout: float = 120.0,
        max_retries: int = 0,
    ) -> OpenAITransport:
        """A transport over a new ``openai.OpenAI`` client for ``base_url`` (OpenAI's own when None).

        Args:
            base_url: The server's base URL (``.../v1``); OpenAI's when None.
            api_key: API key; ``$OPENAI_API_KEY``, or a placeholder for a local ``base_url``.
            model: Model name; the server's first listed model when None.
            server: A server kind or :class:`ServerProfile`; ``openai`` without ``base_url``, else
                ``llama-cpp-python`` (:attr:`assumed`).
            timeout: Seconds before a request times out.
            max_retries: Retries inside the ``openai`` client (0: every failure surfaces as a typed error).

        Raises:
            MissingExtraError: the ``openai`` package is not installed.
            UsageError: no API key for OpenAI itself, or an unknown server kind.
        """
        assumed = server is None and base_url is not None
        profile = get_profile(server if server is not None else ("llama-cpp-python" if assumed else "openai"))
        try:
            import openai
        except ImportError:
            raise MissingExtraError("openai", "openai") from None
        key = api_key or os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url else None)
        if key is None:
            raise UsageError("no API key: pass api_key=, set OPENAI_API_KEY, or give a local base_url")
        client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)
        return cls(client, profile, model=model, assumed=assumed)

    @classmethod
    def from_client(
        cls, client: Any, *, server: str | ServerProfile | None = None, model: str | None = None
    ) -> OpenAITransport:
        """A transport over the caller's own ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client, used as is.

        The client's base URL, key, timeout, retries and HTTP client stay the caller's; citelock only sends
        requests through it.

        Args:
            client: The client.
            server: A server kind or :class:`ServerProfile`. None: ``openai`` when the client points at OpenAI's
                API, else ``llama-cpp-python`` (:attr:`assumed`; the same rule as a ``base_url``).
            model: Model name; the server's first listed model when None.

        Raises:
            UsageError: ``client`` has no ``chat.completions``, or an unknown server kind.
        """
        if not hasattr(getattr(client, "chat", None), "completions"):
            raise UsageError(
                f"client must be an openai.OpenAI or openai.AsyncOpenAI client, got {type(client).__name__}"
            )
        if server is not None:
            return cls(client, get_profile(server), model=model)
        base = str(getattr(client, "base_url", "") or "").rstrip("/")
        if base in ("", _OPENAI_URL):
            return cls(client, get_profile("openai"), model=model)
        return cls(client, get_profile("llama-cpp-python"), model=model, assumed=True)

    @property
    def provider(self) -> str:
        """The server's label, recorded as the provider of every error and generation.

        The configured server kind; when none was configured, the kind the server named itself in its
        ``/v1/models`` listing if that was already asked for the model name (``vllm``, ``sglang``,
        ``llama.cpp``: :data:`~citelock.runtime._profiles.SELF_NAMES`), else ``openai-compatible``. Never the
        assumed profile's kind: that says how requests are built, not what answers them.
        """
        if not self.assumed:
            return self.profile.kind
        return self._said or UNNAMED_KIND

    @property
    def known_model(self) -> str | None:
        """The model name if it was given or already asked for, else None (never asks the server)."""
        return self._model

    @property
    def model(self) -> str:
        """The model name (asked of the server once when not given; an async client needs :meth:`amodel`)."""
        if self._model is not None:
            return self._model
        if self.is_async:
            raise UsageError(_ASYNC_ONLY)
        return run_steps(self._listing())

    async def amodel(self) -> str:
        """The model name, asked of the server without blocking when the client is async."""
        if self._model is None and not self.is_async:
            return await asyncio.to_thread(lambda: self.model)
        return self._model if self._model is not None else await arun_steps(self._listing())

    def _listing(self) -> Generator[Step, Any, str]:
        """Ask ``/v1/models`` for the model name (the first listed), once for :attr:`model` and :meth:`amodel`."""
        with _mapped(lambda exc: map_openai_error(exc, provider=self.provider)):
            listed = yield _client_step(self.client.models.list)
        self._model, self._said = _first_model(listed)
        return self._model

    def payload(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """The fields every request shares: model, messages (as given), the token bound, temperature, seed.

        Args:
            messages: The chat messages, sent exactly as given.
            max_tokens: The generation bound, under the field name the server takes.
            temperature: Sampling temperature.
            seed: Sampling seed, if the server takes one.
            model: The model name (default: :attr:`model`).

        Raises:
            UsageError: ``max_tokens`` is not positive.
            InputError: a message holds a lone surrogate (not Unicode text: it cannot be sent as JSON in UTF-8).
        """
        if max_tokens < 1:
            raise UsageError(f"max_tokens must be positive, got {max_tokens}")
        for n, message in enumerate(messages):
            bad = _SURROGATE.search(message.get("content", ""))
            if bad is not None:
                raise InputError(
                    f"message {n} ({message.get('role')}) holds a lone surrogate U+{ord(bad.group()):04X} at character "
                    f"{bad.start()}: chunk or question text that is not valid Unicode cannot be sent"
                )
        out: dict[str, Any] = {
            "model": model if model is not None else self.model,
            "messages": [dict(m) for m in messages],
            self.profile.max_tokens_field: max_tokens,
            "temperature": temperature,
        }
        if seed is not None:
            out["seed"] = seed
        return out

    def complete(self, payload: Mapping[str, Any], *, citelock_request_id: str | None = None) -> tuple[Any, Any]:
        """Send one chat-completions request; return ``(response, first choice)``.

        Fields the ``openai`` SDK does not know (server extensions such as llama.cpp's ``schema``) travel in
        ``extra_body``.

        Raises:
            UsageError: the client is async (use :meth:`acomplete`).
            BackendTimeoutError, BackendConnectionError, BackendHTTPError, SchemaRejectedError: the call failed.
            BackendError: the server returned no choices (retryable).
            BackendRefusalError: the model refused.
        """
        return self.send(_split_extra(payload), citelock_request_id=citelock_request_id)

    async def acomplete(self, payload: Mapping[str, Any], *, citelock_request_id: str | None = None) -> tuple[Any, Any]:
        """:meth:`complete` without blocking: awaited on an async client, in a worker thread on a sync one."""
        if not self.is_async:
            return await asyncio.to_thread(self.complete, payload, citelock_request_id=citelock_request_id)
        return await self.asend(_split_extra(payload), citelock_request_id=citelock_request_id)

    def send(self, arguments: Mapping[str, Any], *, citelock_request_id: str | None = None) -> tuple[Any, Any]:
        """Call ``chat.completions.create(**arguments)`` with the arguments as they are; ``(response, first choice)``.

        What :meth:`complete` does after moving server extensions into ``extra_body``; a caller whose arguments
        are already in the SDK's shape (the wrapped client) sends them with this.

        Raises:
            CitelockError: the same errors as :meth:`complete`.
        """
        if self.is_async:
            raise UsageError(_ASYNC_ONLY)
        return self._answered(run_steps(self._creating(arguments, citelock_request_id)), citelock_request_id)

    async def asend(self, arguments: Mapping[str, Any], *, citelock_request_id: str | None = None) -> tuple[Any, Any]:
        """:meth:`send` awaited on an async client (in a worker thread on a sync one)."""
        if not self.is_async:
            return await asyncio.to_thread(self.send, arguments, citelock_request_id=citelock_request_id)
        response = await arun_steps(self._creating(arguments, citelock_request_id))
        return self._answered(response, citelock_request_id)

    def open_stream(self, payload: Mapping[str, Any], *, citelock_request_id: str | None = None) -> Any:
        """Send one chat-completions request with ``stream=True``; return the SDK's stream of chunks (SSE).

        Raises:
            UsageError: the client is async (use :meth:`aopen_stream`).
            BackendTimeoutError, BackendConnectionError, BackendHTTPError, SchemaRejectedError: the call failed.
        """
        return self.send_stream(_split_extra(payload), citelock_request_id=citelock_request_id)

    async def aopen_stream(self, payload: Mapping[str, Any], *, citelock_request_id: str | None = None) -> Any:
        """:meth:`open_stream` on an async client (the SDK's async stream of chunks)."""
        return await self.asend_stream(_split_extra(payload), citelock_request_id=citelock_request_id)

    def send_stream(self, arguments: Mapping[str, Any], *, citelock_request_id: str | None = None) -> Any:
        """``chat.completions.create(**arguments, stream=True)`` with the arguments as they are (see :meth:`send`).

        Raises:
            CitelockError: the same errors as :meth:`open_stream`.
        """
        if self.is_async:
            raise UsageError(_ASYNC_ONLY)
        return run_steps(self._creating({**arguments, "stream": True}, citelock_request_id))

    async def asend_stream(self, arguments: Mapping[str, Any], *, citelock_request_id: str | None = None) -> Any:
        """:meth:`send_stream` on an async client (the SDK's async stream of chunks)."""
        if not self.is_async:
            raise UsageError("aopen_stream needs an openai.AsyncOpenAI client; use open_stream")
        return await arun_steps(self._creating({**arguments, "stream": True}, citelock_request_id))

    def _creating(self, arguments: Mapping[str, Any], citelock_request_id: str | None) -> Generator[Step, Any, Any]:
        """``chat.completions.create(**arguments)``, its SDK errors typed: once for the sync and async calls."""
        with _mapped(lambda exc: self._failure(exc, citelock_request_id)):
            return (yield _client_step(self.client.chat.completions.create, **arguments))

    def _answered(self, response: Any, citelock_request_id: str | None) -> tuple[Any, Any]:
        return response, self._first_choice(response, citelock_request_id)

    def failure(self, exc: Exception, citelock_request_id: str | None) -> BackendError:
        """The typed :class:`BackendError` for an ``openai`` SDK exception (a BackendError passes through)."""
        return self._failure(exc, citelock_request_id)

    def _failure(self, exc: Exception, citelock_request_id: str | None) -> BackendError:
        if isinstance(exc, BackendError):
            return exc
        return map_openai_error(exc, provider=self.provider, citelock_request_id=citelock_request_id)

    def _first_choice(self, response: Any, citelock_request_id: str | None) -> Any:
        request_id = response_request_id(response)
        if not response.choices:
            raise BackendError(
                "the server returned no choices",
                provider=self.provider,
                request_id=request_id,
                citelock_request_id=citelock_request_id,
                retryable=True,
            )
        choice = response.choices[0]
        refusal = getattr(choice.message, "refusal", None)
        if refusal:
            raise BackendRefusalError(
                f"the model refused: {refusal[:200]}",
                refusal=refusal,
                provider=self.provider,
                request_id=request_id,
                citelock_request_id=citelock_request_id,
            )
        return choice


class TransportUser:
    """Base of what sends through one :class:`OpenAITransport`: the OpenAI-compatible backends and the judge.

    What they share: building one over the caller's client, and what it reads off the transport.

    A subclass sets itself up in ``_setup(transport, **options)``, which its constructor calls with a transport
    from :meth:`OpenAITransport.connect` and its ``from_client`` through :meth:`_over_client`.

    Attributes:
        transport: The transport every request goes through.
    """

    transport: OpenAITransport
    _setup: Callable[..., None]  # (transport, **options): the subclass's own set-up

    @classmethod
    def _over_client(
        cls,
        client: Any,
        *,
        server: str | ServerProfile | None,
        model: str | None,
        **options: Any,
    ) -> Self:
        """An instance over the caller's ``client`` (``from_client``).

        Raises:
            UsageError: not an OpenAI client, an unknown server kind, or what ``_setup`` raises.
        """
        made = cls.__new__(cls)
        made._setup(OpenAITransport.from_client(client, server=server, model=model), **options)
        return made

    @property
    def profile(self) -> ServerProfile:
        """The server's profile (how a schema travels, which keywords it takes, its limits)."""
        return self.transport.profile

    @property
    def provider(self) -> str:
        """The server's label on every generation and error (:attr:`OpenAITransport.provider`).

        The configured server kind, else the kind the server named itself on ``/v1/models`` (once asked for the
        model name), else ``openai-compatible``.
        """
        return self.transport.provider

    @property
    def model(self) -> str:
        """The model name (asked of the server once when not given)."""
        return self.transport.model


def response_request_id(response: Any) -> str | None:
    """The server's request id of a response: its ``x-request-id`` header when sent, else the completion id."""
    return getattr(response, "_request_id", None) or getattr(response, "id", None)


def output_text(message: Any, expected: Output | None) -> tuple[str, str | None]:
    """The output a chat message carries, and a note when it came from another place than ``expected``.

    Args:
        message: The response's message.
        expected: Where the constrained output comes back (a :class:`Delivery`'s ``output``): the forced tool
            call's ``tool_arguments`` or the message ``content``; None for free text (the content).

    Returns:
        ``(text, note)``: with ``tool_arguments`` the first tool call's arguments (the content when no tool call
        came back), otherwise the content (a tool call's arguments when the content is empty); ``note`` is None
        when the output came from where it was expected.
    """
    calls = getattr(message, "tool_calls", None) or []
    content = message.content or ""
    if expected == "tool_arguments":
        if calls:
            return calls[0].function.arguments or "", None
        return content, "no tool call came back: the message content was used"
    if not content and calls:
        return calls[0].function.arguments or "", "the output came back as a tool call"
    return content, None


def _client_step(call: Callable[..., Any], /, **arguments: Any) -> Step:
    """A call of the ``openai`` client: blocking on an ``OpenAI`` client, a coroutine awaited on ``AsyncOpenAI``."""
    bound = functools.partial(call, **arguments)
    return Step(bound, bound)


@contextmanager
def _mapped(failure: Callable[[Exception], BackendError]) -> Iterator[None]:
    """An SDK exception raised in the block is raised as ``failure(exc)`` (from ``exc``)."""
    try:
        yield
    except Exception as exc:
        raise failure(exc) from exc


def map_openai_error(exc: Exception, *, provider: str, citelock_request_id: str | None = None) -> BackendError:
    """Turn an ``openai`` SDK exception into a typed :class:`BackendError` (status, request id, retryable).

    Timeouts and connection failures are retryable; an HTTP status is retryable as :func:`retryable_status`
    says, except a 400/422/500 whose message names the schema, which is a :class:`SchemaRejectedError`.
    """
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return BackendTimeoutError(
            f"the request timed out: {exc}",
            provider=provider,
            citelock_request_id=citelock_request_id,
            retryable=True,
        )
    if isinstance(exc, openai.APIConnectionError):
        return BackendConnectionError(
            f"could not reach the server: {exc}",
            provider=provider,
            citelock_request_id=citelock_request_id,
            retryable=True,
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _error_message(exc)
        kind: type[BackendHTTPError] = BackendHTTPError
        retryable = retryable_status(status)
        if status in (400, 422, 500) and any(word in message.lower() for word in _SCHEMA_WORDS):
            kind, retryable = SchemaRejectedError, False
        return kind(
            f"the server answered HTTP {status}: {message[:400]}",
            provider=provider,
            status=status,
            request_id=exc.request_id,
            citelock_request_id=citelock_request_id,
            retryable=retryable,
        )
    return BackendError(
        f"the openai client failed: {type(exc).__name__}: {exc}",
        provider=provider,
        citelock_request_id=citelock_request_id,
    )


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", exc))


def _split_extra(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Standard fields as keyword arguments; anything else (server extensions) in ``extra_body``."""
    known = {k: v for k, v in payload.items() if k in CREATE_FIELDS}
    extra = {k: v for k, v in payload.items() if k not in CREATE_FIELDS}
    if extra:
        known["extra_body"] = extra
    return known


def _first_model(listed: Any) -> tuple[str, str | None]:
    """The first listed model's id, and the server kind its ``owned_by`` names (None when it names none)."""
    if not listed.data:
        raise UsageError("the server lists no models; pass model=")
    first = listed.data[0]
    return str(first.id), said_kind(getattr(first, "owned_by", None))


def _is_async_client(client: Any) -> bool:
    try:
        import openai
    except ImportError:
        return False
    return isinstance(client, openai.AsyncOpenAI)
