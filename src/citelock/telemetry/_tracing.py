"""What citelock's spans share: the tracer and logger, where a span goes, and what the guard runs evaluate.

Imported only when the OpenTelemetry API is installed (through :mod:`citelock.telemetry._otel`). The guard spans
(:mod:`._guard_spans`), the answer spans (:mod:`._answer_spans`) and the evaluation events (:mod:`._evaluations`)
all start theirs from here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import _logs, context, trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, TraceFlags, Tracer

from citelock._version import __version__
from citelock.telemetry._events import SEMCONV_VERSION
from citelock.telemetry._settings import SETTINGS

__all__ = [
    "ANSWER",
    "EVALUATED",
    "LOG",
    "evaluating",
    "event_logger",
    "origin_of",
    "parse_traceparent",
    "placement",
    "reset",
    "trace_metadata",
    "tracer",
]

_SCOPE = "citelock"
_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
LOG = logging.getLogger("citelock.telemetry")

# The span (context) and response id the guard runs in this block evaluate: set by Citelock.answer around its
# generation, or by the caller (telemetry.evaluating).
EVALUATED: ContextVar[tuple[SpanContext | None, str | None] | None] = ContextVar("citelock_evaluated", default=None)
ANSWER: ContextVar[SpanContext | None] = ContextVar("citelock_answer", default=None)
_cache: dict[str, Any] = {}


def reset() -> None:
    """Forget the cached tracer and logger (after :func:`citelock.telemetry.configure`)."""
    _cache.clear()


def _scoped(key: str, provider: Any, method: str, default: Any) -> Any:
    """The cached tracer or logger of citelock's scope: ``provider.<method>`` when configured, else ``default``."""
    got = _cache.get(key)
    if got is None:
        getter = getattr(provider, method) if provider is not None else default
        got = _cache[key] = getter(_SCOPE, __version__, schema_url=_SCHEMA_URL)
    return got


def tracer() -> Tracer:
    tracer: Tracer = _scoped("tracer", SETTINGS.tracer_provider, "get_tracer", trace.get_tracer)
    return tracer


def event_logger() -> _logs.Logger:
    logger: _logs.Logger = _scoped("logger", SETTINGS.logger_provider, "get_logger", _logs.get_logger)
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


def origin_of(metadata: Mapping[str, Any], override: str | None = None) -> SpanContext | None:
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
    ctx = ANSWER.get() or trace.get_current_span().get_span_context()
    return {"traceparent": _traceparent(ctx)} if ctx.is_valid else {}


def placement(origin: SpanContext | None) -> tuple[context.Context | None, list[Link]]:
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
    token = EVALUATED.set((ctx if isinstance(ctx, SpanContext) else None, response_id))
    try:
        yield
    finally:
        EVALUATED.reset(token)
