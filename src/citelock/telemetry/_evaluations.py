"""The ``gen_ai.evaluation.result`` events: where one result's go, how they are written, and the explicit emits.

One event per citation, per uncited claim and per answer (:func:`citelock.telemetry._events.evaluation_events`),
through the Logs API, parented to the generation span being evaluated when there is one, else to the guard span;
optionally also as span events on the guard span. A reviewer's outcome is one HUMAN evaluation on the original
trace (:func:`emit_review`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import _logs, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext

from citelock.records import GuardReport, PromptRecord
from citelock.telemetry._events import EVALUATION_EVENT, Attributes, evaluation_events, review_event
from citelock.telemetry._settings import SETTINGS
from citelock.telemetry._tracing import EVALUATED, LOG, event_logger, origin_of, placement, tracer

if TYPE_CHECKING:
    from citelock.telemetry._observed import GuardOutcome

__all__ = ["Plan", "emit_result", "emit_review", "logs_enabled", "plan_events", "write_events"]


def logs_enabled(logger: _logs.Logger) -> bool:
    """``Logger.enabled`` (newer APIs: False lets the no-op path skip building events); APIs without it: True."""
    enabled = getattr(logger, "enabled", None)
    return bool(enabled(event_name=EVALUATION_EVENT)) if enabled is not None else True


@dataclass(frozen=True)
class Plan:
    """Where one result's events go, decided on the request thread (providers, parent, response id)."""

    logger: _logs.Logger | None
    span: Span | None
    target: SpanContext
    response_id: str | None


def plan_events(
    span: Span, response_id: str | None, evaluated: tuple[SpanContext | None, str | None] | None
) -> Plan | None:
    """The events' destinations, or None when nothing would record them (no work at all then).

    ``evaluated``: the generation being evaluated (``EVALUATED``), read on the request's thread.
    """
    logger = event_logger() if SETTINGS.logs else None
    to_logs = logger is not None and logs_enabled(logger)
    to_span = SETTINGS.span_events and span.is_recording()
    if not to_logs and not to_span:
        return None
    target = evaluated[0] if evaluated is not None and evaluated[0] is not None else span.get_span_context()
    response = response_id or (evaluated[1] if evaluated is not None else None)
    return Plan(logger if to_logs else None, span if to_span else None, target, response)


def write_events(result: GuardOutcome | GuardReport, plan: Plan, timestamp: int | None, *, worker: bool = False) -> int:
    """The evaluation events of ``result``: as log records (parented to the evaluated span) and/or span events.

    On the worker (``worker``) the GIL is released after each event, so a request thread waiting for it runs
    first: the worker takes what the request threads leave.
    """
    try:
        events = evaluation_events(result, response_id=plan.response_id)
    except Exception:  # a telemetry bug must never fail a guard run; it is logged, not hidden
        LOG.exception("citelock could not build the evaluation events of request %s", _request_id(result))
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
    plan = plan_events(span, response_id, EVALUATED.get())
    return 0 if plan is None else write_events(result, plan, None)


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
    origin = origin_of(record.metadata if record is not None else {}, traceparent)
    parent, links = placement(origin)
    attributes: Attributes = {"gen_ai.operation.name": "citelock.evaluate", "citelock.request_id": _request_id(result)}
    with tracer().start_as_current_span(
        "citelock.evaluate", context=parent, links=links, attributes=attributes
    ) as span:
        return _emit_events(result, span, response_id)


def emit_review(
    entry: Mapping[str, Any], outcome: str, *, reviewer: str | None, note: str | None, record: PromptRecord | None
) -> int:
    """A reviewer's outcome as a HUMAN evaluation, in a ``citelock.review`` span on the original trace."""
    event = review_event(entry, outcome, reviewer=reviewer, note=note)
    parent, links = placement(origin_of(record.metadata) if record is not None else None)
    attributes: Attributes = {
        "gen_ai.operation.name": "citelock.review",
        "citelock.request_id": str(entry["request_id"]),
    }
    with tracer().start_as_current_span("citelock.review", context=parent, links=links, attributes=attributes) as span:
        logger = event_logger() if SETTINGS.logs else None
        emitted = 0
        if logger is not None and logs_enabled(logger):
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
