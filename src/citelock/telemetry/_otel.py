"""citelock's spans and evaluation events on the OpenTelemetry API (imported only when the API is installed).

What :mod:`citelock.telemetry._hook` loads and calls, one concept per module behind it:

- :mod:`._guard_spans`: ``citelock.guard {surface}`` around every :meth:`citelock.Guard.run` (the guard's
  observer), with its ``citelock.judge {name}`` spans;
- :mod:`._answer_spans`: ``citelock.answer`` and its steps (``citelock.assemble``, ``chat {model}``), for one
  call and for a streamed answer;
- :mod:`._evaluations`: the ``gen_ai.evaluation.result`` events, and the explicit emits of results and reviews;
- :mod:`._tracing`: what they share (the tracer and logger, where a span goes, what a guard run evaluates).

Spans are children of whatever span is current; names and attributes follow the GenAI conventions where they
define the step, under ``citelock.`` where they do not.
"""

from __future__ import annotations

from citelock.telemetry._answer_spans import answer_trace, stream_trace
from citelock.telemetry._evaluations import emit_result, emit_review
from citelock.telemetry._guard_spans import guard_run
from citelock.telemetry._tracing import evaluating, parse_traceparent, reset, trace_metadata

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
