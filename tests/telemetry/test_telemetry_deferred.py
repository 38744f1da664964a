"""The guard's evaluation events are built on citelock's telemetry thread: timestamps, flush, drops, exit."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from citelock import UsageError, telemetry
from citelock.telemetry import _deferred
from support.otel_scenario import ANSWER, STORE, guard, record


@pytest.fixture
def exporters() -> Iterator[tuple[InMemorySpanExporter, InMemoryLogRecordExporter, TracerProvider]]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    telemetry.configure(tracer_provider=tracer_provider, logger_provider=logger_provider, span_events=True)
    try:
        yield spans, logs, tracer_provider
    finally:
        assert telemetry.flush(30.0)
        telemetry.configure()  # the default queue size again


@pytest.fixture
def blocked_worker() -> Iterator[threading.Event]:
    """The telemetry thread held on a job of the test's own until the event is set."""
    release, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(30.0)

    assert _deferred.submit(_deferred.Job(hold, lambda: None))
    assert started.wait(30.0)
    try:
        yield release
    finally:
        release.set()


def test_events_carry_the_request_threads_end_time_and_trace(exporters) -> None:
    spans, logs, _ = exporters
    guard().run(record(), ANSWER, known_ids=STORE)
    assert telemetry.flush(30.0)
    (guard_span,) = [s for s in spans.get_finished_spans() if s.name.startswith("citelock.guard")]
    records = [item.log_record for item in logs.get_finished_logs()]
    assert len(records) == len(guard_span.events) == 4  # three citations and the answer
    assert {r.timestamp for r in records} == {guard_span.end_time}
    assert {e.timestamp for e in guard_span.events} == {guard_span.end_time}
    assert {(r.trace_id, r.span_id) for r in records} == {(guard_span.context.trace_id, guard_span.context.span_id)}
    assert guard_span.attributes is not None and guard_span.attributes["citelock.decision"] == "block"


def test_a_guard_span_started_on_the_worker_keeps_the_request_threads_times_and_parent(
    exporters, blocked_worker
) -> None:
    spans, _, tracer_provider = exporters
    with tracer_provider.get_tracer("app").start_as_current_span("app") as app:
        before = time.time_ns()
        guard().run(record(), ANSWER, known_ids=STORE)  # lexical judge: nothing nests under the guard span
        after = time.time_ns()
        assert trace.get_current_span() is app
    time.sleep(0.01)  # the worker is held: its clock is past the run when it starts the span
    blocked_worker.set()
    assert telemetry.flush(30.0)
    (guard_span,) = [s for s in spans.get_finished_spans() if s.name.startswith("citelock.guard")]
    assert guard_span.start_time is not None and guard_span.end_time is not None
    assert before <= guard_span.start_time <= guard_span.end_time <= after
    assert guard_span.parent is not None and guard_span.parent.span_id == app.get_span_context().span_id
    assert guard_span.context.trace_id == app.get_span_context().trace_id
    assert len(guard_span.events) == 4


def test_flush_waits_for_pending_events_and_times_out_honestly(exporters, blocked_worker) -> None:
    spans, logs, _ = exporters
    guard().run(record(), ANSWER, known_ids=STORE)
    assert telemetry.flush(0.05) is False  # the worker is held: the answer's events are still pending
    assert logs.get_finished_logs() == ()
    assert [s for s in spans.get_finished_spans() if s.name.startswith("citelock.guard")] == []
    blocked_worker.set()
    assert telemetry.flush(30.0) is True
    assert len(logs.get_finished_logs()) == 4
    assert len([s for s in spans.get_finished_spans() if s.name.startswith("citelock.guard")]) == 1


def test_a_full_queue_drops_counted_and_logged_and_the_span_still_ends(
    exporters, blocked_worker, caplog: pytest.LogCaptureFixture
) -> None:
    spans, _, tracer_provider = exporters
    telemetry.configure(tracer_provider=tracer_provider, logs=False, span_events=True, queue_size=1)
    before = telemetry.dropped()
    with caplog.at_level(logging.WARNING, logger="citelock.telemetry"):
        guard().run(record("req-kept"), ANSWER, known_ids=STORE)  # queued behind the held job
        result = guard().run(record("req-dropped"), ANSWER, known_ids=STORE)  # the queue is full: dropped
    assert result.decision == "block"  # the request itself is unaffected
    assert telemetry.dropped() == before + 1
    assert any("queue full" in r.getMessage() for r in caplog.records)
    (dropped,) = [s for s in spans.get_finished_spans() if s.name.startswith("citelock.guard")]
    assert dropped.attributes is not None and dropped.attributes["citelock.request_id"] == "req-dropped"
    assert dropped.attributes["citelock.telemetry.dropped"] is True
    assert dropped.attributes["citelock.decision"] == "block" and dropped.events == ()
    blocked_worker.set()
    assert telemetry.flush(30.0)
    kept = [s for s in spans.get_finished_spans() if (s.attributes or {}).get("citelock.request_id") == "req-kept"]
    assert len(kept) == 1 and len(kept[0].events) == 4


def test_queue_size_must_be_a_positive_int() -> None:
    for bad in (0, -3, 2.5, True):
        with pytest.raises(UsageError, match="queue_size must be an int of at least 1"):
            telemetry.configure(queue_size=bad)  # type: ignore[arg-type]


def test_pending_events_are_written_at_interpreter_exit() -> None:
    code = r"""
import sys
sys.path.insert(0, "tests")
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult, SimpleLogRecordProcessor
from citelock import telemetry
from support.otel_scenario import ANSWER, STORE, guard, record

class Count(LogRecordExporter):
    def export(self, batch):
        for item in batch:
            sys.stdout.write(f"event {item.log_record.attributes['gen_ai.evaluation.name']}\n")  # one write a line
        return LogRecordExportResult.SUCCESS
    def shutdown(self):
        pass
    def force_flush(self, timeout_millis=30000):
        return True

provider = LoggerProvider()
provider.add_log_record_processor(SimpleLogRecordProcessor(Count()))
telemetry.configure(logger_provider=provider)
guard().run(record(), ANSWER, known_ids=STORE)
sys.stdout.write("returned\n")  # no flush: the events left pending are written at exit
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    lines = out.stdout.split("\n")
    assert "returned" in lines
    assert sum(line.startswith("event ") for line in lines) == 4, out.stdout + out.stderr


def test_deferred_false_writes_the_events_inside_guard_run(exporters, blocked_worker) -> None:
    spans, _, tracer_provider = exporters
    telemetry.configure(
        tracer_provider=tracer_provider, logger_provider=None, logs=False, span_events=True, deferred=False
    )
    guard().run(record(), ANSWER, known_ids=STORE)  # the worker is held: only the request thread can have written them
    (guard_span,) = [s for s in spans.get_finished_spans() if s.name.startswith("citelock.guard")]
    assert len(guard_span.events) == 4
