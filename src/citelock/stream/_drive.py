"""Driving a guarded stream, sync and async: pull deltas from the backend, push them through a :class:`StreamRun`.

:class:`StreamRun` is the stream's logic without I/O (after pydantic-ai's parts manager): it takes the backend's
items and returns events, and decides how the stream ends. The sync and async loops around it
(:func:`stream_events`, :func:`astream_events`) only move items in and events out; they differ in ``for`` /
``async for`` and in running the blocking steps (judges still running, the final guard, persistence) in a worker
thread.

A backend with ``stream`` / ``astream`` (:class:`~citelock.backends.StreamingBackend`) hands over its output
delta by delta; any other backend's whole output arrives as one step, with the same events. The caller (the
pipeline) passes two functions: ``finish(generation, guard)``, the whole answer's guarded result exactly as
``Citelock.answer`` builds and persists it, and ``finish_partial(generation, answer, guard, finding)``, the
result of a stream that stopped early, persisted with an ``ANSWER_TRUNCATED`` finding.

The stream's contract, on every ending:

- done: the result is persisted, then every claim on screen that it does not serve is retracted, then ``done``;
- cut at a divergence: the checked claims are persisted (blocked), the claims on screen retracted, ``done`` with
  ``cut=True``;
- an error (the server cut the stream, the constraint failed, output beyond the schema's bounds,
  output that does not parse): the checked claims are persisted, the claims on screen retracted, then the error
  is raised;
- cancelled (the consumer closed the stream, or a task was cancelled): the checked claims are persisted before
  ``close()`` / ``aclose()`` returns.

Generation stops as soon as the consumer stops iterating.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from citelock.backends._protocol import Backend, Generation, stream_in_thread
from citelock.constraint._schema import CitationSchema
from citelock.errors import CitelockError, ConstraintViolationError, ModelOutputError, TruncatedOutputError
from citelock.guard import Guard, GuardResult
from citelock.records import Answer, Finding, Layer, PromptRecord, ReasonCode
from citelock.stream._events import Done
from citelock.stream._session import Event, Session

__all__ = ["StreamJob", "StreamObserver", "StreamRun", "astream_events", "stream_events"]

_DONE: Any = Done[Any]  # parametrized once: pydantic builds a generic model class on each subscript it has not kept


class StreamObserver(Protocol):
    """What watches a stream from outside (telemetry): it is told when the finishing step runs, never runs it."""

    def finishing(self, record: PromptRecord, generation: Generation) -> AbstractContextManager[None]:
        """A context the finishing step (the final guard and persistence) runs in."""
        ...


class _Guarded(Protocol):
    """What the driver reads of a finished answer: its guard result (to settle the screen)."""

    @property
    def result(self) -> GuardResult: ...


A = TypeVar("A", bound=_Guarded)


@dataclass
class StreamJob(Generic[A]):
    """Everything one stream needs, prepared by the pipeline."""

    backend: Backend
    record: PromptRecord
    schema: CitationSchema | None
    max_tokens: int
    session: Session
    finish: Callable[[Generation, Guard], A]
    finish_partial: Callable[[Generation, Answer, Guard, Finding], A]


def _deltas(job: StreamJob[Any]) -> Iterator[str | Generation]:
    stream = getattr(job.backend, "stream", None)
    if callable(stream):
        return iter(stream(job.record, job.schema, max_tokens=job.max_tokens))
    return _one_step(job.backend.generate(job.record, job.schema, max_tokens=job.max_tokens))


def _one_step(generation: Generation) -> Iterator[str | Generation]:
    yield generation.text
    yield generation


async def _adeltas(job: StreamJob[Any]) -> AsyncGenerator[str | Generation, None]:
    backend = job.backend
    astream = getattr(backend, "astream", None)
    transport = getattr(backend, "transport", None)
    if callable(astream) and getattr(transport, "is_async", True):
        async for item in astream(job.record, job.schema, max_tokens=job.max_tokens):
            yield item
        return
    agenerate = getattr(backend, "agenerate", None)
    if (
        not callable(getattr(backend, "stream", None))
        and agenerate is not None
        and inspect.iscoroutinefunction(agenerate)
    ):
        generation = await agenerate(job.record, job.schema, max_tokens=job.max_tokens)
        for item in _one_step(generation):
            yield item
        return
    async for item in stream_in_thread(lambda: _deltas(job)):
        yield item


def _truncation(job: StreamJob[Any], why: str) -> Finding:
    session = job.session
    return Finding(
        request_id=job.record.request_id,
        prompt_sha256=job.record.sha256,
        reason=ReasonCode.ANSWER_TRUNCATED,
        layer=Layer.COVERAGE,
        claim_index=-1,
        claim="",
        detail=(
            f"{why} after {session.tokens} deltas: {len(session.checked)} complete claim(s) checked, the rest "
            "never generated"
        ),
        verdicts={"coverage": "fail"},
    )


def _partial_generation(job: StreamJob[Any], started: float, first: float | None, finish: str) -> Generation:
    backend = job.backend
    return Generation(
        text=job.session.text,
        backend=backend.name,
        model=str(getattr(backend, "model_label", None) or getattr(backend, "model", backend.name)),
        enforced=False,
        completion_tokens=job.session.tokens,
        latency_s=time.perf_counter() - started,
        first_token_s=first,
        finish_reason=finish,
        notes=(f"stream stopped early ({finish}) after {job.session.tokens} deltas",),
    )


class StreamRun(Generic[A]):
    """One stream's logic without I/O: the backend's items in, events out, and how the stream ends.

    ``feed`` takes each text delta, ``conclude`` the end of generation (or of the cut), ``failed`` an error raised
    while reading the backend, ``cancel`` a consumer that stopped reading. ``conclude`` and ``failed`` block
    (judges, the final guard, persistence): the async loop runs them in a worker thread.
    """

    def __init__(self, job: StreamJob[A], observer: StreamObserver | None = None) -> None:
        self.job = job
        self.observer = observer
        self.session = job.session
        self.started = time.perf_counter()
        self.first: float | None = None
        self.generation: Generation | None = None
        self.settled = False
        self.halted = False  # stop reading the backend: its generation arrived, or the session cut the stream

    @property
    def stopped(self) -> bool:
        """The session cut the stream (a divergence, or output beyond the schema's bounds): stop reading."""
        return self.session.cut is not None or self.session.over is not None

    def feed(self, item: str | Generation) -> list[Event]:
        """One item from the backend: a text delta's events; the final generation is kept (no events)."""
        if item.__class__ is not str and isinstance(item, Generation):
            self.generation = item
            self.halted = True
            return []
        if self.first is None:
            self.first = time.perf_counter() - self.started
        session = self.session
        events = session.step(item)
        if session.judged:
            events = [*events, *session.poll()]  # a new list: a quiet step's is shared
        if events or session.over is not None:  # a cut comes with its event; the bounds with none
            self.halted = self.stopped
        return events

    def failed(self, exc: CitelockError) -> list[Event]:
        """The backend raised while streaming: persist what was checked; the retractions (then re-raise)."""
        if isinstance(exc, TruncatedOutputError):
            return self._stop("truncated", "the server cut the stream")
        if isinstance(exc, ConstraintViolationError):
            return self._stop("failed", "the constraint failed mid-decode")
        if isinstance(exc, ModelOutputError):
            return self._stop("failed", f"the output failed mid-decode ({type(exc).__name__})")
        return self._stop("failed", f"the backend failed mid-stream ({type(exc).__name__})")

    def conclude(self) -> tuple[list[Event], CitelockError | None]:
        """Generation ended (or was cut): the remaining events, and the error to raise after them, if any."""
        session = self.session
        if session.cut is not None:
            out = list(session.drain())
            why = f"a citation diverged ({session.cut.reason})"
            answer = self._persist("diverged", why)
            return [*out, *session.settle(answer.result), _DONE(answer=answer, cut=True)], None
        if session.over is not None:
            out = list(session.drain())
            over = session.over
            why = f"the output went beyond the schema's bound of {over.limit} {over.bound} ({over.got} arrived)"
            return [*out, *self._stop("bounds", why)], over
        out = [*session.end(), *session.drain()]
        if self.generation is None:
            error = TruncatedOutputError(
                "the backend stream ended without its generation",
                partial=session.text,
                max_tokens=self.job.max_tokens,
                provider=self.job.backend.name,
            )
            return [*out, *self._stop("truncated", "the backend stream ended without its generation")], error
        self.settled = True
        try:
            with self._finishing(self.generation):
                whole = self.job.finish(self.generation, session.guard)
        except TruncatedOutputError as exc:  # max_tokens cut the answer: persist what was checked, as a cut does
            return [*out, *self._stop("length", "generation stopped at max_tokens")], exc
        except ModelOutputError as exc:  # the whole output does not parse (or breaks the schema)
            return [*out, *self._stop("failed", f"the output is not a usable answer ({type(exc).__name__})")], exc
        return [*out, *session.settle(whole.result), _DONE(answer=whole)], None

    def cancel(self) -> None:
        """The consumer stopped reading (or the stream raised something else): persist what was checked, once."""
        if not self.settled:
            self.session.close()
            self._persist("cancelled", "the consumer stopped reading the stream")
        self.session.close()

    def _stop(self, finish: str, why: str) -> list[Event]:
        return self.session.settle(self._persist(finish, why).result)

    def _persist(self, finish: str, why: str) -> A:
        self.settled = True
        job = self.job
        generation = _partial_generation(job, self.started, self.first, finish)
        with self._finishing(generation):
            return job.finish_partial(
                generation, job.session.partial_answer(), job.session.guard, _truncation(job, why)
            )

    def _finishing(self, generation: Generation) -> AbstractContextManager[None]:
        return self.observer.finishing(self.job.record, generation) if self.observer is not None else nullcontext()


def stream_events(job: StreamJob[A], observer: StreamObserver | None = None) -> Iterator[Event | Done[A]]:
    """The events of one guarded stream (sync).

    Closing the iterator cancels generation and persists the claims checked so far with an ``ANSWER_TRUNCATED``
    finding.
    """
    run = StreamRun(job, observer)
    source = _deltas(job)
    session = run.session
    try:
        try:
            feed, step = run.feed, session.step
            for item in source:
                if item.__class__ is str and run.first is not None and not (session.threaded and session.judged):
                    # the usual delta, what feed() does without its layer: most have no events
                    events = step(item)
                    if events or session.over is not None:
                        run.halted = run.stopped
                        yield from events
                else:
                    events = feed(item)
                    if events:
                        yield from events
                if run.halted:
                    break
        except CitelockError as exc:
            yield from run.failed(exc)
            raise
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
        events, error = run.conclude()
        yield from events
        if error is not None:
            raise error
    finally:
        run.cancel()


async def astream_events(job: StreamJob[A], observer: StreamObserver | None = None) -> AsyncIterator[Event | Done[A]]:
    """:func:`stream_events` for async code.

    The backend's ``astream`` (or its ``stream`` in a worker thread), judges in worker threads, the final guard
    and persistence off the event loop. ``aclose()`` (or a cancelled task) cancels generation and persists what
    was checked before it returns, as closing the sync stream does.
    """
    run = StreamRun(job, observer)
    source = _adeltas(job)
    try:
        try:
            async for item in source:
                for event in run.feed(item):
                    yield event
                if run.halted:
                    break
        except CitelockError as exc:
            for event in await asyncio.to_thread(run.failed, exc):
                yield event
            raise
        finally:
            await source.aclose()
        events, error = await asyncio.to_thread(run.conclude)
        for event in events:
            yield event
        if error is not None:
            raise error
    finally:
        run.cancel()  # synchronous: nothing is left half-written even if the loop is closing
