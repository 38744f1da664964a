"""Driving a guarded stream, sync and async: pull deltas from the backend, push them through a :class:`Session`.

A backend with ``stream`` / ``astream`` (:class:`~citelock.backends.StreamingBackend`) hands over its output
delta by delta; any other backend's whole output arrives as one step, with the same events. The caller (the
pipeline) passes two functions: ``finish(generation, guard)``, the whole answer's guarded result exactly as
``Citelock.answer`` builds and persists it, and ``finish_partial(generation, answer, guard, finding)``, the
result of a stream that stopped early (cancelled by its consumer, cut at a divergence, or cut by the server),
persisted with an ``ANSWER_TRUNCATED`` finding (also when the backend raises ``ConstraintViolationError``
mid-stream, which then propagates). Generation stops as soon as the consumer stops iterating.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from citelock.backends._protocol import Backend, Generation, stream_in_thread
from citelock.constraint._schema import CitationSchema
from citelock.errors import ConstraintViolationError, TruncatedOutputError
from citelock.guard import Guard
from citelock.records import Answer, Finding, Layer, PromptRecord, ReasonCode
from citelock.stream._events import Done
from citelock.stream._session import Event, Session

__all__ = ["StreamJob", "astream_events", "stream_events"]

A = TypeVar("A")


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


def _stopped(job: StreamJob[A], started: float, first: float | None, finish: str, why: str) -> A:
    generation = _partial_generation(job, started, first, finish)
    return job.finish_partial(generation, job.session.partial_answer(), job.session.guard, _truncation(job, why))


def stream_events(job: StreamJob[A]) -> Iterator[Event | Done[A]]:
    """The events of one guarded stream (sync).

    Closing the iterator cancels generation and persists the claims checked so far with an ``ANSWER_TRUNCATED``
    finding.
    """
    session = job.session
    started = time.perf_counter()
    first: float | None = None
    source = _deltas(job)
    generation: Generation | None = None
    settled = False
    try:
        try:
            for item in source:
                if isinstance(item, Generation):
                    generation = item
                    break
                first = first if first is not None else time.perf_counter() - started
                yield from session.step(item)
                yield from session.poll()
                if session.cut is not None:
                    break
        except TruncatedOutputError:
            settled = True
            _stopped(job, started, first, "truncated", "the server cut the stream")
            raise
        except ConstraintViolationError:
            settled = True
            _stopped(job, started, first, "failed", "the constraint failed mid-decode")
            raise
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
        if session.cut is not None:
            yield from session.drain()
            settled = True
            answer = _stopped(job, started, first, "diverged", f"a citation diverged ({session.cut.reason})")
            yield Done[A](answer=answer, cut=True)
            return
        yield from session.end()
        yield from session.drain()
        if generation is None:
            raise TruncatedOutputError(
                "the backend stream ended without its generation",
                partial=session.text,
                max_tokens=job.max_tokens,
                provider=job.backend.name,
            )
        settled = True
        try:
            whole = job.finish(generation, session.guard)
        except TruncatedOutputError:  # max_tokens cut the answer: persist what was checked, as a server cut does
            _stopped(job, started, first, "length", "generation stopped at max_tokens")
            raise
        yield Done[A](answer=whole)
    finally:
        if not settled:
            settled = True
            session.close()
            _stopped(job, started, first, "cancelled", "the consumer stopped reading the stream")
        session.close()


async def astream_events(job: StreamJob[A]) -> AsyncIterator[Event | Done[A]]:
    """:func:`stream_events` for async code.

    The backend's ``astream`` (or its ``stream`` in a worker thread), judges in worker threads, the final guard
    and persistence off the event loop. ``aclose()`` (or a cancelled task) cancels generation and persists what
    was checked, as closing the sync stream does.
    """
    session = job.session
    started = time.perf_counter()
    first: float | None = None
    source = _adeltas(job)
    generation: Generation | None = None
    settled = False
    try:
        try:
            async for item in source:
                if isinstance(item, Generation):
                    generation = item
                    break
                first = first if first is not None else time.perf_counter() - started
                for event in [*session.step(item), *session.poll()]:
                    yield event
                if session.cut is not None:
                    break
        except TruncatedOutputError:
            settled = True
            await asyncio.to_thread(_stopped, job, started, first, "truncated", "the server cut the stream")
            raise
        except ConstraintViolationError:
            settled = True
            await asyncio.to_thread(_stopped, job, started, first, "failed", "the constraint failed mid-decode")
            raise
        finally:
            await source.aclose()
        if session.cut is not None:
            for event in await asyncio.to_thread(lambda: list(session.drain())):
                yield event
            settled = True
            why = f"a citation diverged ({session.cut.reason})"
            answer = await asyncio.to_thread(_stopped, job, started, first, "diverged", why)
            yield Done[A](answer=answer, cut=True)
            return
        for event in session.end():
            yield event
        for event in await asyncio.to_thread(lambda: list(session.drain())):
            yield event
        if generation is None:
            raise TruncatedOutputError(
                "the backend stream ended without its generation",
                partial=session.text,
                max_tokens=job.max_tokens,
                provider=job.backend.name,
            )
        settled = True
        final = generation
        try:
            whole = await asyncio.to_thread(job.finish, final, session.guard)
        except TruncatedOutputError:
            await asyncio.to_thread(_stopped, job, started, first, "length", "generation stopped at max_tokens")
            raise
        yield Done[A](answer=whole)
    finally:
        if not settled:
            # Cancelled: persist synchronously, so nothing is left half-written even if the loop is closing.
            session.close()
            _stopped(job, started, first, "cancelled", "the consumer stopped reading the stream")
        session.close()
