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
import inspect
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

# the records live in their own module; they are part of this module's public names
from citelock._guarded import (
    GUARDED_ANSWER_SCHEMA_VERSION,
    GenerationStats,
    GuardedAnswer,
    guarded_answer_json_schema,
)
from citelock.backends._protocol import Backend
from citelock.constraint import DEFAULT_POLICY, CitationSchema, SchemaOptions, SpanPolicy, fit_schema
from citelock.errors import ParseError, TruncatedOutputError, UnparsedAnswerError, UsageError
from citelock.guard import Guard, GuardResult, SurfacePolicy
from citelock.guard._abstain import ABSTAIN_NOTE, ABSTENTION_TEXT, Abstaining, early_abstention
from citelock.guard._ranked import rank_request
from citelock.judges import Judge
from citelock.prompt import PromptTemplate, assemble, parse_answer, serialize
from citelock.prompt._serialize import with_history
from citelock.records import (
    Answer,
    Chunk,
    Context,
    Finding,
    Generation,
    Message,
    PromptRecord,
)
from citelock.render import RenderStyle, render_answer, require_style
from citelock.store import PromptLog, ResultStore, ReviewQueue
from citelock.telemetry._hook import answer_trace, stream_trace, trace_metadata

if TYPE_CHECKING:
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

NAIVE_MAX_TOKENS = 384

Sink = ReviewQueue | ResultStore | Callable[["GuardedAnswer", GuardResult], None]
"""Where every guarded answer goes: a :class:`~citelock.store.ReviewQueue` (each finding is queued on the
surface), a :class:`~citelock.store.ResultStore` (the :class:`~citelock.GuardResult`, which metrics read), or
any callable ``(guarded_answer, guard_result) -> None`` (your logger, your metrics exporter)."""


@dataclass(frozen=True)
class _Prepared:
    context: Context
    record: PromptRecord
    schema: CitationSchema | None
    schema_build_ms: float | None
    requested: SpanPolicy | None
    template: str
    max_tokens: int


def _prepare(
    question: str,
    chunks: Iterable[Chunk | Mapping[str, Any]],
    backend: Backend,
    policy: SpanPolicy,
    *,
    log: PromptLog | str | Path | None,
    template: str | PromptTemplate | None,
    max_chars: int | None,
    on_overflow: Literal["error", "drop"],
    max_tokens: int | None,
    options: SchemaOptions | None,
    request_id: str | None,
    metadata: Mapping[str, Any] | None,
    history: Iterable[Message | Mapping[str, Any]] | None = None,
) -> _Prepared:
    constrains = backend.limits.constrains
    tmpl = template if template is not None else ("answer_structured" if constrains else "answer_naive")
    context = assemble(question, chunks, template=tmpl, max_chars=max_chars, on_overflow=on_overflow)
    # the slot ranking hook (issue #35): chunks best first, the grammar admits only the top sentences
    ranked = rank_request(context, policy if constrains else None)
    if ranked is not None:
        context = assemble(question, ranked.chunks, template=tmpl, max_chars=max_chars, on_overflow=on_overflow)
    schema: CitationSchema | None = None
    build_ms: float | None = None
    if constrains:
        started = perf_counter()
        schema = fit_schema(context, policy, backend.limits, options, ranked.admitted if ranked else None)
        build_ms = (perf_counter() - started) * 1000
    meta = {**trace_metadata(), **(metadata or {})}  # the trace it was answered in, for later audits
    meta.setdefault("backend", backend.name)
    meta["span_policy"] = schema.policy if schema is not None else None
    if schema is not None and schema.downgrade_reason:
        meta["downgrade_reason"] = schema.downgrade_reason
    record = serialize(context, template=tmpl, request_id=request_id, metadata=meta)
    if history is not None:
        record = with_history(record, history)  # [system, *history, user]: the whole conversation as sent
    if log is not None:
        (log if isinstance(log, PromptLog) else PromptLog(log)).append(record)
    if max_tokens is None:
        max_tokens = schema.max_output_chars() if schema is not None else NAIVE_MAX_TOKENS
    if max_tokens < 1:
        raise UsageError(f"max_tokens must be positive, got {max_tokens}")
    name = f"{record.template.name}.v{record.template.version}"
    return _Prepared(context, record, schema, build_ms, policy if constrains else None, name, max_tokens)


def _parse(prep: _Prepared, generation: Generation) -> Answer:
    record, schema = prep.record, prep.schema
    if schema is not None and generation.enforced:
        if generation.finish_reason == "length":
            raise TruncatedOutputError(
                f"request {record.request_id}: generation stopped at max_tokens={prep.max_tokens} before the "
                f"constrained answer was complete; raise max_tokens (the schema allows up to "
                f"{schema.max_output_chars()} characters) or lower the SchemaOptions bounds",
                partial=generation.text,
                max_tokens=prep.max_tokens,
                provider=generation.backend,
                citelock_request_id=record.request_id,
            )
        return schema.parse_output(generation.text)  # ConstraintViolationError if the constraint broke
    try:
        return parse_answer(generation.text)
    except ParseError as exc:
        raise UnparsedAnswerError(str(exc), record=record, generation=generation, where=exc.where) from None


def _stats(prep: _Prepared, generation: Generation) -> GenerationStats:
    speed = None
    if generation.completion_tokens and generation.latency_s > 0:
        decode_s = generation.latency_s - (generation.first_token_s or 0.0)
        speed = generation.completion_tokens / decode_s if decode_s > 0 else None
    return GenerationStats(
        enforced=generation.enforced,
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        latency_s=generation.latency_s,
        first_token_s=generation.first_token_s,
        tokens_per_s=speed,
        finish_reason=generation.finish_reason,
        schema_build_ms=prep.schema_build_ms,
        max_tokens=prep.max_tokens,
        notes=generation.notes,
    )


def _guarded(
    prep: _Prepared, generation: Generation, parsed: Answer, result: GuardResult, render: RenderStyle
) -> GuardedAnswer:
    record, schema = prep.record, prep.schema
    report = result.report
    early = ABSTAIN_NOTE in generation.notes
    # Rendering drops or marks claims only when the answer is served (a blocked one is shown whole).
    outcomes = result.claims if result.decision != "block" else None
    return GuardedAnswer(
        request_id=record.request_id,
        question=prep.context.question,
        answer=parsed,
        result=result,
        span_policy=schema.policy if schema is not None else None,
        requested_policy=prep.requested,
        downgrade_reason=schema.downgrade_reason if schema is not None else None,
        backend=generation.backend,
        model=generation.model,
        template=prep.template,
        prompt_sha256=record.sha256,
        dropped_chunks=prep.context.dropped,
        generation=_stats(prep, generation),
        render_style=render,
        rendered=ABSTENTION_TEXT
        if early
        else render_answer(parsed, report, prep.context, style=render, outcomes=outcomes),
    )


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

    @property
    def backend(self) -> Backend:
        """The client's backend (the bundled local model is loaded on first use when none was given)."""
        if self._backend is None:
            from citelock.backends._local import LocalBackend

            self._backend = LocalBackend()
        return self._backend

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
        style = self._style(render)
        backend = self.backend
        with answer_trace(question) as trace:  # spans per step when the otel extra is installed
            prep = trace.assemble(
                self._prepare, question, chunks, backend, policy, max_tokens, request_id, metadata, history
            )
            early = early_abstention(self.guard, prep.context, backend)
            if early is not None:  # nothing relevant was assembled: abstain, no tokens spent
                return self._finish(prep, early, style, known_ids)
            with trace.generating(prep.record, backend) as done:
                generation = done(backend.generate(prep.record, prep.schema, max_tokens=prep.max_tokens))
            return self._finish(prep, generation, style, known_ids)

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
        style = self._style(render)
        backend = await asyncio.to_thread(lambda: self.backend)
        with answer_trace(question) as trace:
            prep = await asyncio.to_thread(
                trace.assemble,
                self._prepare,
                question,
                chunks,
                backend,
                policy,
                max_tokens,
                request_id,
                metadata,
                history,
            )
            early = early_abstention(self.guard, prep.context, backend)
            if early is not None:
                return await asyncio.to_thread(self._finish, prep, early, style, known_ids)
            agenerate = getattr(backend, "agenerate", None)
            with trace.generating(prep.record, backend) as done:
                if agenerate is not None and inspect.iscoroutinefunction(agenerate):
                    generation = done(await agenerate(prep.record, prep.schema, max_tokens=prep.max_tokens))
                else:
                    generation = done(
                        await asyncio.to_thread(backend.generate, prep.record, prep.schema, max_tokens=prep.max_tokens)
                    )
            return await asyncio.to_thread(self._finish, prep, generation, style, known_ids)

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
        while generation goes on. Stop iterating (or ``close()``) to cancel: generation stops, the prompt log
        entry stays, and the claims checked so far reach the sinks with an ``ANSWER_TRUNCATED`` finding.

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
        job = streamed.assemble(
            self._stream_job,
            question,
            chunks,
            request_id,
            metadata,
            policy,
            max_tokens,
            render,
            known_ids,
            show,
            on_diverge,
            history,
        )
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
        job = await asyncio.to_thread(
            streamed.assemble,
            self._stream_job,
            question,
            chunks,
            request_id,
            metadata,
            policy,
            max_tokens,
            render,
            known_ids,
            show,
            on_diverge,
            history,
        )
        async for event in streamed.aevents(job, astream_events):
            yield event

    def _stream_job(
        self,
        question: str,
        chunks: Iterable[Chunk | Mapping[str, Any]],
        request_id: str | None,
        metadata: Mapping[str, Any] | None,
        policy: SpanPolicy | None,
        max_tokens: int | None,
        render: RenderStyle | None,
        known_ids: Collection[str] | None,
        show: Show | None,
        on_diverge: OnDiverge | None,
        history: Iterable[Message | Mapping[str, Any]] | None = None,
    ) -> StreamJob[GuardedAnswer]:
        style = self._style(render)
        backend = self.backend
        prep = self._prepare(question, chunks, backend, policy, max_tokens, request_id, metadata, history)
        early = early_abstention(self.guard, prep.context, backend)
        if early is not None:  # nothing relevant was assembled: the stream is the abstention, no tokens spent
            return self._job(prep, Abstaining(backend.name, backend.limits, early), style, known_ids, show, on_diverge)
        return self._job(prep, backend, style, known_ids, show, on_diverge)

    def _job(
        self,
        prep: _Prepared,
        backend: Backend,
        style: RenderStyle,
        known_ids: Collection[str] | None,
        show: Show | None,
        on_diverge: OnDiverge | None,
    ) -> StreamJob[GuardedAnswer]:
        """The stream of a prepared request over ``backend`` (also the wrapped client's ``stream=True`` call)."""
        from citelock.stream._drive import StreamJob
        from citelock.stream._session import Session, default_on_diverge, default_show, memo_guard

        scope = known_ids if known_ids is not None else self.known_ids
        session = Session(
            record=prep.record,
            guard=memo_guard(self.guard),
            show=show if show is not None else default_show(self.guard),
            on_diverge=on_diverge if on_diverge is not None else default_on_diverge(self.guard),
            free_text=prep.schema is None,
            span_policy=prep.schema.policy if prep.schema is not None else None,
            known_ids=scope,
        )

        def finish(generation: Generation, guard: Guard) -> GuardedAnswer:
            return self._finish(prep, generation, style, scope, guard=guard)

        def finish_partial(generation: Generation, parsed: Answer, guard: Guard, cut: Finding) -> GuardedAnswer:
            result = guard.run(prep.record, parsed, known_ids=scope)
            findings = (*result.report.findings, cut)
            report = result.report.model_copy(update={"findings": findings, "ok": False})
            result = result.model_copy(update={"report": report, "decision": "block"})
            return self._deliver(_guarded(prep, generation, parsed, result, style), result)

        return StreamJob(backend, prep.record, prep.schema, prep.max_tokens, session, finish, finish_partial)

    def _style(self, render: RenderStyle | None) -> RenderStyle:
        style = render if render is not None else self.render
        require_style(style)
        return style

    def _prepare(
        self,
        question: str,
        chunks: Iterable[Chunk | Mapping[str, Any]],
        backend: Backend,
        policy: SpanPolicy | None,
        max_tokens: int | None,
        request_id: str | None,
        metadata: Mapping[str, Any] | None,
        history: Iterable[Message | Mapping[str, Any]] | None = None,
    ) -> _Prepared:
        return _prepare(
            question, chunks, backend, policy if policy is not None else self.policy, log=self.log,
            template=self.template, max_chars=self.max_chars, on_overflow=self.on_overflow,
            max_tokens=max_tokens, options=self.options, request_id=request_id, metadata=metadata,
            history=history,
        )  # fmt: skip

    def _finish(
        self,
        prep: _Prepared,
        generation: Generation,
        render: RenderStyle,
        known_ids: Collection[str] | None,
        *,
        guard: Guard | None = None,
    ) -> GuardedAnswer:
        parsed = _parse(prep, generation)
        run = guard if guard is not None else self.guard
        result = run.run(prep.record, parsed, known_ids=known_ids if known_ids is not None else self.known_ids)
        if ABSTAIN_NOTE in generation.notes:
            result = result.model_copy(update={"abstention": "pipeline"})
        return self._deliver(_guarded(prep, generation, parsed, result, render), result)

    def _deliver(self, guarded: GuardedAnswer, result: GuardResult) -> GuardedAnswer:
        for sink in self.sinks:
            if isinstance(sink, ReviewQueue):
                sink.enqueue_result(result)
            elif isinstance(sink, ResultStore):
                sink.append(result)
            else:
                sink(guarded, result)
        return guarded


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
