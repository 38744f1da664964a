"""The answer's spans: ``citelock.answer`` and its steps, for one call or one streamed answer.

``citelock.answer`` (one :meth:`citelock.Citelock.answer` call, or a wrapped call) with its steps:
``citelock.assemble`` (``gen_ai.retrieval.documents``: the assembled chunks), ``chat {model}`` (kind CLIENT:
``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.response.finish_reasons``,
``gen_ai.response.id``), then the guard span (:mod:`._guard_spans`), which evaluates the ``chat`` span. The
spans observe the steps: the pipeline runs them, never this module.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, closing, contextmanager
from typing import Any, TypeVar

from opentelemetry import context, trace
from opentelemetry.trace import Span, SpanContext, SpanKind

from citelock._around import Around
from citelock.records import PromptRecord
from citelock.telemetry._events import Attributes
from citelock.telemetry._tracing import ANSWER, EVALUATED, tracer

__all__ = ["StreamTrace", "answer_trace", "stream_trace"]

_T = TypeVar("_T")


def _documents(record: PromptRecord) -> str:
    docs: list[dict[str, Any]] = []
    for placed in record.chunks:
        doc: dict[str, Any] = {"id": placed.chunk.id}
        score = placed.chunk.metadata.get("score")
        if isinstance(score, int | float) and not isinstance(score, bool):
            doc["score"] = float(score)
        if placed.chunk.rank is not None:
            doc["rank"] = placed.chunk.rank
        doc["status"] = placed.status
        docs.append(doc)
    return json.dumps(docs, separators=(",", ":"))


class _AnswerTrace:
    """The steps of one ``Citelock.answer`` call, each a child span of ``citelock.answer``."""

    def __init__(self, span: Span) -> None:
        self.span = span

    @contextmanager
    def assembling(self) -> Iterator[Callable[[_T], _T]]:
        """The ``citelock.assemble`` span around the caller's own step; ``done(prepared)`` records what it made."""
        with tracer().start_as_current_span(
            "citelock.assemble", attributes={"gen_ai.operation.name": "citelock.assemble"}
        ) as span:

            def done(prepared: _T) -> _T:
                record = _record_of(prepared)
                if record is not None and span.is_recording():
                    span.set_attribute("gen_ai.retrieval.documents", _documents(record))
                    span.set_attribute("citelock.request_id", record.request_id)
                    span.set_attribute("citelock.template", f"{record.template.name}.v{record.template.version}")
                    self.span.set_attribute("citelock.request_id", record.request_id)
                return prepared

            yield done

    @contextmanager
    def generating(self, record: PromptRecord, backend: Any) -> Iterator[Callable[[_T], _T]]:
        span = _chat_span(backend, None)
        response: list[str] = []
        with trace.use_span(span, end_on_exit=True):

            def done(generation: _T) -> _T:
                response[:] = [_generation_attributes(span, record, generation)]
                return generation

            try:
                yield done
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise
        # the guard that follows evaluates this generation
        EVALUATED.set((span.get_span_context(), response[0] if response else record.request_id))


def _record_of(prepared: Any) -> PromptRecord | None:
    """The logged prompt of a prepared request (the pipeline's, or a wrapped call's, which holds the pipeline's)."""
    for candidate in (prepared, getattr(prepared, "prepared", None)):
        record = getattr(candidate, "record", None)
        if isinstance(record, PromptRecord):
            return record
    return None


def _chat_span(backend: Any, parent: context.Context | None) -> Span:
    """The ``chat {model}`` CLIENT span of one generation (not made current here)."""
    model = _requested_model(backend)
    attributes: Attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": str(backend.name)}
    if isinstance(model, str):
        attributes["gen_ai.request.model"] = model
    name = f"chat {model}" if isinstance(model, str) else "chat"
    return tracer().start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attributes)


def _requested_model(backend: Any) -> str | None:
    """The backend's model name when it is known without asking anyone.

    A server backend that was not told its model asks ``/v1/models`` on first access, and one holding an async
    client refuses a sync access: tracing must neither add a request nor fail the call. The generation's own model
    is recorded on the span afterwards (``gen_ai.response.model``).
    """
    transport = getattr(backend, "transport", None)
    if transport is not None:
        known = getattr(transport, "known_model", None)
        return known if isinstance(known, str) else None
    try:
        model = getattr(backend, "model", None)
    except Exception:  # a backend whose model property cannot answer here: the span goes without it
        return None
    return model if isinstance(model, str) else None


def _usage(generation: Any) -> tuple[Any, Any, Any, Any]:
    """Model, input and output tokens and finish reason of a citelock generation or an SDK ``ChatCompletion``."""
    usage = getattr(generation, "usage", None)
    if usage is not None or hasattr(generation, "choices"):  # the openai SDK's response
        choices = getattr(generation, "choices", None) or [None]
        return (
            getattr(generation, "model", None),
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
            getattr(choices[0], "finish_reason", None),
        )
    return (
        getattr(generation, "model", None),
        getattr(generation, "prompt_tokens", None),
        getattr(generation, "completion_tokens", None),
        getattr(generation, "finish_reason", None),
    )


def _generation_attributes(span: Span, record: PromptRecord, generation: Any) -> str:
    """Record a finished generation on its chat span; return the id of the response (the provider's, if given)."""
    provider_id = getattr(generation, "response_id", None)
    if provider_id is None and hasattr(generation, "choices"):
        provider_id = getattr(generation, "id", None)
    response_id = provider_id if isinstance(provider_id, str) and provider_id else record.request_id
    if not span.is_recording():
        return response_id
    model, input_tokens, output_tokens, finish = _usage(generation)
    values: dict[str, Any] = {
        "gen_ai.response.id": response_id,
        "citelock.request_id": record.request_id,
        "gen_ai.response.model": model if isinstance(model, str) else None,
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
        "citelock.enforced": getattr(generation, "enforced", None),
    }
    if finish:
        values["gen_ai.response.finish_reasons"] = [str(finish)]
    span.set_attributes({k: v for k, v in values.items() if v is not None})
    if values["gen_ai.response.model"] and "gen_ai.request.model" not in getattr(span, "attributes", {}):
        span.update_name(f"chat {values['gen_ai.response.model']}")
    return response_id


@contextmanager
def answer_trace(question: str) -> Iterator[_AnswerTrace]:
    """The ``citelock.answer`` span; what the guard evaluates is reset when it ends."""
    token = EVALUATED.set(None)
    try:
        with tracer().start_as_current_span(
            "citelock.answer", attributes={"gen_ai.operation.name": "citelock.answer"}
        ) as span:
            answer = ANSWER.set(span.get_span_context())
            try:
                yield _AnswerTrace(span)
            finally:
                ANSWER.reset(answer)
    finally:
        EVALUATED.reset(token)


class StreamTrace:
    """The spans of one streamed answer (``Citelock.stream``, a wrapped ``stream=True`` call), across iteration.

    ``citelock.answer`` starts when the call is made (its ``citelock.assemble`` step runs then); ``chat`` starts
    when iteration begins and ends when the generation is complete; the final guard runs under
    ``citelock.answer`` and evaluates ``chat``. No span is current between the events the caller receives.
    """

    def __init__(self) -> None:
        self.span = tracer().start_span("citelock.answer", attributes={"gen_ai.operation.name": "citelock.answer"})
        self.context = trace.set_span_in_context(self.span)
        self.chat: Span | None = None
        self.chat_ended = self.ended = False
        self.evaluated: tuple[SpanContext | None, str | None] | None = None

    @contextmanager
    def assembling(self) -> Iterator[Callable[[_T], _T]]:
        """The stream's ``citelock.assemble`` span, under ``citelock.answer``, around the caller's own step."""
        token, answer = context.attach(self.context), ANSWER.set(self.span.get_span_context())
        try:
            with _AnswerTrace(self.span).assembling() as done:
                yield done
        except BaseException as exc:
            self._end(exc)
            raise
        finally:
            ANSWER.reset(answer)
            context.detach(token)

    @contextmanager
    def finishing(self, record: PromptRecord, generation: Any) -> Iterator[None]:
        """The stream's finishing step is about to run: end ``chat`` (once) and let the guard evaluate it."""
        chat = self.chat
        if chat is not None and not self.chat_ended:
            self.evaluated = (chat.get_span_context(), _generation_attributes(chat, record, generation))
            chat.end()
            self.chat_ended = True
        token = EVALUATED.set(self.evaluated)
        try:
            yield
        finally:
            EVALUATED.reset(token)

    def _begin(self, job: Any) -> None:
        if self.chat is None:
            self.chat = _chat_span(job.backend, self.context)

    def _end(self, exc: BaseException | None) -> None:
        if self.ended:
            return
        self.ended = True
        spans = [self.span] if self.chat is None or self.chat_ended else [self.chat, self.span]
        self.chat_ended = True
        for span in spans:
            if isinstance(exc, Exception):
                span.set_attribute("error.type", type(exc).__name__)
            span.end()

    def events(self, job: Any, drive: Callable[..., Iterator[_T]]) -> Iterator[_T]:
        """``drive(job, self)``'s events, each step run under ``citelock.answer`` (this trace observes the job)."""
        steps: Around[_T] = Around(self._start(job, drive), lambda: _Current(self.context))
        with self._ending(), closing(steps):
            yield from steps

    async def aevents(self, job: Any, drive: Callable[..., AsyncIterator[_T]]) -> AsyncIterator[_T]:
        """:meth:`events` for an async stream."""
        steps: Around[_T] = Around(self._start(job, drive), lambda: _Current(self.context))
        with self._ending():
            async with aclosing(steps):
                async for item in steps:
                    yield item

    def _start(self, job: Any, drive: Callable[..., _I]) -> _I:
        """Begin ``chat`` and build the driver, under ``citelock.answer``."""
        with _Current(self.context):
            self._begin(job)
            return drive(job, self)

    @contextmanager
    def _ending(self) -> Iterator[None]:
        """End the spans when the iteration ends (after the driver is closed), with its error if it failed."""
        error: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._end(error)


_I = TypeVar("_I")


class _Current:
    """``ctx`` is the current context within the block (the stream's ``citelock.answer``).

    A class, not a generator context manager: a stream enters it once per event.
    """

    __slots__ = ("_ctx", "_token")

    def __init__(self, ctx: context.Context) -> None:
        self._ctx = ctx

    def __enter__(self) -> None:
        self._token = context.attach(self._ctx)

    def __exit__(self, *exc: object) -> None:
        context.detach(self._token)


def stream_trace() -> StreamTrace:
    """The spans of one streamed answer (see :class:`StreamTrace`)."""
    return StreamTrace()
