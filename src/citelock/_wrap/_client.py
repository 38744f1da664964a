"""The wrapped ``openai`` client: the caller's own ``chat.completions.create`` call, constrained and guarded.

``wrap(client)`` returns an object that behaves as the client (every attribute but ``chat.completions.create``
is the client's own). ``create(..., chunks=[...])`` runs three steps: :func:`~citelock._wrap._request.prepare`
(check, locate the chunks, build and inject the constraint), send through the client (SDK errors become typed
:class:`~citelock.errors.BackendError` with the SDK's exception as ``__cause__``), then :func:`_finish` (verify,
parse, guard, repair, sinks) returns the SDK's own response with ``response.citelock`` attached. With
``stream=True`` the same prepared request goes out over SSE and the call returns citelock's stream events
(:mod:`citelock._wrap._stream`), the ones :meth:`citelock.Citelock.stream` yields.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Generator, Iterable
from pathlib import Path
from time import perf_counter, time
from typing import TYPE_CHECKING, Any, Literal

from citelock._request import Runner
from citelock._steps import Step, arun_steps, run_steps, step
from citelock._wrap._request import Prepared, prepare
from citelock._wrap._stream import CallersStream
from citelock.backends._openai import OpenAIBackend
from citelock.constraint._policy import DEFAULT_POLICY, SpanPolicy
from citelock.constraint._schema import SchemaOptions
from citelock.errors import UsageError
from citelock.guard import Guard
from citelock.pipeline import Citelock, GuardedAnswer, Sink
from citelock.render import RenderStyle
from citelock.runtime._profiles import ServerProfile
from citelock.store import PromptLog
from citelock.telemetry._hook import answer_trace, stream_trace

if TYPE_CHECKING:
    from citelock.config import Config
    from citelock.stream._drive import StreamJob
    from citelock.stream._events import Show

__all__ = ["BLOCKED_TEXT", "AsyncWrappedOpenAI", "Content", "WrappedOpenAI", "wrap"]

Content = Literal["rendered", "raw"]
"""What ``response.choices[0].message.content`` holds after a wrapped call: the guarded, rendered answer (what an
application shows) or the model's raw JSON output."""

BLOCKED_TEXT = "This answer was withheld: its citations did not pass verification."
"""The ``content`` of a blocked answer under ``content="rendered"`` (the answer itself is on ``response.citelock``)."""


class _Wrapper:
    """What the sync and async wrappers share: the configured client and the finishing step."""

    def __init__(self, client: Any, citelock: Citelock, backend: OpenAIBackend, content: Content) -> None:
        self._client = client
        self._citelock = citelock
        self._runner = Runner(citelock)  # the same runner Citelock's own calls use
        self._backend = backend
        self._content = content

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    @property
    def backend(self) -> OpenAIBackend:
        """The backend over the wrapped client (its server profile decides how the constraint is sent)."""
        return self._backend

    @property
    def citelock(self) -> Citelock:
        """The configuration every call runs under (log, guard, sinks, policy, render)."""
        return self._citelock

    def _prepare(self, arguments: dict[str, Any], model: str | None) -> Prepared:
        ours = {k: arguments.pop(k) for k in ("citelock_metadata", "citelock_policy") if k in arguments}
        if model is not None:
            arguments["model"] = model
        surface = self._citelock.guard.policy  # its stakes decide what the ranked grammar admits, as in answer
        prepared = prepare(
            self._backend,
            arguments,
            policy=ours.get("citelock_policy") or self._citelock.policy,
            options=self._citelock.options,
            metadata=ours.get("citelock_metadata"),
            stakes=surface.stakes if surface is not None else None,
        )
        self._runner.log(prepared.record)  # before the call: the prompt exactly as it is sent
        return prepared

    def _model(self, arguments: dict[str, Any]) -> Generator[Step, Any, str | None]:
        """The model to send when the call names none: the transport's (asked of the server once)."""
        if "model" in arguments:
            return None
        transport = self._backend.transport
        model: str = yield Step(lambda: transport.model, transport.amodel)
        return model

    def _creating(self, arguments: dict[str, Any]) -> Generator[Step, Any, Any]:
        """A wrapped ``create`` call, once for both clients: prepare and log, send, finish (citelock._steps)."""
        model = yield from self._model(arguments)
        transport = self._backend.transport
        with answer_trace() as trace:  # spans per step when the otel extra is installed, as Citelock.answer
            with trace.assembling() as assembled:
                prepared: Prepared = assembled((yield step(self._prepare, dict(arguments), model)))
            abstained = yield step(self._abstained, prepared)
            if abstained is not None:  # answered without calling the server: no tokens spent
                return abstained
            with trace.generating(prepared.record, self._backend) as done:
                started = perf_counter()
                ours = {"citelock_request_id": prepared.record.request_id}
                call = Step(
                    functools.partial(transport.send, prepared.arguments, **ours),
                    functools.partial(transport.asend, prepared.arguments, **ours),
                )
                response, choice = yield call
                done(response)
            latency = perf_counter() - started
            return (yield step(self._finish, prepared, response, choice, latency))

    def _opening(self, arguments: dict[str, Any]) -> Generator[Step, Any, tuple[Any, StreamJob[GuardedAnswer]]]:
        """A wrapped ``stream=True`` call up to its stream: prepared and logged now, sent when iteration begins."""
        model = yield from self._model(arguments)
        streamed = stream_trace()  # Citelock.answer's spans, across the caller's iteration
        with streamed.assembling() as assembled:
            prepared: Prepared = assembled((yield step(self._prepare, dict(arguments), model)))
        return streamed, self._job(prepared)

    def _job(self, prepared: Prepared, show: Show | None = None) -> StreamJob[GuardedAnswer]:
        """The stream of a prepared call: the caller's request over SSE, :meth:`Citelock.stream`'s events.

        ``show`` overrides the surface's show policy for this call (the gateway passes its surface's).
        """
        stream = CallersStream(self._backend, prepared)
        return self._runner.stream_job(prepared.prepared, stream, prepared.request.showing(show))

    def _abstained(self, prepared: Prepared) -> Any | None:
        """The SDK response of a call answered without sending it (the runner's early abstention), or None.

        On a surface that abstains, when nothing located is relevant enough to the question, the server is not
        called: the response is the abstention, finished (guarded, persisted) as any answer, ``usage`` all zeros.
        """
        generation = self._runner.abstention(prepared.prepared, CallersStream(self._backend, prepared))
        if generation is None:
            return None
        from openai.types.chat import ChatCompletion

        response = ChatCompletion.model_validate(
            {
                "id": f"citelock-abstained-{prepared.record.request_id}",
                "object": "chat.completion",
                "created": int(time()),
                "model": generation.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": generation.text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )
        choice = response.choices[0]
        guarded = self._runner.finish(prepared.prepared, generation, prepared.request)
        _attach(response, choice, guarded, generation.text, self._content)
        return response

    def _finish(self, prepared: Prepared, response: Any, choice: Any, latency: float) -> Any:
        prep = prepared.prepared
        generation = self._backend.read_response(
            prep.record,
            prep.schema,
            prepared.arguments,
            prepared.sent,
            prepared.removed,
            response,
            choice,
            latency=latency,
            max_tokens=prep.max_tokens,
        )
        guarded = self._runner.finish(prep, generation, prepared.request)
        _attach(response, choice, guarded, generation.text, self._content)
        return response


def _attach(response: Any, choice: Any, guarded: GuardedAnswer, raw: str, content: Content) -> None:
    """Put the guarded answer on the SDK's response (not into its fields: ``model_dump`` stays the server's)."""
    object.__setattr__(response, "citelock", guarded)
    object.__setattr__(response, "citelock_output", raw)
    if content == "rendered":
        choice.message.content = guarded.rendered if guarded.served else BLOCKED_TEXT


class _Completions:
    def __init__(self, owner: WrappedOpenAI) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner._client.chat.completions, name)

    def create(self, **arguments: Any) -> Any:
        """The SDK's ``create`` with one more keyword, ``chunks=``; returns the SDK's response.

        ``response.citelock`` is the :class:`~citelock.GuardedAnswer`; ``response.citelock_output`` the model's
        raw output; ``choices[0].message.content`` the rendered answer (the wrapper's ``content=``).

        Two more optional keywords: ``citelock_policy`` (this call's span policy) and ``citelock_metadata``
        (values recorded on the logged prompt).

        ``stream=True`` returns an iterator of citelock's stream events instead of the SDK's chunks: the events
        :meth:`citelock.Citelock.stream` yields (every one has a ``type``; the last is ``done`` and its
        ``.answer`` is the :class:`~citelock.GuardedAnswer`), built from the SSE stream of this same request.
        Not the SDK's chunk objects, because a chunk carries raw JSON tokens: what a reader may be shown is a
        claim once its checks (and, on a high-stakes surface, its judge) have passed, and a chunk cannot say
        that. The request is prepared and logged here and sent when iteration begins; closing the iterator
        closes the HTTP stream and persists what was checked with an ``ANSWER_TRUNCATED`` finding.

        Raises:
            UsageError: ``chunks=`` missing, a ``stream`` that is not a bool, a ``response_format``/``tools``/
                ``stream_options``/grammar of the caller's own, ``n`` other than 1 (nothing is logged).
            InputError: empty or duplicate chunks, non-text messages, messages that contradict the chunks.
            BackendError: the SDK call failed (typed; the SDK's exception is ``__cause__``).
            TruncatedOutputError: the output stopped at the token bound mid-answer.
            UnparsedAnswerError: a server that ignored the constraint returned output that is not an answer.
        """
        owner = self._owner
        if arguments.get("stream"):
            from citelock.stream._drive import stream_events

            streamed, job = run_steps(owner._opening(arguments))
            return streamed.events(job, stream_events)
        return run_steps(owner._creating(arguments))


class _Chat:
    def __init__(self, completions: Any, client: Any) -> None:
        self.completions = completions
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client.chat, name)


class WrappedOpenAI(_Wrapper):
    """An ``openai.OpenAI`` client whose ``chat.completions.create`` constrains and guards citations.

    Every other attribute is the client's own. Build it with :func:`citelock.wrap`.
    """

    def __init__(self, client: Any, citelock: Citelock, backend: OpenAIBackend, content: Content) -> None:
        super().__init__(client, citelock, backend, content)
        self.chat = _Chat(_Completions(self), client)


class _AsyncCompletions:
    def __init__(self, owner: AsyncWrappedOpenAI) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner._client.chat.completions, name)

    async def create(self, **arguments: Any) -> Any:
        """The async ``create`` (see :meth:`WrappedOpenAI.chat.completions.create`); blocking steps in a thread.

        With ``stream=True`` the awaited call returns an async iterator of the same events
        (``async for event in await client.chat.completions.create(..., stream=True, chunks=...)``).
        """
        owner = self._owner
        if arguments.get("stream"):
            from citelock.stream._drive import astream_events

            streamed, job = await arun_steps(owner._opening(arguments))
            return streamed.aevents(job, astream_events)
        return await arun_steps(owner._creating(arguments))


class AsyncWrappedOpenAI(_Wrapper):
    """An ``openai.AsyncOpenAI`` client whose ``chat.completions.create`` constrains and guards citations."""

    def __init__(self, client: Any, citelock: Citelock, backend: OpenAIBackend, content: Content) -> None:
        super().__init__(client, citelock, backend, content)
        self.chat = _Chat(_AsyncCompletions(self), client)


def wrap(
    client: Any,
    *,
    guard: Guard | None = None,
    log: PromptLog | str | Path | None = None,
    sinks: Iterable[Sink] = (),
    policy: SpanPolicy = DEFAULT_POLICY,
    server: str | ServerProfile | None = None,
    render: RenderStyle = "footnotes",
    content: Content = "rendered",
    options: SchemaOptions | None = None,
    known_ids: Collection[str] | None = None,
    delivery: str | None = None,
    config: Config | str | Path | None = None,
    surface: str | None = None,
) -> Any:
    """Wrap the ``openai`` client your application already calls: same call, citations constrained and guarded.

    Example:
        >>> client = citelock.wrap(openai.OpenAI(base_url=..., api_key=...), log="citelock.db")  # doctest: +SKIP
        >>> response = client.chat.completions.create(
        ...     model="m", messages=my_messages, chunks=retrieved
        ... )  # doctest: +SKIP
        >>> response.choices[0].message.content, response.citelock.decision  # doctest: +SKIP

    Per call the caller's ``messages`` are sent exactly as given. Each chunk's body is located in them; the
    chunks they do not hold are serialized into one ``system`` message of citelock's own, placed after the
    caller's leading system messages and recorded (``metadata["wrap"]["context_message"]``). The citation
    constraint is built from this turn's chunks and sent the way the server takes it (the server profile:
    strict ``response_format`` on OpenAI, ``structured_outputs`` on vLLM, ``ebnf`` on SGLang, ``grammar`` on
    llama.cpp), with the profile's limits and downgrade path. The prompt is logged before sending, the injected
    constraint in its metadata. The output is verified (a server that ignored the constraint yields an answer
    not marked enforced), parsed, guarded, repaired per the surface and fed to the sinks.

    Args:
        client: An ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client (kept as is: base URL, key, retries).
        guard: The :class:`~citelock.Guard` every answer goes through (None: the free checks only).
        log: A :class:`~citelock.store.PromptLog`, or a path / URL to open one (None: not logged).
        sinks: Where every result goes (see :data:`citelock.Sink`).
        policy: Requested span policy (downgraded to fit the server, recorded on the answer).
        server: The server kind (``openai``, ``vllm``, ``sglang``, ``llama.cpp``, ``llama-cpp-python``) or a
            profile; None: ``openai`` for OpenAI's API, else built as for ``llama-cpp-python``.
        render: How citations appear in the rendered answer: ``footnotes``, ``links`` or ``none``.
        content: What ``choices[0].message.content`` holds afterwards: ``rendered`` (the guarded answer as an
            application shows it; a blocked one is replaced by :data:`BLOCKED_TEXT`) or ``raw`` (the model's
            JSON). The raw output is always ``response.citelock_output``.
        options: Bounds of the answer shape (:class:`~citelock.SchemaOptions`).
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        delivery: Name of the server profile's delivery to use (default: its strongest).
        config: A :class:`~citelock.Config` (or its file's path): ``guard``, ``log`` and ``sinks`` not given here
            come from its ``surface`` (as :meth:`Citelock.from_config` builds them).
        surface: The config's surface (default: its ``default_surface``).

    Returns:
        A :class:`WrappedOpenAI` (or :class:`AsyncWrappedOpenAI` for an async client).

    Raises:
        UsageError: not an OpenAI client, an unknown server kind, delivery or content, a bad guard or sink.
    """
    if content not in ("rendered", "raw"):
        raise UsageError(f"content must be 'rendered' or 'raw', got {content!r}")
    if isinstance(client, _Wrapper):
        raise UsageError("this client is already wrapped; wrap the openai client once")
    backend = OpenAIBackend.from_client(client, server=server, delivery=delivery)
    if config is not None or surface is not None:
        from citelock.config import Config, client_arguments

        loaded = config if isinstance(config, Config) else Config.load(config)
        given = {"guard": guard, "log": log, "sinks": tuple(sinks) or None}
        built = client_arguments(loaded, surface, {k: v for k, v in given.items() if v is not None})
        guard, log, sinks = built["guard"], built.get("log"), built.get("sinks", ())
    pipeline = Citelock(
        backend, log=log, guard=guard, sinks=sinks, policy=policy, render=render, options=options, known_ids=known_ids
    )
    if backend.transport.is_async:
        return AsyncWrappedOpenAI(client, pipeline, backend, content)
    return WrappedOpenAI(client, pipeline, backend, content)
