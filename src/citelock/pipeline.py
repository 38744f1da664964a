"""The pipeline: ``Citelock`` ties assemble -> log -> constrain -> generate -> verify -> guard -> repair -> persist.

A :class:`Citelock` client holds configuration, the way an HTTP client does: the backend, the prompt log, the
:class:`~citelock.Guard` (surface policy and judges) and the sinks that receive every result (the review queue,
the result store, your own callable). :meth:`Citelock.answer` and :meth:`Citelock.aanswer` take only what
changes per request: the question, the chunks and a few overrides. :func:`answer` / :func:`aanswer` are thin
wrappers for a one-off call.

One call assembles the context, builds the per-request citation schema (downgrading it to fit the backend),
serializes and logs the prompt, generates, parses, runs the guard and renders the answer's citation markers.
Under a surface whose ``on_fail`` is ``drop_claim`` or ``mark`` the rendered answer omits the failing claims or
marks them ``(unverified: REASON)``. The result, :class:`GuardedAnswer`, is a record: the answer, the guard's
findings, what was removed or marked and why, the span policy actually used and why, and the generation's
accounting.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Collection, Generator, Iterable, Iterator, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from citelock._guarded import (
    GUARDED_ANSWER_SCHEMA_VERSION,
    GenerationStats,
    GuardedAnswer,
    guarded_answer_json_schema,
)

# the records live in their own module; they are part of this module's public names
from citelock._request import Prepared, Request, Runner, prepare
from citelock._steps import Step, arun_steps, run_steps, step
from citelock.backends._protocol import Backend
from citelock.constraint import DEFAULT_POLICY, SchemaOptions, SpanPolicy
from citelock.errors import UsageError
from citelock.guard import Guard, GuardResult, SurfacePolicy
from citelock.guard._abstain import ABSTENTION_TEXT as ABSTENTION_TEXT  # the text of an early abstention
from citelock.judges import Judge
from citelock.prompt import PromptTemplate
from citelock.records import (
    Chunk,
    Message,
)
from citelock.render import RenderStyle, require_style
from citelock.store import PromptLog, ResultStore, ReviewQueue
from citelock.telemetry._hook import answer_trace, stream_trace

if TYPE_CHECKING:
    from citelock.config import Config
    from citelock.stream import Done, OnDiverge, Show, StreamEvent
    from citelock.stream._drive import StreamJob

__all__ = [
    "GUARDED_ANSWER_SCHEMA_VERSION",
    "AnswerOptions",
    "Citelock",
    "GenerationStats",
    "GuardedAnswer",
    "Sink",
    "aanswer",
    "answer",
    "guarded_answer_json_schema",
]


Sink = ReviewQueue | ResultStore | Callable[["GuardedAnswer", GuardResult], None]
"""Where every guarded answer goes: a :class:`~citelock.store.ReviewQueue` (each finding is queued on the
surface), a :class:`~citelock.store.ResultStore` (the :class:`~citelock.GuardResult`, which metrics read), or
any callable ``(guarded_answer, guard_result) -> None`` (your logger, your metrics exporter)."""


class Citelock:
    """A configured client: build it once, answer many questions with it.

    Example:
        >>> from citelock import Citelock, Guard, SurfacePolicy
        >>> from citelock.store import PromptLog, ReviewQueue
        >>> client = Citelock(
        ...     backend="local",  # or any Backend: OpenAIBackend.from_client(openai.OpenAI(...)), ...
        ...     log=PromptLog("citelock.db"),
        ...     guard=Guard(SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")),
        ...     sinks=[ReviewQueue("citelock.db")],
        ... )  # doctest: +SKIP
        >>> result = client.answer("When did the bridge open?", chunks)  # doctest: +SKIP
        >>> result.decision, result.rendered  # doctest: +SKIP

    Args:
        backend: Any :class:`citelock.Backend`, or a backend name the registry knows
            (:data:`citelock.backends.BACKEND_NAMES`). None: a :class:`~citelock.backends.LocalBackend` with the
            bundled SmolLM2-135M-Instruct, created on first use and owned by this client (never shared
            process-wide).
        log: A :class:`~citelock.store.PromptLog`, or a SQLite path / database URL to open one (None: the prompts
            are not logged). Every prompt is appended exactly as sent, before generation.
        guard: The :class:`~citelock.Guard` run on every answer (None: ``Guard()``, the free checks only).
        sinks: Where every result goes (see :data:`Sink`). A queue or result store needs a guard with a
            surface policy (their rows are grouped by surface).
        policy: Requested span policy (``quote``, ``quote_sentence``, ``substring``, ``sentence``, ``id``);
            downgraded to fit the backend's limits, with the reason on the result. Ignored by backends that
            constrain nothing (naive).
        render: How citation markers appear in ``rendered``: ``footnotes``, ``links`` or ``none``.
        template: Prompt template; defaults to ``answer_structured`` (``answer_naive`` for free-text backends).
        max_chars: Character budget for the prompt (see :func:`citelock.assemble`).
        on_overflow: ``error`` or ``drop`` whole chunks when over budget.
        options: Bounds of the answer shape (:class:`citelock.SchemaOptions`).
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.

    Raises:
        UsageError: a backend that is not a Backend or an unknown name, a sink of the wrong kind, a queue or
            result store without a surface policy (all raised here, before anything is logged).
    """

    def __init__(
        self,
        backend: Backend | str | None = None,
        *,
        log: PromptLog | str | Path | None = None,
        guard: Guard | None = None,
        sinks: Iterable[Sink] = (),
        policy: SpanPolicy = DEFAULT_POLICY,
        render: RenderStyle = "footnotes",
        template: str | PromptTemplate | None = None,
        max_chars: int | None = None,
        on_overflow: Literal["error", "drop"] = "error",
        options: SchemaOptions | None = None,
        known_ids: Collection[str] | None = None,
    ) -> None:
        if isinstance(backend, str):
            from citelock.backends import make_backend

            backend = make_backend(backend)
        if backend is not None and not isinstance(backend, Backend):
            raise UsageError(
                f"backend must implement citelock.Backend (name, limits, generate) or be a backend name, "
                f"got {type(backend).__name__}"
            )
        if guard is not None and not isinstance(guard, Guard):
            raise UsageError(f"guard must be a citelock.Guard, got {type(guard).__name__}")
        guard = guard if guard is not None else Guard()
        sinks = tuple(sinks)
        for sink in sinks:
            if isinstance(sink, ReviewQueue | ResultStore):
                if guard.policy is None:
                    raise UsageError(
                        f"a {type(sink).__name__} sink groups results by surface: give the client "
                        "guard=Guard(SurfacePolicy(...))"
                    )
            elif not callable(sink):
                raise UsageError(
                    f"a sink must be a ReviewQueue, a ResultStore or a callable (answer, result), "
                    f"got {type(sink).__name__}"
                )
        require_style(render)
        self._backend = backend
        self.log = log if isinstance(log, PromptLog) or log is None else PromptLog(log)
        self.guard = guard
        self.sinks = sinks
        self.policy: SpanPolicy = policy
        self.render: RenderStyle = render
        self.template = template
        self.max_chars = max_chars
        self.on_overflow: Literal["error", "drop"] = on_overflow
        self.options = options
        self.known_ids = known_ids
        self._runner = Runner(self)  # the per-request runner (citelock._request), shared with wrap

    @property
    def backend(self) -> Backend:
        """The client's backend (the bundled local model is loaded on first use when none was given)."""
        if self._backend is None:
            from citelock.backends._local import LocalBackend

            self._backend = LocalBackend()
        return self._backend

    @classmethod
    def from_config(
        cls, config: Config | str | Path | None = None, *, surface: str | None = None, **overrides: Any
    ) -> Citelock:
        """A client for one surface of the config file (see :class:`citelock.Config`); keyword arguments win.

        The same constructor arguments a caller would pass: ``guard`` (the surface's policy and judges), ``log``
        (the store), ``sinks`` (the review queue and result store on it) and ``backend`` (``default_backend``).

        Args:
            config: A loaded :class:`~citelock.Config`, a file path, or None to discover one.
            surface: The surface (default: the config's ``default_surface``; with neither, the free checks).
            overrides: Constructor arguments that replace the config's (``backend=``, ``log=``, ``policy=``...).

        Raises:
            InputError: the config file is invalid (file, line and key named).
            UsageError: no such surface, or an argument the constructor rejects.
        """
        from citelock.config import Config, client_arguments

        loaded = config if isinstance(config, Config) else Config.load(config)
        return cls(**client_arguments(loaded, surface, overrides))

    def __repr__(self) -> str:
        backend = self._backend.name if self._backend is not None else "local (not loaded)"
        return f"Citelock(backend={backend!r}, guard={self.guard!r}, sinks={len(self.sinks)})"

    def answer(
        self,
        question: str,
        chunks: Iterable[Chunk | Mapping[str, Any]],
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        policy: SpanPolicy | None = None,
        max_tokens: int | None = None,
        render: RenderStyle | None = None,
        known_ids: Collection[str] | None = None,
        history: Iterable[Message | Mapping[str, Any]] | None = None,
    ) -> GuardedAnswer:
        """Answer ``question`` from ``chunks`` with citations constrained by construction and checked by the guard.

        Args:
            question: The user's question.
            chunks: Retrieved chunks, best first (records or dicts with ``id`` and ``text``).
            request_id: Request id to use (default: a fresh one).
            metadata: Values recorded on the logged prompt (user, trace ids).
            policy: This request's span policy (default: the client's).
            max_tokens: Token budget for generation; defaults to the schema's longest possible answer.
            render: This request's render style (default: the client's).
            known_ids: Ids of the whole chunk store for this request (default: the client's).
            history: Earlier turns of the conversation, oldest first, in the OpenAI shape
                (``{"role": "user" | "assistant", "content": ...}``): sent between the system prompt and this
                turn, and logged with it. Evidence is only this turn's ``chunks``: a span found only in an
                earlier turn is ``SPAN_ONLY_IN_HISTORY``, an id only an earlier turn carries is ``STALE_ID``.

        Returns:
            A :class:`GuardedAnswer`. ``ok`` is True when the decision is ``pass`` (served whole and clean);
            ``served`` is False when the guard blocked it; ``removed`` / ``marked`` say what was repaired.

        Raises:
            InputError: malformed chunks or history, an empty question, duplicate ids.
            BudgetExceededError: the prompt does not fit ``max_chars``.
            UsageError: no span policy fits the backend (assemble fewer chunks).
            ConstraintViolationError: a backend that claimed to constrain produced output outside the schema.
            UnparsedAnswerError: an unconstrained backend's output is not a parseable answer.
            TruncatedOutputError: generation hit ``max_tokens`` mid-answer (with the partial text).
            BackendError: the backend failed (typed: timeout, connection, HTTP status, refusal).
        """
        return run_steps(self._answering(Request.of(locals())))

    async def aanswer(
        self,
        question: str,
        chunks: Iterable[Chunk | Mapping[str, Any]],
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        policy: SpanPolicy | None = None,
        max_tokens: int | None = None,
        render: RenderStyle | None = None,
        known_ids: Collection[str] | None = None,
        history: Iterable[Message | Mapping[str, Any]] | None = None,
    ) -> GuardedAnswer:
        """The async :meth:`answer` (same arguments, same result).

        A backend with an ``async def agenerate(record, schema, *, max_tokens)`` method (see
        :class:`citelock.backends.AsyncBackend`) is awaited; any other backend, and the blocking steps (loading
        the default model, logging, guarding, persisting), run in a worker thread so the event loop is never
        blocked.
        """
        return await arun_steps(self._answering(Request.of(locals())))

    def _answering(self, request: Request) -> Generator[Step, Any, GuardedAnswer]:
        """:meth:`answer`'s work, once, for :meth:`answer` and :meth:`aanswer` (citelock._steps runs it).

        The blocking steps (loading the default model, assembling and logging, generating, guarding and
        persisting) are yielded: :meth:`aanswer` runs them in a worker thread, and awaits a backend's
        ``agenerate`` when it is a coroutine function.
        """
        backend: Backend = yield Step(lambda: self.backend)
        with answer_trace(request.question) as trace:  # spans per step when the otel extra is installed
            with trace.assembling() as assembled:  # the span observes the step; the step is ours
                prep: Prepared = assembled((yield step(self._prepare, request, backend)))
            generation = self._runner.abstention(prep, backend)  # None: generate (else abstain, no tokens spent)
            if generation is None:
                with trace.generating(prep.record, backend) as done:
                    generation = done((yield _generating(backend, prep)))
            guarded: GuardedAnswer = yield step(self._runner.finish, prep, generation, request)
            return guarded

    def stream(
        self,
        question: str,
        chunks: Iterable[Chunk | Mapping[str, Any]],
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        policy: SpanPolicy | None = None,
        max_tokens: int | None = None,
        render: RenderStyle | None = None,
        known_ids: Collection[str] | None = None,
        show: Show | None = None,
        on_diverge: OnDiverge | None = None,
        history: Iterable[Message | Mapping[str, Any]] | None = None,
    ) -> Iterator[StreamEvent | Done[GuardedAnswer]]:
        """:meth:`answer`, streamed: typed events as the answer is generated, every claim checked as it completes.

        Every event has a ``type``; the last is ``done`` and its ``.answer`` is the :class:`GuardedAnswer`
        :meth:`answer` returns for the same generation (and persists the same way). Judges run in worker threads
        while generation goes on (one declaring ``inline = True``, pure Python of microseconds, on this thread).
        Stop iterating (or ``close()``) to cancel: generation stops, the prompt log entry stays, and the claims
        checked so far reach the sinks with an ``ANSWER_TRUNCATED`` finding.

        Args:
            question: As for :meth:`answer` (so are ``chunks``, ``request_id``, ``metadata``, ``policy``,
                ``max_tokens``, ``render``, ``known_ids``).
            chunks: Retrieved chunks, best first.
            request_id: Request id to use.
            metadata: Values recorded on the logged prompt.
            policy: This request's span policy.
            max_tokens: Token budget for generation.
            render: This request's render style.
            known_ids: Ids of the whole chunk store.
            show: When a reader may see a claim (``immediately``, ``after_checks``, ``after_judge``). Default:
                ``after_judge`` on a high-stakes surface, ``immediately`` on a low-stakes one, ``after_checks``
                without a surface.
            on_diverge: On an unconstrained backend, what a citation that leaves the prompt mid-generation does:
                ``cut`` the stream (default where a failing claim blocks the answer) or ``continue`` without it.
            history: Earlier turns of the conversation, as for :meth:`answer` (sent and logged; a span found
                only there is ``SPAN_ONLY_IN_HISTORY``).

        Raises:
            TruncatedOutputError: the server cut the stream (the checked claims are persisted first).
            CitelockError: the other errors of :meth:`answer`, raised from the iterator.
        """
        from citelock.stream._drive import stream_events

        streamed = stream_trace()  # Citelock.answer's spans, across the caller's iteration (otel extra)
        with streamed.assembling() as assembled:
            job = assembled(self._stream_job(Request.of(locals())))
        events: Iterator[StreamEvent | Done[GuardedAnswer]] = streamed.events(job, stream_events)
        return events

    async def astream(
        self,
        question: str,
        chunks: Iterable[Chunk | Mapping[str, Any]],
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        policy: SpanPolicy | None = None,
        max_tokens: int | None = None,
        render: RenderStyle | None = None,
        known_ids: Collection[str] | None = None,
        show: Show | None = None,
        on_diverge: OnDiverge | None = None,
        history: Iterable[Message | Mapping[str, Any]] | None = None,
    ) -> AsyncIterator[StreamEvent | Done[GuardedAnswer]]:
        """The async :meth:`stream` (same arguments, same events): ``async for event in client.astream(...)``.

        The backend's ``astream`` is used when it has one (an ``AsyncOpenAI`` client), else its ``stream`` runs
        in a worker thread; ``aclose()`` or a cancelled task cancels generation as closing :meth:`stream` does.
        """
        from citelock.stream._drive import astream_events

        streamed = stream_trace()
        with streamed.assembling() as assembled:
            job = assembled(await asyncio.to_thread(self._stream_job, Request.of(locals())))
        async with aclosing(streamed.aevents(job, astream_events)) as events:
            async for event in events:  # closed with this generator: aclose() persists before it returns
                yield event

    def _stream_job(self, request: Request) -> StreamJob[GuardedAnswer]:
        backend = self.backend
        return self._runner.stream_job(self._prepare(request, backend), backend, request)

    def _prepare(self, request: Request, backend: Backend) -> Prepared:
        prep = prepare(
            request, backend, request.policy if request.policy is not None else self.policy,
            template=self.template, max_chars=self.max_chars, on_overflow=self.on_overflow, options=self.options,
            stakes=self.guard.policy.stakes if self.guard.policy is not None else None,
        )  # fmt: skip
        self._runner.log(prep.record)  # before generation: the prompt exactly as it is sent
        return prep


def _generating(backend: Backend, prep: Prepared) -> Step:
    """The generation step: ``backend.generate``, or its ``agenerate`` awaited when that is a coroutine function."""
    call = functools.partial(backend.generate, prep.record, prep.schema, max_tokens=prep.max_tokens)
    agenerate = getattr(backend, "agenerate", None)
    if agenerate is None or not inspect.iscoroutinefunction(agenerate):
        return Step(call)
    return Step(call, functools.partial(agenerate, prep.record, prep.schema, max_tokens=prep.max_tokens))


class AnswerOptions(TypedDict, total=False):
    """The options of the one-off :func:`answer` / :func:`aanswer` (each is described on :func:`answer`)."""

    backend: Backend | None
    policy: SpanPolicy
    log: PromptLog | str | Path | None
    render: RenderStyle
    template: str | PromptTemplate | None
    max_chars: int | None
    on_overflow: Literal["error", "drop"]
    max_tokens: int | None
    options: SchemaOptions | None
    known_ids: Collection[str] | None
    request_id: str | None
    metadata: Mapping[str, Any] | None
    surface: SurfacePolicy | None
    judge: Judge | None
    escalate: Judge | None
    queue: ReviewQueue | None
    results: ResultStore | None


_PER_REQUEST = ("request_id", "metadata", "max_tokens")


def _one_off(options: AnswerOptions) -> tuple[Citelock, dict[str, Any]]:
    """The client a one-off call builds, and the per-request arguments it passes on."""
    unknown = set(options) - set(AnswerOptions.__annotations__)
    if unknown:
        raise UsageError(
            f"unknown option(s) {sorted(unknown)}; expected some of {sorted(AnswerOptions.__annotations__)}"
        )
    config: dict[str, Any] = {k: v for k, v in options.items() if k not in _PER_REQUEST}
    request = {k: v for k, v in options.items() if k in _PER_REQUEST}
    surface = config.pop("surface", None)
    judge = config.pop("judge", None)
    escalate = config.pop("escalate", None)
    sinks: list[Sink] = [s for s in (config.pop("queue", None), config.pop("results", None)) if s is not None]
    if surface is None and (judge is not None or escalate is not None or sinks):
        raise UsageError("judge=, escalate=, queue= and results= take effect with surface=SurfacePolicy(...); pass one")
    guard = Guard(surface, judge, escalate=escalate) if surface is not None else Guard()
    return Citelock(config.pop("backend", None), guard=guard, sinks=sinks, **config), request


def answer(
    question: str, chunks: Iterable[Chunk | Mapping[str, Any]], **options: Unpack[AnswerOptions]
) -> GuardedAnswer:
    """One-off call: build a :class:`Citelock` from these options and answer one question with it.

    For more than one call, build a :class:`Citelock` once: this wrapper builds a new client (and, with
    ``backend=None``, loads the bundled model) on every call.

    Example:
        >>> result = citelock.answer("When did the bridge open?", chunks, policy="sentence")  # doctest: +SKIP
        >>> result.ok, result.span_policy, result.rendered  # doctest: +SKIP

    Args:
        question: The user's question.
        chunks: Retrieved chunks, best first (records or dicts with ``id`` and ``text``).
        backend: Any :class:`citelock.Backend`; None loads the embedded default (local SmolLM2-135M).
        policy: Requested span policy (see :class:`Citelock`).
        log: A :class:`citelock.PromptLog` or a database path/URL to append the prompt to (None: not logged).
        render: ``footnotes``, ``links`` or ``none``.
        template: Prompt template; defaults to ``answer_structured`` (``answer_naive`` for free-text backends).
        max_chars: Character budget for the prompt (see :func:`citelock.assemble`).
        on_overflow: ``error`` or ``drop`` whole chunks when over budget.
        max_tokens: Token budget for generation; defaults to the schema's longest possible answer.
        options: Bounds of the answer shape (:class:`citelock.SchemaOptions`).
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        request_id: Request id to use (default: a fresh one).
        metadata: Values recorded on the logged prompt (surface, user, trace ids).
        surface: Run the guard under this surface policy (``Guard(surface, judge, escalate=escalate)``).
        judge: The support judge for ``surface`` (default: :func:`citelock.judges.default_judge`).
        escalate: With ``surface``: a stronger judge for citations routed to ``review``.
        queue: With ``surface``: every finding is enqueued for review.
        results: With ``surface``: the result is stored for ``citelock metrics``.

    Returns:
        A :class:`GuardedAnswer` (see :meth:`Citelock.answer`).

    Raises:
        UsageError: options that do not fit together, raised before anything is logged; and everything
            :meth:`Citelock.answer` raises.
    """
    client, request = _one_off(options)
    return client.answer(question, chunks, **request)


async def aanswer(
    question: str, chunks: Iterable[Chunk | Mapping[str, Any]], **options: Unpack[AnswerOptions]
) -> GuardedAnswer:
    """The async one-off call (same arguments as :func:`answer`; see :meth:`Citelock.aanswer`)."""
    client, request = await asyncio.to_thread(_one_off, options)
    return await client.aanswer(question, chunks, **request)
