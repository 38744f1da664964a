"""The OpenAI-compatible backend: any ``base_url`` (OpenAI, vLLM, llama.cpp, llama-cpp-python), via ``openai``.

The per-request constraint is sent the strongest way the server supports, chosen by its
:class:`~citelock.backends.ServerProfile` (data): the citation grammar itself where the server takes one
(llama.cpp's ``grammar``, vLLM's ``structured_outputs.grammar``, SGLang's ``ebnf``: every span policy, spans by
construction included), else the JSON Schema as ``response_format`` ``json_schema`` with ``strict: true``, a
forced tool call, or llama.cpp's ``json_object`` + ``schema``. Keywords the server cannot take are removed
before sending and recorded; limits are checked before sending (:func:`citelock.constraint.fit_schema` with the
backend's ``limits`` downgrades the span policy to fit, as :func:`citelock.answer` does).

Nothing the server says about enforcement is trusted: every output is verified after the fact against the
schema as sent *and* against the full citation constraint. A constraint that did not hold is reported on the
generation (``enforced=False`` and a ``constraint not enforced`` note) and the answer then goes through the
guard like any unconstrained answer; it is never passed off as enforced.

The client, the server profile, the call and its error mapping are the shared
:class:`~citelock.runtime._transport.OpenAITransport`, the same one the instructor backend and the LLM judge use.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar

from citelock._around import Around
from citelock._steps import Step, arun_steps, run_steps
from citelock.backends._protocol import Generation
from citelock.backends._relay import arelay, relay
from citelock.constraint import BackendLimits, CitationSchema
from citelock.errors import TruncatedOutputError, UsageError
from citelock.records import PromptRecord
from citelock.runtime import (
    PROFILES,
    Delivery,
    OpenAITransport,
    ServerProfile,
    TransportUser,
    output_text,
    response_request_id,
)

__all__ = ["OpenAIBackend", "OpenAIGeneration", "verify_output"]

SCHEMA_NAME = "cited_answer"
_C = TypeVar("_C")
_FREE_TEXT = BackendLimits(policies=())
Request = tuple[dict[str, Any], dict[str, Any] | None, tuple[str, ...]]
"""A request built by the caller: ``(create arguments, schema as sent, keywords removed)``."""


@dataclass(frozen=True)
class OpenAIGeneration(Generation):
    """A :class:`Generation` with what was sent and what verification found.

    Attributes:
        server_kind: The server's label (:attr:`OpenAIBackend.provider`): the configured server kind, else the
            kind the server named itself on ``/v1/models``, else ``openai-compatible``.
        profile: The kind of the profile the request was built from; when no server kind was configured it is
            the assumed ``llama-cpp-python`` and differs from ``server_kind``.
        delivery: How the constraint was sent (``grammar``, ``ebnf``, ``json_schema_strict``, ``tool_call``...).
        request: The request payload exactly as passed to the client (messages, schema, parameters).
        response_id: The server's completion id.
        provider_request_id: The ``x-request-id`` header, when the server sends one.
        removed: Schema constraints not sent because the server cannot take them (checked after the fact).
        violations: What the output broke: of the schema as sent (the server did not enforce it) or of the
            removed constraints. Empty when the output conforms.
    """

    server_kind: str = ""
    profile: str = ""
    delivery: str = ""
    request: Mapping[str, Any] = field(default_factory=dict)
    response_id: str | None = None
    provider_request_id: str | None = None
    removed: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()


def verify_output(
    text: str, sent_schema: Mapping[str, Any] | None, schema: CitationSchema
) -> tuple[list[str], list[str]]:
    """Check an output against the schema as sent and against the full citation constraint.

    Returns:
        ``(sent, full)``: violations of the schema as sent (the server did not enforce what it was given) and
        violations of the citation constraint (including constraints that were not sent). Both empty when the
        output conforms.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"the output is not JSON ({exc.msg} at character {exc.pos}): {text[:80]!r}"
        return [problem], [problem]
    sent: list[str] = []
    if sent_schema is not None:
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

        validator = Draft202012Validator(dict(sent_schema))
        for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))[:5]:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            sent.append(f"{where}: {error.message[:160]}")
    return sent, schema.violations(data)


class OpenAIBackend(TransportUser):
    """A backend for any OpenAI-compatible chat-completions server.

    Example:
        >>> backend = OpenAIBackend(base_url="http://127.0.0.1:8080/v1", server="llama-cpp-python")  # doctest: +SKIP
        >>> citelock.answer("When did it open?", chunks, backend=backend, policy="sentence")  # doctest: +SKIP

    With your own client (its base URL, key, timeouts, retries and HTTP client stay yours):

        >>> backend = OpenAIBackend.from_client(openai.OpenAI(), model="gpt-4o-mini")  # doctest: +SKIP

    Args:
        base_url: The server's base URL (``.../v1``); OpenAI's when None.
        api_key: API key; ``$OPENAI_API_KEY``, or a placeholder for a local ``base_url``.
        model: Model name; the server's first listed model when None.
        server: A server kind (``openai``, ``vllm``, ``sglang``, ``llama.cpp``, ``llama-cpp-python``) or a
            :class:`ServerProfile`. Defaults to ``openai`` without ``base_url``; with one, requests are built as
            for ``llama-cpp-python`` and the server is labeled ``openai-compatible`` (or the kind it names itself
            on ``/v1/models``: :attr:`provider`).
        delivery: Name of the profile's delivery to use (default: its strongest, a grammar where it takes one).
        adapt: Remove keywords the server cannot take before sending (recorded). False sends the schema as
            built, to test what a server does with a schema it cannot enforce.
        constrain: False: send no constraint at all; the backend then advertises no span policy, so
            :func:`citelock.answer` uses the free-text ``answer_naive`` prompt (the naive baseline on a server).
        temperature: Sampling temperature.
        seed: Sampling seed, if the server takes one.
        timeout: Seconds before a request times out.
        max_retries: Retries inside the ``openai`` client (0: every failure surfaces as a typed error).

    Raises:
        MissingExtraError: the ``openai`` extra is not installed.
        UsageError: no API key for OpenAI itself, an unknown server kind or delivery.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        server: str | ServerProfile | None = None,
        delivery: str | None = None,
        adapt: bool = True,
        constrain: bool = True,
        temperature: float = 0.0,
        seed: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 0,
    ) -> None:
        transport = OpenAITransport.connect(
            base_url=base_url, api_key=api_key, model=model, server=server, timeout=timeout, max_retries=max_retries
        )
        self._setup(transport, delivery=delivery, adapt=adapt, constrain=constrain, temperature=temperature, seed=seed)

    def _setup(
        self,
        transport: OpenAITransport,
        *,
        delivery: str | None,
        adapt: bool,
        constrain: bool,
        temperature: float,
        seed: int | None,
    ) -> None:
        self.transport = transport
        self._delivery = transport.profile.citation_delivery(delivery)
        self.adapt = adapt
        self.constrain = constrain
        self.temperature = temperature
        self.seed = seed
        self._limits: BackendLimits | None = None

    @classmethod
    def from_client(
        cls,
        client: Any,
        *,
        server: str | ServerProfile | None = None,
        model: str | None = None,
        delivery: str | None = None,
        adapt: bool = True,
        constrain: bool = True,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> OpenAIBackend:
        """A backend over your own ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client, used as is.

        With an ``AsyncOpenAI`` client the backend generates through :meth:`agenerate` (what
        :func:`citelock.aanswer` awaits); calling :meth:`generate` then raises a :class:`UsageError`.

        Args:
            client: The client (its base URL, key, timeout, retries and HTTP client are kept).
            server: A server kind (``openai``, ``vllm``, ``sglang``, ``llama.cpp``, ``llama-cpp-python``) or a
                :class:`ServerProfile`. None: ``openai`` when the client points at OpenAI's API, else as the
                constructor's ``server=None`` with a ``base_url``.
            model: Model name; the server's first listed model when None.
            delivery: Name of the profile's delivery to use (default: its strongest).
            adapt: Remove keywords the server cannot take before sending (recorded).
            constrain: False: send no constraint (the naive baseline on this server).
            temperature: Sampling temperature.
            seed: Sampling seed, if the server takes one.

        Raises:
            UsageError: not an OpenAI client, an unknown server kind or delivery.
        """
        return cls._over_client(
            client,
            server=server,
            model=model,
            delivery=delivery,
            adapt=adapt,
            constrain=constrain,
            temperature=temperature,
            seed=seed,
        )

    @property
    def client(self) -> Any:
        """The ``openai`` client requests go through."""
        return self.transport.client

    @property
    def profile(self) -> ServerProfile:
        """The server's profile (how the schema travels, which keywords it takes, its limits); settable."""
        return self.transport.profile

    @profile.setter
    def profile(self, value: ServerProfile) -> None:
        self._delivery = value.citation_delivery(self._delivery.name)
        if value.kind != self.transport.profile.kind:
            self.transport.assumed = False  # a profile of another kind names the server
        self.transport.profile = value

    @property
    def limits(self) -> BackendLimits:
        """What the server enforces through this backend's delivery (none at all with ``constrain=False``)."""
        if not self.constrain:
            return _FREE_TEXT
        if self._limits is not None:
            return self._limits
        return self.transport.profile.limits_for(self._delivery)

    @limits.setter
    def limits(self, value: BackendLimits) -> None:
        self._limits = value

    @property
    def delivery(self) -> Delivery:
        """How the constraint is sent."""
        return self._delivery

    def request_for(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int, model: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None, tuple[str, ...]]:
        """The request payload for ``record``: ``(payload, schema as sent, constraints removed)``.

        Raises:
            UsageError: the schema breaks a limit of this server (fit it with :func:`citelock.constraint.fit_schema` and
                this backend's ``limits`` first).
        """
        payload = self.transport.payload(
            [{"role": m.role, "content": m.content} for m in record.messages],
            max_tokens=max_tokens,
            temperature=self.temperature,
            seed=self.seed,
            model=model,
        )
        if schema is None:
            return payload, None, ()
        fields, sent, removed = self.constraint_fields(schema)
        payload.update(fields)
        return payload, sent, removed

    def constraint_fields(
        self, schema: CitationSchema
    ) -> tuple[dict[str, Any], dict[str, Any] | None, tuple[str, ...]]:
        """The request fields that carry ``schema`` to this server: ``(fields, schema as sent, constraints removed)``.

        ``fields`` are what this backend's delivery adds to a request (``response_format``, ``tools`` and
        ``tool_choice``, or a server extension such as ``grammar``, ``json_schema``, ``structured_outputs``,
        ``ebnf``); the schema as sent is None for a grammar delivery.

        Raises:
            UsageError: the schema breaks a limit of this server (fit it with :func:`citelock.constraint.fit_schema` and
                this backend's ``limits`` first).
        """
        problem = self.limits.violation(schema)
        if problem is not None:
            raise UsageError(
                f"not sent: {problem}; fit the schema to this server first "
                "(citelock.constraint.fit_schema(context, policy, backend.limits) downgrades it)"
            )
        if self._delivery.grammar is not None:
            return self._delivery.render(grammar=schema.grammar_in(self._delivery.grammar)), None, ()
        adapted, removed = self.profile.adapt(schema.json_schema)
        sent = adapted if self.adapt else dict(schema.json_schema)
        return self._delivery.render(sent, SCHEMA_NAME), sent, removed

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> OpenAIGeneration:
        """Send ``record`` (messages exactly as logged) with ``schema``; verify the output after the fact.

        Raises:
            UsageError: the backend holds an ``AsyncOpenAI`` client (use :meth:`agenerate`).
            BackendTimeoutError, BackendConnectionError, BackendHTTPError, SchemaRejectedError: the call failed.
            BackendRefusalError: the model refused.
            TruncatedOutputError: the output stopped at ``max_tokens`` before the JSON was complete.
        """
        return run_steps(self._generating(record, schema, max_tokens))

    async def agenerate(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> OpenAIGeneration:
        """:meth:`generate` without blocking the event loop.

        Awaited on an ``AsyncOpenAI`` client; with a sync client :meth:`generate` runs in a worker thread.

        Raises:
            CitelockError: the same errors as :meth:`generate`.
        """
        if not self.transport.is_async:
            return await asyncio.to_thread(self.generate, record, schema, max_tokens=max_tokens)
        return await arun_steps(self._generating(record, schema, max_tokens))

    def _generating(
        self, record: PromptRecord, schema: CitationSchema | None, max_tokens: int
    ) -> Generator[Step, Any, OpenAIGeneration]:
        """One generation, once for :meth:`generate` and :meth:`agenerate`: the model, the request, the call."""
        transport = self.transport
        model: str = yield Step(lambda: transport.model, transport.amodel)
        payload, sent, removed = self.request_for(record, schema, max_tokens=max_tokens, model=model)
        started = time.perf_counter()
        ours = {"citelock_request_id": record.request_id}
        calls = (
            functools.partial(transport.complete, payload, **ours),
            functools.partial(transport.acomplete, payload, **ours),
        )
        response, choice = yield Step(*calls)
        latency = time.perf_counter() - started
        return self._generation(record, schema, payload, sent, removed, response, choice, latency, max_tokens)

    def read_response(
        self,
        record: PromptRecord,
        schema: CitationSchema | None,
        request: dict[str, Any],
        sent: dict[str, Any] | None,
        removed: tuple[str, ...],
        response: Any,
        choice: Any,
        *,
        latency: float,
        max_tokens: int,
    ) -> OpenAIGeneration:
        """The generation a response to ``request`` carries, verified against ``schema`` after the fact.

        For a caller that sent the request itself (the wrapped client): ``request`` is what was passed to
        ``chat.completions.create`` (its ``model`` names the model), ``sent`` and ``removed`` come from
        :meth:`constraint_fields`.

        Raises:
            TruncatedOutputError: the output stopped at ``max_tokens`` before the JSON was complete.
        """
        return self._generation(record, schema, request, sent, removed, response, choice, latency, max_tokens)

    def stream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int, request: Request | None = None
    ) -> Iterator[str | OpenAIGeneration]:
        """:meth:`generate` over server-sent events: every content delta as it arrives, then the generation.

        The generation is built and verified exactly as :meth:`generate` builds it from a whole response.
        Closing the iterator closes the HTTP stream (the server stops generating). ``request`` is a request the
        caller built itself (the wrapped client's ``create`` arguments in the SDK's shape, the schema as sent, the
        keywords removed: see :meth:`constraint_fields`), sent as it is instead of one built from ``record``.

        Raises:
            TruncatedOutputError: the server cut the stream before the answer was complete (``partial`` holds
                what arrived), or it stopped at ``max_tokens``.
            CitelockError: the other errors of :meth:`generate`.
        """
        run = self._stream_run(record, schema, max_tokens, request)
        yield from relay(run, run.reading(run.open(self.transport.open_stream, self.transport.send_stream)))

    async def astream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int, request: Request | None = None
    ) -> AsyncIterator[str | OpenAIGeneration]:
        """:meth:`stream` on an ``AsyncOpenAI`` client (same items; ``aclose()`` closes the HTTP stream).

        Raises:
            UsageError: the backend holds a sync client (use :meth:`stream`).
            CitelockError: the errors of :meth:`stream`.
        """
        model = await self.transport.amodel() if request is None else None
        run = self._stream_run(record, schema, max_tokens, request, model)
        chunks = await run.open(self.transport.aopen_stream, self.transport.asend_stream)
        async for item in arelay(run, run.reading(chunks)):
            yield item

    def _stream_run(
        self,
        record: PromptRecord,
        schema: CitationSchema | None,
        max_tokens: int,
        request: Request | None,
        model: str | None = None,
    ) -> _StreamRun:
        """One stream's request (built from ``record``, or the caller's own) and what arrives on it."""
        callers = request is not None
        if request is None:
            request = self.request_for(record, schema, max_tokens=max_tokens, model=model)
        return _StreamRun(self, record, schema, max_tokens, request, callers=callers)

    def _streamed(
        self,
        record: PromptRecord,
        schema: CitationSchema | None,
        payload: dict[str, Any],
        sent: dict[str, Any] | None,
        removed: tuple[str, ...],
        got: _Streamed,
        started: float,
        max_tokens: int,
    ) -> OpenAIGeneration:
        text = got.text()
        if schema is not None and got.finish is None and _truncated(text, "length", None, max_tokens):
            why = f"at max_tokens={max_tokens}" if got.chunks >= max_tokens else "without a finish reason"
            raise TruncatedOutputError(
                f"the stream ended {why} before the answer was complete ({got.chunks} chunks); got {text[-60:]!r}",
                partial=text,
                max_tokens=max_tokens,
                provider=self.transport.provider,
                request_id=got.response_id,
                citelock_request_id=record.request_id,
            )
        calls = [SimpleNamespace(function=SimpleNamespace(arguments=text))] if got.in_tool_call else None
        message = SimpleNamespace(content=None if got.in_tool_call else text, tool_calls=calls, refusal=None)
        usage = got.usage
        response = SimpleNamespace(id=got.response_id, usage=usage, _request_id=None)
        choice = SimpleNamespace(message=message, finish_reason=got.finish)
        generation = self._generation(
            record, schema, payload, sent, removed, response, choice, time.perf_counter() - started, max_tokens
        )
        if usage is None:  # no usage chunk: one SSE chunk carries one token on llama.cpp servers
            generation = _replace(generation, completion_tokens=got.chunks)
        return _replace(generation, first_token_s=got.first_s)

    def _generation(
        self,
        record: PromptRecord,
        schema: CitationSchema | None,
        payload: dict[str, Any],
        sent: dict[str, Any] | None,
        removed: tuple[str, ...],
        response: Any,
        choice: Any,
        latency: float,
        max_tokens: int,
    ) -> OpenAIGeneration:
        kind = self.transport.provider
        provider_request_id = getattr(response, "_request_id", None)
        notes: list[str] = []
        text, where = output_text(choice.message, self._delivery.output if schema is not None else None)
        if where:
            notes.append(where)
        usage = response.usage
        completion_tokens = usage.completion_tokens if usage is not None else None
        finish = choice.finish_reason
        if schema is not None and _truncated(text, finish, completion_tokens, max_tokens):
            raise TruncatedOutputError(
                f"the output stopped at max_tokens={max_tokens} before the JSON was complete "
                f"({completion_tokens} tokens; got {text[-60:]!r}); raise max_tokens or lower the SchemaOptions bounds",
                partial=text,
                max_tokens=max_tokens,
                provider=kind,
                request_id=response_request_id(response),
                citelock_request_id=record.request_id,
            )
        enforced = False
        violations: tuple[str, ...] = ()
        if schema is not None:
            notes.append(f"delivery: {self._delivery.name} ({_sent_to(self.transport)})")
            if removed:
                verb = "sent anyway (the server cannot enforce them)" if not self.adapt else "not sent"
                notes.append(f"{verb}, checked after: " + "; ".join(removed))
            sent_problems, full_problems = verify_output(text, sent, schema)
            if sent_problems:
                notes.append(
                    "constraint not enforced: the output breaks the schema as sent (the server did not enforce "
                    "it): " + "; ".join(sent_problems[:3])
                )
            elif full_problems:
                notes.append("constraint not enforced: the output breaks " + "; ".join(full_problems[:3]))
            violations = tuple(sent_problems or full_problems)
            enforced = not sent_problems and not full_problems
        return OpenAIGeneration(
            text=text,
            backend=self.name,
            model=str(payload["model"]),
            enforced=enforced,
            prompt_tokens=usage.prompt_tokens if usage is not None else None,
            completion_tokens=completion_tokens,
            latency_s=latency,
            finish_reason=finish,
            notes=tuple(notes),
            server_kind=kind,
            profile=self.profile.kind,
            delivery=self._delivery.name if schema is not None else "none",
            request=payload,
            response_id=response.id,
            provider_request_id=provider_request_id,
            removed=removed,
            violations=violations,
        )


class _StreamRun:
    """One stream's request and what arrived on it: everything but the I/O, shared by ``stream`` and ``astream``."""

    def __init__(
        self,
        backend: OpenAIBackend,
        record: PromptRecord,
        schema: CitationSchema | None,
        max_tokens: int,
        request: Request,
        *,
        callers: bool,
    ) -> None:
        self.backend, self.record, self.schema, self.max_tokens = backend, record, schema, max_tokens
        self.payload, self.sent, self.removed = request
        self.callers = callers
        self.got = _Streamed()
        self.started = 0.0

    def open(self, build: Callable[..., _C], send: Callable[..., _C]) -> _C:
        """Start the clock and open the stream: ``send`` for the caller's own request, else ``build`` (ours)."""
        self.started = time.perf_counter()
        opener = send if self.callers else build
        return opener(self.payload, citelock_request_id=self.record.request_id)

    def take(self, chunk: Any) -> str:
        """One SSE chunk: its new text (content, else tool-call arguments)."""
        return self.got.add(chunk, self.started)

    def reading(self, chunks: Any) -> Around[Any]:
        """The SDK's stream, read one chunk at a time: an error while reading one is the cut.

        Closing it closes the HTTP stream (the server stops generating).
        """
        return Around(chunks, self._cutting, close_inside=False)

    @contextmanager
    def _cutting(self) -> Iterator[None]:
        try:
            yield
        except (StopIteration, StopAsyncIteration):
            raise
        except Exception as exc:
            raise self.cut(exc) from exc

    def cut(self, exc: Exception) -> TruncatedOutputError:
        """The error for a stream the server cut while it was read (``exc``: what reading raised)."""
        transport, got = self.backend.transport, self.got
        return TruncatedOutputError(
            f"the server cut the stream after {got.chunks} chunks, before the answer was complete "
            f"({transport.failure(exc, self.record.request_id)}); got {got.text()[-60:]!r}",
            partial=got.text(),
            max_tokens=self.max_tokens,
            provider=transport.provider,
            request_id=got.response_id,
            citelock_request_id=self.record.request_id,
        )

    def generation(self) -> OpenAIGeneration:
        """The generation the whole stream carried, verified as :meth:`OpenAIBackend.generate` verifies one."""
        return self.backend._streamed(
            self.record, self.schema, self.payload, self.sent, self.removed, self.got, self.started, self.max_tokens
        )


class _Streamed:
    """What a chat-completions stream delivered so far: the content (or tool-call arguments) and the last fields."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.chunks = 0
        self.finish: str | None = None
        self.usage: Any = None
        self.response_id: str | None = None
        self.first_s: float | None = None
        self.in_tool_call = False

    def add(self, chunk: Any, started: float) -> str:
        """Take one SSE chunk; return its new text (content, else tool-call arguments)."""
        self.response_id = getattr(chunk, "id", None) or self.response_id
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        if not chunk.choices:
            return ""
        choice = chunk.choices[0]
        self.finish = choice.finish_reason or self.finish
        delta = choice.delta
        piece = (delta.content or "") if delta is not None else ""
        calls = getattr(delta, "tool_calls", None) or [] if delta is not None else []
        if not piece and calls and calls[0].function is not None:
            piece = calls[0].function.arguments or ""
            self.in_tool_call = self.in_tool_call or bool(piece)
        if piece:
            self.chunks += 1
            self.pieces.append(piece)
            if self.first_s is None:
                self.first_s = time.perf_counter() - started
        return piece

    def text(self) -> str:
        """Everything received, joined."""
        return "".join(self.pieces)


def _replace(generation: OpenAIGeneration, **changes: Any) -> OpenAIGeneration:
    import dataclasses

    return dataclasses.replace(generation, **changes)


def _truncated(text: str, finish: str | None, completion_tokens: int | None, max_tokens: int) -> bool:
    hit_limit = finish == "length" or (completion_tokens is not None and completion_tokens >= max_tokens)
    if not hit_limit:
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return True
    return False


def _sent_to(transport: OpenAITransport) -> str:
    """Whom the request went to, for the delivery note: the label, and the assumed profile when one was assumed."""
    if not transport.assumed:
        return transport.provider
    said = transport.provider
    hint = f"pass server={said!r}" if said in PROFILES else "name the server with server="
    return f"{said}; built as for {transport.profile.kind}, assumed: {hint}"
