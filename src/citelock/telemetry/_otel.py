"""citelock's spans and evaluation events on the OpenTelemetry API (imported only when the API is installed).

Spans (children of whatever span is current; names and attributes after the GenAI conventions where they define
the step, under ``citelock.`` where they do not):

- ``citelock.answer`` (one :meth:`citelock.Citelock.answer` call) with its steps: ``citelock.assemble``
  (``gen_ai.retrieval.documents``: the assembled chunks), ``chat {model}`` (kind CLIENT: ``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.response.finish_reasons``, ``gen_ai.response.id``),
  then the guard span;
- ``citelock.guard {surface}`` (every :meth:`citelock.Guard.run`), with one ``citelock.judge {name}`` span per
  support-judge call (the judge is proxied on a copy of the guard; the caller's object is not touched).

Events: one ``gen_ai.evaluation.result`` per citation, per uncited claim and per answer
(:func:`citelock.telemetry._events.evaluation_events`), through the Logs API, parented to the generation span
being evaluated when there is one, else to the guard span; optionally also as span events on the guard span.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import _logs, context, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from citelock._version import __version__
from citelock.records import GuardReport, PromptRecord, Verdict
from citelock.telemetry import _deferred
from citelock.telemetry._events import EVALUATION_EVENT, SEMCONV_VERSION, Attributes, evaluation_events, review_event
from citelock.telemetry._settings import SETTINGS

if TYPE_CHECKING:
    from citelock.telemetry._observed import GuardOutcome

__all__ = [
    "answer_trace",
    "emit_result",
    "emit_review",
    "evaluating",
    "guard_run",
    "parse_traceparent",
    "reset",
    "stream_trace",
    "trace_metadata",
]

_T = TypeVar("_T")
_SCOPE = "citelock"
_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
_log = logging.getLogger("citelock.telemetry")

# The span (context) and response id the guard runs in this block evaluate: set by Citelock.answer around its
# generation, or by the caller (telemetry.evaluating).
_EVALUATED: ContextVar[tuple[SpanContext | None, str | None] | None] = ContextVar("citelock_evaluated", default=None)
_ANSWER: ContextVar[SpanContext | None] = ContextVar("citelock_answer", default=None)
_cache: dict[str, Any] = {}


def reset() -> None:
    """Forget the cached tracer and logger (after :func:`citelock.telemetry.configure`)."""
    _cache.clear()


def _tracer() -> Tracer:
    tracer = _cache.get("tracer")
    if tracer is None:
        provider = SETTINGS.tracer_provider
        getter = provider.get_tracer if provider is not None else trace.get_tracer
        tracer = _cache["tracer"] = getter(_SCOPE, __version__, schema_url=_SCHEMA_URL)
    return tracer


def _logger() -> _logs.Logger:
    logger = _cache.get("logger")
    if logger is None:
        provider = SETTINGS.logger_provider
        getter = provider.get_logger if provider is not None else _logs.get_logger
        logger = _cache["logger"] = getter(_SCOPE, __version__, schema_url=_SCHEMA_URL)
    return logger


def parse_traceparent(value: str) -> SpanContext | None:
    """The span context of a W3C ``traceparent`` (``00-<32 hex>-<16 hex>-<2 hex>``), None when malformed."""
    parts = value.strip().split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 0xFF))


def _traceparent(ctx: SpanContext) -> str:
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _origin(metadata: Mapping[str, Any], override: str | None = None) -> SpanContext | None:
    """The original span a logged prompt was answered in (``traceparent``, or ``trace_id`` + ``span_id``)."""
    value = override or metadata.get("traceparent")
    if isinstance(value, str):
        return parse_traceparent(value)
    trace_id, span_id = metadata.get("trace_id"), metadata.get("span_id")
    if isinstance(trace_id, str) and isinstance(span_id, str):
        return parse_traceparent(f"00-{trace_id.rjust(32, '0')}-{span_id.rjust(16, '0')}-01")
    return None


def trace_metadata() -> dict[str, str]:
    """``{"traceparent": ...}`` of the ``citelock.answer`` span in progress, else of the current span (or empty)."""
    ctx = _ANSWER.get() or trace.get_current_span().get_span_context()
    return {"traceparent": _traceparent(ctx)} if ctx.is_valid else {}


def _placement(origin: SpanContext | None) -> tuple[context.Context | None, list[Link]]:
    """Where a span about a logged prompt goes.

    Under the current span (linked to the original when that is another trace), else under the original span
    (an audit replaying logged traffic outside any trace).
    """
    current = trace.get_current_span().get_span_context()
    if origin is None:
        return None, []
    if current.is_valid:
        return None, ([Link(origin)] if origin.trace_id != current.trace_id else [])
    return trace.set_span_in_context(NonRecordingSpan(origin)), []


@contextmanager
def evaluating(span: Any, response_id: str | None) -> Iterator[None]:
    """Guard runs in this block evaluate ``span`` (a Span or SpanContext) and ``response_id``."""
    ctx = span.get_span_context() if isinstance(span, Span) else span
    token = _EVALUATED.set((ctx if isinstance(ctx, SpanContext) else None, response_id))
    try:
        yield
    finally:
        _EVALUATED.reset(token)


class _TracedJudge:
    """A judge whose every call is a ``citelock.judge`` span (the verdict's label, score and cache hit on it)."""

    def __init__(self, inner: Any, role: str) -> None:
        self._inner = inner
        self._role = role
        self.name: str = inner.name
        self.version: str = inner.version

    def judge(self, claim: str, passage: str) -> Verdict:
        attributes = {
            "gen_ai.operation.name": "citelock.judge",
            "gen_ai.request.model": f"{self.name} {self.version}",
            "citelock.judge.role": self._role,
        }
        with _tracer().start_as_current_span(f"citelock.judge {self.name}", attributes=attributes) as span:
            try:
                verdict: Verdict = self._inner.judge(claim, passage)
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise
            if isinstance(verdict, Verdict):
                span.set_attribute("citelock.judge.label", verdict.label)
                span.set_attribute("citelock.judge.cached", verdict.cached)
                if verdict.score is not None:
                    span.set_attribute("citelock.judge.score", float(verdict.score))
            return verdict

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


_IN_PROCESS = ("citelock.judges._lexical", "citelock.judges._offline")  # microseconds a call: no span in "auto"


def _traced(judge: Any) -> bool:
    if judge is None or SETTINGS.judge_spans == "none":
        return False
    return SETTINGS.judge_spans == "all" or type(judge).__module__ not in _IN_PROCESS


def _with_traced_judges(guard: Any) -> Any:
    judge, escalate = _traced(guard.judge), _traced(guard.escalate)
    if not judge and not escalate:
        return guard
    twin = copy.copy(guard)
    if judge:
        twin.judge = _TracedJudge(guard.judge, "judge")
    if escalate:
        twin.escalate = _TracedJudge(guard.escalate, "escalate")
    return twin


def _result_attributes(result: GuardOutcome) -> Attributes:
    acc = result.accounting
    return {
        "citelock.decision": result.decision,
        "citelock.findings": len(result.report.findings),
        "citelock.citations": acc.citations,
        "citelock.judge_calls": acc.judge_calls + acc.diagnosis_calls + acc.escalations,
        "citelock.reasons": ",".join(sorted({f.reason.value for f in result.report.findings})),
    }


def _in_process(guard: Any) -> bool:
    """True when nothing but citelock's own in-process code runs inside this guard run (no judge that may trace)."""
    return all(j is None or type(j).__module__ in _IN_PROCESS for j in (guard.judge, guard.escalate)) and not (
        SETTINGS.judge_spans == "all" and (guard.judge is not None or guard.escalate is not None)
    )


def _sdk_tracing() -> bool:
    """True when spans may record: a tracer provider other than the API's no-op and proxy ones is in use."""
    provider = SETTINGS.tracer_provider
    if provider is None:
        provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def guard_run(run: Callable[..., GuardOutcome], guard: Any, record: PromptRecord, answer: Any, known_ids: Any) -> Any:
    """:meth:`citelock.Guard.run` inside a ``citelock.guard`` span, the rest handed to the telemetry thread.

    The span's result attributes, its evaluation events and its end are built there, with the end time and the
    trace context captured here. When no span can nest under the guard span (its judges are citelock's
    in-process ones and get no span) and a tracing SDK is configured, even the span's start is made there, from
    the start time, parent context and links captured here (:func:`_guard_run_late`).
    """
    surface = guard.policy.name if guard.policy is not None else None
    parent, links = _placement(_origin(record.metadata))
    attributes: Attributes = {"gen_ai.operation.name": "citelock.guard", "citelock.request_id": record.request_id}
    if surface:
        attributes["citelock.surface"] = surface
    name = f"citelock.guard {surface}" if surface else "citelock.guard"
    if SETTINGS.deferred and _in_process(guard) and _sdk_tracing():
        return _guard_run_late(run, guard, record, answer, known_ids, _Start(name, parent, links, attributes))
    span = _tracer().start_span(name, context=parent, links=links, attributes=attributes)
    recording = span.is_recording()
    try:
        with trace.use_span(span, end_on_exit=False):
            result = run(_with_traced_judges(guard) if recording else guard, record, answer, known_ids=known_ids)
    except BaseException as exc:  # recorded on the span by use_span; error.type per the conventions
        if isinstance(exc, Exception):
            span.set_attribute("error.type", type(exc).__name__)
        span.end()
        raise
    _hand_off(result, span, recording)
    return result


@dataclass(frozen=True)
class _Start:
    """A guard span not started yet: what its start needs, captured on the request thread."""

    name: str
    parent: context.Context | None
    links: list[Link]
    attributes: Attributes

    def span(self, started: int) -> Span:
        """Start it now, as of ``started`` (ns), under the parent captured (the request's current context)."""
        return _tracer().start_span(
            self.name, context=self.parent, links=self.links, attributes=self.attributes, start_time=started
        )


def _guard_run_late(
    run: Callable[..., GuardOutcome], guard: Any, record: PromptRecord, answer: Any, known_ids: Any, start: _Start
) -> Any:
    """The guard run with its span started on the telemetry thread: the request thread captures times and context.

    The span is not current during the run, which no one can observe: only citelock's in-process code runs
    inside, and it makes no span. Its trace context, parent, links, attributes, start and end times are those
    of the eager path.
    """
    parent = start.parent if start.parent is not None else context.get_current()
    started = time.time_ns()
    try:
        result = run(guard, record, answer, known_ids=known_ids)
    except BaseException as exc:  # the span now, on this thread, as the eager path records a failed run
        span = start.span(started)
        if isinstance(exc, Exception) and span.is_recording():
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            span.set_attribute("error.type", type(exc).__name__)
        span.end()
        raise
    ended, evaluated = time.time_ns(), _EVALUATED.get()
    late = _Start(start.name, parent, start.links, start.attributes)

    def job() -> None:
        span = late.span(started)
        recording = span.is_recording()
        if recording:
            span.set_attributes(_result_attributes(result))
        plan = _plan(span, None, evaluated)
        if plan is not None:
            _write_events(result, plan, ended, worker=True)
        span.end(end_time=ended)

    def on_drop() -> None:  # queue full: the span still ends, with what its events would have said in brief
        span = late.span(started)
        if span.is_recording():
            span.set_attributes({**_result_attributes(result), "citelock.telemetry.dropped": True})
        span.end(end_time=ended)

    _deferred.submit(_deferred.Job(job, on_drop))
    return result


def _hand_off(result: GuardOutcome, span: Span, recording: bool) -> None:
    """Queue what is left of one guard span (attributes, events, end) for the worker; nothing when nothing records."""
    plan = _plan(span, None, _EVALUATED.get())
    if plan is None and not recording:
        span.end()
        return
    ended, deferred = time.time_ns(), SETTINGS.deferred

    def run() -> None:
        if recording:
            span.set_attributes(_result_attributes(result))
        if plan is not None:
            _write_events(result, plan, ended, worker=deferred)
        span.end(end_time=ended)

    def on_drop() -> None:  # queue full: the span still ends, with what its events would have said in brief
        if recording:
            span.set_attributes({**_result_attributes(result), "citelock.telemetry.dropped": True})
        span.end(end_time=ended)

    if deferred:
        _deferred.submit(_deferred.Job(run, on_drop))
    else:
        run()


def _logs_enabled(logger: _logs.Logger) -> bool:
    """``Logger.enabled`` (newer APIs: False lets the no-op path skip building events); APIs without it: True."""
    enabled = getattr(logger, "enabled", None)
    return bool(enabled(event_name=EVALUATION_EVENT)) if enabled is not None else True


@dataclass(frozen=True)
class _Plan:
    """Where one result's events go, decided on the request thread (providers, parent, response id)."""

    logger: _logs.Logger | None
    span: Span | None
    target: SpanContext
    response_id: str | None


def _plan(span: Span, response_id: str | None, evaluated: tuple[SpanContext | None, str | None] | None) -> _Plan | None:
    """The events' destinations, or None when nothing would record them (no work at all then).

    ``evaluated``: the generation being evaluated (``_EVALUATED``), read on the request's thread.
    """
    logger = _logger() if SETTINGS.logs else None
    to_logs = logger is not None and _logs_enabled(logger)
    to_span = SETTINGS.span_events and span.is_recording()
    if not to_logs and not to_span:
        return None
    target = evaluated[0] if evaluated is not None and evaluated[0] is not None else span.get_span_context()
    response = response_id or (evaluated[1] if evaluated is not None else None)
    return _Plan(logger if to_logs else None, span if to_span else None, target, response)


def _write_events(
    result: GuardOutcome | GuardReport, plan: _Plan, timestamp: int | None, *, worker: bool = False
) -> int:
    """The evaluation events of ``result``: as log records (parented to the evaluated span) and/or span events.

    On the worker (``worker``) the GIL is released after each event, so a request thread waiting for it runs
    first: the worker takes what the request threads leave.
    """
    try:
        events = evaluation_events(result, response_id=plan.response_id)
    except Exception:  # a telemetry bug must never fail a guard run; it is logged, not hidden
        _log.exception("citelock could not build the evaluation events of request %s", _request_id(result))
        return 0
    ctx = trace.set_span_in_context(NonRecordingSpan(plan.target))
    for event in events:
        if plan.logger is not None:
            plan.logger.emit(
                timestamp=timestamp,
                observed_timestamp=timestamp,
                event_name=EVALUATION_EVENT,
                attributes=event,
                context=ctx,
                severity_number=SeverityNumber.INFO,
            )
        if plan.span is not None:
            plan.span.add_event(EVALUATION_EVENT, event, timestamp=timestamp)
        if worker:
            time.sleep(0)
    return len(events)


def _emit_events(result: GuardOutcome | GuardReport, span: Span, response_id: str | None) -> int:
    """The evaluation events of ``result`` now, on this thread (an explicit :func:`citelock.telemetry.emit`)."""
    plan = _plan(span, response_id, _EVALUATED.get())
    return 0 if plan is None else _write_events(result, plan, None)


def _request_id(result: GuardOutcome | GuardReport) -> str:
    return result.request_id if isinstance(result, GuardReport) else result.report.request_id


def emit_result(
    result: GuardOutcome | GuardReport,
    *,
    record: PromptRecord | None,
    response_id: str | None,
    traceparent: str | None,
) -> int:
    """The events of a result computed elsewhere, in a ``citelock.evaluate`` span placed by the original trace."""
    origin = _origin(record.metadata if record is not None else {}, traceparent)
    parent, links = _placement(origin)
    attributes: Attributes = {"gen_ai.operation.name": "citelock.evaluate", "citelock.request_id": _request_id(result)}
    with _tracer().start_as_current_span(
        "citelock.evaluate", context=parent, links=links, attributes=attributes
    ) as span:
        return _emit_events(result, span, response_id)


def emit_review(
    entry: Mapping[str, Any], outcome: str, *, reviewer: str | None, note: str | None, record: PromptRecord | None
) -> int:
    """A reviewer's outcome as a HUMAN evaluation, in a ``citelock.review`` span on the original trace."""
    event = review_event(entry, outcome, reviewer=reviewer, note=note)
    parent, links = _placement(_origin(record.metadata) if record is not None else None)
    attributes: Attributes = {
        "gen_ai.operation.name": "citelock.review",
        "citelock.request_id": str(entry["request_id"]),
    }
    with _tracer().start_as_current_span("citelock.review", context=parent, links=links, attributes=attributes) as span:
        logger = _logger() if SETTINGS.logs else None
        emitted = 0
        if logger is not None and _logs_enabled(logger):
            logger.emit(
                event_name=EVALUATION_EVENT,
                attributes=event,
                context=trace.set_span_in_context(span),
                severity_number=SeverityNumber.INFO,
            )
            emitted = 1
        if SETTINGS.span_events and span.is_recording():
            span.add_event(EVALUATION_EVENT, event)
            emitted = 1
        return emitted


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
        with _tracer().start_as_current_span(
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
        _EVALUATED.set((span.get_span_context(), response[0] if response else record.request_id))


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
    return _tracer().start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attributes)


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
    token = _EVALUATED.set(None)
    try:
        with _tracer().start_as_current_span(
            "citelock.answer", attributes={"gen_ai.operation.name": "citelock.answer"}
        ) as span:
            answer = _ANSWER.set(span.get_span_context())
            try:
                yield _AnswerTrace(span)
            finally:
                _ANSWER.reset(answer)
    finally:
        _EVALUATED.reset(token)


class StreamTrace:
    """The spans of one streamed answer (``Citelock.stream``, a wrapped ``stream=True`` call), across iteration.

    ``citelock.answer`` starts when the call is made (its ``citelock.assemble`` step runs then); ``chat`` starts
    when iteration begins and ends when the generation is complete; the final guard runs under
    ``citelock.answer`` and evaluates ``chat``. No span is current between the events the caller receives.
    """

    def __init__(self) -> None:
        self.span = _tracer().start_span("citelock.answer", attributes={"gen_ai.operation.name": "citelock.answer"})
        self.context = trace.set_span_in_context(self.span)
        self.chat: Span | None = None
        self.chat_ended = self.ended = False
        self.evaluated: tuple[SpanContext | None, str | None] | None = None

    @contextmanager
    def assembling(self) -> Iterator[Callable[[_T], _T]]:
        """The stream's ``citelock.assemble`` span, under ``citelock.answer``, around the caller's own step."""
        token, answer = context.attach(self.context), _ANSWER.set(self.span.get_span_context())
        try:
            with _AnswerTrace(self.span).assembling() as done:
                yield done
        except BaseException as exc:
            self._end(exc)
            raise
        finally:
            _ANSWER.reset(answer)
            context.detach(token)

    @contextmanager
    def finishing(self, record: PromptRecord, generation: Any) -> Iterator[None]:
        """The stream's finishing step is about to run: end ``chat`` (once) and let the guard evaluate it."""
        chat = self.chat
        if chat is not None and not self.chat_ended:
            self.evaluated = (chat.get_span_context(), _generation_attributes(chat, record, generation))
            chat.end()
            self.chat_ended = True
        token = _EVALUATED.set(self.evaluated)
        try:
            yield
        finally:
            _EVALUATED.reset(token)

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
        error: BaseException | None = None
        token = context.attach(self.context)
        try:
            self._begin(job)
            inner = drive(job, self)
        finally:
            context.detach(token)
        try:
            while True:
                token = context.attach(self.context)
                try:
                    item = next(inner)
                except StopIteration:
                    return
                finally:
                    context.detach(token)
                yield item
        except BaseException as exc:
            error = exc
            raise
        finally:
            token = context.attach(self.context)
            try:
                close = getattr(inner, "close", None)
                if close is not None:
                    close()
            finally:
                context.detach(token)
                self._end(error)

    async def aevents(self, job: Any, drive: Callable[..., AsyncIterator[_T]]) -> AsyncIterator[_T]:
        """:meth:`events` for an async stream."""
        error: BaseException | None = None
        token = context.attach(self.context)
        try:
            self._begin(job)
            inner = drive(job, self)
        finally:
            context.detach(token)
        try:
            while True:
                token = context.attach(self.context)
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    context.detach(token)
                yield item
        except BaseException as exc:
            error = exc
            raise
        finally:
            token = context.attach(self.context)
            try:
                aclose = getattr(inner, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                context.detach(token)
                self._end(error)


def stream_trace() -> StreamTrace:
    """The spans of one streamed answer (see :class:`StreamTrace`)."""
    return StreamTrace()
