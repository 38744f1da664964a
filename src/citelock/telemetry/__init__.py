"""OpenTelemetry for citelock: spans for its steps and a ``gen_ai.evaluation.result`` per citation and answer.

Install the extra (``pip install "citelock[otel]"``, the OpenTelemetry API only) and configure the SDK in your
application as usual: every :meth:`citelock.Guard.run` (so :meth:`citelock.Citelock.answer`, ``citelock audit``
and any caller of the guard) then emits a ``citelock.guard`` span under the current span, a span per judge call,
and its evaluation events through the Logs API, following the GenAI semantic conventions
:data:`SEMCONV_VERSION`. Without the extra nothing is imported and nothing changes.

- :func:`configure`: span events as well as (or instead of) log records; explicit providers; off.
- :func:`emit`: the events of a result made elsewhere (a :func:`citelock.check` report, a replay).
- :func:`evaluating`: parent the events of the guard runs in a block to the caller's generation span.
- :func:`emit_review`: a reviewer's outcome as a HUMAN evaluation on the original trace.
- :func:`flush`: wait for the events built on citelock's telemetry thread (tests, your own provider shutdown);
  :func:`dropped`: how many answers' events a full queue dropped.
- :func:`evaluation_events`: the events as plain attribute dicts (what is emitted, for tests and sinks).
"""

from citelock.telemetry._events import EVALUATION_EVENT, SEMCONV_VERSION, evaluation_events, review_event
from citelock.telemetry._hook import (
    JudgeSpans,
    active,
    configure,
    dropped,
    emit,
    emit_review,
    evaluating,
    flush,
    trace_metadata,
)

__all__ = [
    "EVALUATION_EVENT",
    "JudgeSpans",
    "SEMCONV_VERSION",
    "active",
    "configure",
    "dropped",
    "emit",
    "emit_review",
    "evaluating",
    "evaluation_events",
    "flush",
    "review_event",
    "trace_metadata",
]
