"""The guard's spans: ``citelock.guard {surface}`` around every :meth:`citelock.Guard.run`, ``citelock.judge {name}``.

:func:`guard_run` is the guard's observer (:mod:`citelock._observe`): it calls the run it is handed inside the
guard span, with one ``citelock.judge`` span per support-judge call (the judges are proxied on a copy of the
guard; the caller's object is not touched), and hands the span's result attributes, the evaluation events
(:mod:`._evaluations`) and its end to citelock's telemetry thread.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import context, trace
from opentelemetry.trace import Link, Span, Status, StatusCode

from citelock.records import PromptRecord, Verdict
from citelock.telemetry import _deferred
from citelock.telemetry._evaluations import plan_events, write_events
from citelock.telemetry._events import Attributes
from citelock.telemetry._settings import SETTINGS
from citelock.telemetry._tracing import EVALUATED, origin_of, placement, tracer

if TYPE_CHECKING:
    from citelock.telemetry._observed import GuardOutcome

__all__ = ["guard_run"]


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
        with tracer().start_as_current_span(f"citelock.judge {self.name}", attributes=attributes) as span:
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
    parent, links = placement(origin_of(record.metadata))
    attributes: Attributes = {"gen_ai.operation.name": "citelock.guard", "citelock.request_id": record.request_id}
    if surface:
        attributes["citelock.surface"] = surface
    name = f"citelock.guard {surface}" if surface else "citelock.guard"
    if SETTINGS.deferred and _in_process(guard) and _sdk_tracing():
        return _guard_run_late(run, guard, record, answer, known_ids, _Start(name, parent, links, attributes))
    span = tracer().start_span(name, context=parent, links=links, attributes=attributes)
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
        return tracer().start_span(
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
    ended, evaluated = time.time_ns(), EVALUATED.get()
    late = _Start(start.name, parent, start.links, start.attributes)

    def job() -> None:
        span = late.span(started)
        recording = span.is_recording()
        if recording:
            span.set_attributes(_result_attributes(result))
        plan = plan_events(span, None, evaluated)
        if plan is not None:
            write_events(result, plan, ended, worker=True)
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
    plan = plan_events(span, None, EVALUATED.get())
    if plan is None and not recording:
        span.end()
        return
    ended, deferred = time.time_ns(), SETTINGS.deferred

    def run() -> None:
        if recording:
            span.set_attributes(_result_attributes(result))
        if plan is not None:
            write_events(result, plan, ended, worker=deferred)
        span.end(end_time=ended)

    def on_drop() -> None:  # queue full: the span still ends, with what its events would have said in brief
        if recording:
            span.set_attributes({**_result_attributes(result), "citelock.telemetry.dropped": True})
        span.end(end_time=ended)

    if deferred:
        _deferred.submit(_deferred.Job(run, on_drop))
    else:
        run()
