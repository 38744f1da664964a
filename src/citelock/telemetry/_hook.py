"""Where citelock's code calls telemetry: every function here works, and costs a flag check, without the extra.

The ``otel`` extra installs ``opentelemetry-api`` only. When it is importable, citelock uses the API's global
tracer and logger providers (or the ones given to :func:`configure`): an application that configures the
OpenTelemetry SDK sees citelock's spans and events with no other setup. When it is not, nothing is imported and
every function here is a pass-through. ``CITELOCK_TELEMETRY=off`` turns the integration off either way.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from citelock.errors import MissingExtraError, UsageError
from citelock.records import GuardReport, PromptRecord
from citelock.telemetry import _deferred
from citelock.telemetry._settings import SETTINGS, JudgeSpans, Settings

if TYPE_CHECKING:
    from citelock._observe import GuardObserver
    from citelock.telemetry._observed import GuardOutcome

__all__ = [
    "JudgeSpans",
    "Settings",
    "active",
    "answer_trace",
    "configure",
    "dropped",
    "emit",
    "emit_review",
    "evaluating",
    "flush",
    "guard_observer",
    "implementation",
    "stream_trace",
    "trace_metadata",
]

_T = TypeVar("_T")


_IMPL: ModuleType | Literal[False] | None = None  # None: not looked up yet; False: the extra is absent


def implementation() -> ModuleType | None:
    """The OpenTelemetry implementation module, or None (extra absent, or turned off)."""
    global _IMPL
    if not SETTINGS.enabled:
        return None
    if _IMPL is None:
        if os.environ.get("CITELOCK_TELEMETRY", "").strip().lower() in ("off", "0", "false", "no"):
            _IMPL = False
        else:
            try:
                importlib.import_module("opentelemetry.trace")
                importlib.import_module("opentelemetry._logs")
            except ImportError:
                _IMPL = False
            else:
                _IMPL = importlib.import_module("citelock.telemetry._otel")
    return _IMPL or None


def _require() -> ModuleType:
    impl = implementation()
    if impl is None:
        if not SETTINGS.enabled:
            raise UsageError("citelock telemetry is turned off (configure(enabled=False) or CITELOCK_TELEMETRY=off)")
        raise MissingExtraError("otel", "opentelemetry-api")
    return impl


def configure(
    *,
    enabled: bool = True,
    logs: bool = True,
    span_events: bool = False,
    judge_spans: JudgeSpans = "auto",
    tracer_provider: Any = None,
    logger_provider: Any = None,
    queue_size: int = _deferred.DEFAULT_CAPACITY,
    deferred: bool = True,
) -> None:
    """Choose what citelock emits (optional: by default it emits to the global providers, as events).

    Args:
        enabled: False turns the integration off (no spans, no events; the guard runs as without the extra).
        logs: Emit each ``gen_ai.evaluation.result`` through the Logs API, as the conventions recommend.
        span_events: Also add each one as a span event on the guard span (for backends that read only spans,
            such as Arize Phoenix).
        judge_spans: Which judge calls get a ``citelock.judge`` span (see :data:`JudgeSpans`).
        tracer_provider: An OpenTelemetry ``TracerProvider`` to use instead of the global one.
        logger_provider: An OpenTelemetry ``LoggerProvider`` to use instead of the global one.
        queue_size: How many answers' events may wait for citelock's telemetry thread (see :func:`flush`); when
            it is full an answer's events are dropped, counted (:func:`dropped`) and logged, never waited for.
        deferred: False builds the events and ends the guard span on the request thread, inside
            :meth:`citelock.Guard.run` (no thread, no flush needed; costs the request ~1-2 ms per answer at 20
            citations): for processes whose threads are frozen between requests.

    Raises:
        UsageError: neither logs nor span events while enabled (nothing would carry the evaluations); an unknown
            ``judge_spans``; a ``queue_size`` below 1.
    """
    if enabled and not logs and not span_events:
        raise UsageError("configure(logs=False, span_events=False) leaves the evaluations nowhere; keep one on")
    if judge_spans not in ("auto", "all", "none"):
        raise UsageError(f"judge_spans must be 'auto', 'all' or 'none', got {judge_spans!r}")
    if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
        raise UsageError(f"queue_size must be an int of at least 1, got {queue_size!r}")
    _deferred.configure_capacity(queue_size)
    SETTINGS.enabled, SETTINGS.logs, SETTINGS.span_events = enabled, logs, span_events
    SETTINGS.judge_spans = judge_spans
    SETTINGS.tracer_provider, SETTINGS.logger_provider = tracer_provider, logger_provider
    SETTINGS.deferred = deferred
    impl = implementation()
    if impl is not None:
        impl.reset()


def flush(timeout_s: float | None = None) -> bool:
    """Wait until the evaluation events of every finished guard run have been handed to the providers.

    A guard run builds its ``gen_ai.evaluation.result`` events, and ends its ``citelock.guard`` span, on
    citelock's telemetry thread, off the request's path. They are written by then at interpreter exit; call
    this before reading an in-memory exporter in a test, or before your providers' own ``force_flush`` /
    ``shutdown`` when you shut them down yourself. Without the extra: returns True at once.

    Args:
        timeout_s: Longest wait in seconds (None: until done).

    Returns:
        True when nothing is pending any more; False when the timeout passed first.
    """
    return _deferred.flush(timeout_s)


def dropped() -> int:
    """How many answers' evaluation events were dropped because the telemetry queue was full (this process).

    Each drop is also logged (``citelock.telemetry`` logger, the first and every thousandth) and its guard span
    carries ``citelock.telemetry.dropped``; see ``queue_size`` in :func:`configure`.
    """
    return _deferred.dropped()


def active() -> bool:
    """True when the integration would emit (the extra is installed and not turned off)."""
    return implementation() is not None


def guard_observer() -> GuardObserver | None:
    """The observer of :meth:`citelock.Guard.run` (see :mod:`citelock._observe`), None when telemetry is off.

    It runs the guard inside a ``citelock.guard`` span, with judge spans, and emits the evaluation events.
    """
    impl = implementation()
    return cast("GuardObserver", impl.guard_run) if impl is not None else None


def emit(
    result: GuardOutcome | GuardReport,
    *,
    record: PromptRecord | None = None,
    response_id: str | None = None,
    traceparent: str | None = None,
) -> int:
    """Emit the ``gen_ai.evaluation.result`` events of a result computed elsewhere (wrap, a batch job, a replay).

    :meth:`citelock.Guard.run` emits them itself; call this for a :class:`citelock.GuardReport` from
    :func:`citelock.check`, or for results made out of the current trace.

    Args:
        result: The guard result or report.
        record: Its logged prompt: when its ``metadata`` carries ``traceparent`` (or ``trace_id`` and
            ``span_id``), the events are linked to that original trace.
        response_id: The evaluated response's id (default: the request id).
        traceparent: A W3C ``traceparent`` to parent the events to (overrides the record's).

    Returns:
        The number of events emitted (0 when nothing records them).

    Raises:
        MissingExtraError: the ``otel`` extra is not installed.
    """
    return int(_require().emit_result(result, record=record, response_id=response_id, traceparent=traceparent))


def evaluating(*, span: Any = None, response_id: str | None = None) -> AbstractContextManager[None]:
    """Within this block, guard runs evaluate ``span`` (their events are parented to it) and ``response_id``.

    For a caller that generates the answer itself (``wrap``, its own openai call): pass the generation's span,
    or the provider's response id when the span is not at hand. Without the extra: does nothing.
    """
    impl = implementation()
    return impl.evaluating(span, response_id) if impl is not None else nullcontext()


def emit_review(
    entry: Mapping[str, Any] | Any,
    outcome: str,
    *,
    reviewer: str | None = None,
    note: str | None = None,
    record: PromptRecord | None = None,
) -> int:
    """Emit a reviewer's outcome on a queue entry as a HUMAN ``gen_ai.evaluation.result`` (no-op without extra).

    Args:
        entry: The :class:`citelock.store.QueueEntry` (or its fields as a mapping).
        outcome: ``accept``, ``repair`` or ``escalate``.
        reviewer: Who decided.
        note: The reviewer's note.
        record: The entry's logged prompt: its ``traceparent`` puts the evaluation on the original trace.

    Returns:
        The number of events emitted.
    """
    impl = implementation()
    if impl is None:
        return 0
    fields = entry if isinstance(entry, Mapping) else entry.model_dump()
    return int(impl.emit_review(fields, outcome, reviewer=reviewer, note=note, record=record))


def trace_metadata() -> dict[str, str]:
    """``{"traceparent": ...}`` of the current span, for a logged prompt's metadata (empty without one)."""
    impl = implementation()
    return impl.trace_metadata() if impl is not None else {}


def _identity(value: _T) -> _T:
    return value


class _NoTrace:
    """The pipeline's steps without telemetry."""

    @contextmanager
    def assembling(self) -> Iterator[Callable[[_T], _T]]:
        yield _identity

    @contextmanager
    def generating(self, record: PromptRecord, backend: Any) -> Iterator[Callable[[_T], _T]]:
        yield lambda generation: generation


class _NoStreamTrace:
    """A streamed answer's steps without telemetry."""

    @contextmanager
    def assembling(self) -> Iterator[Callable[[_T], _T]]:
        yield _identity

    def events(self, job: Any, drive: Callable[[Any], _T]) -> _T:
        return drive(job)

    def aevents(self, job: Any, drive: Callable[[Any], _T]) -> _T:
        return drive(job)


def stream_trace() -> Any:
    """The spans of one streamed answer (``assembling`` now, ``events`` / ``aevents`` around the stream's driver)."""
    impl = implementation()
    return impl.stream_trace() if impl is not None else _NoStreamTrace()


def answer_trace(question: str = "") -> AbstractContextManager[Any]:
    """The ``citelock.answer`` span of one :meth:`citelock.Citelock.answer` call, with its step helpers."""
    impl = implementation()
    return impl.answer_trace(question) if impl is not None else nullcontext(_NoTrace())
