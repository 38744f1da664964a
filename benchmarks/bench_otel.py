"""What the OpenTelemetry integration adds to the guard path: per answer, 20 citations, p50/p95.

Run: python benchmarks/bench_otel.py [--answers 300] [--rounds 6] [--no-phoenix]
(needs ``pip install -e ".[dev]"`` for the SDK and exporter; Phoenix from ``.venv-phoenix`` or ``$CITELOCK_PHOENIX``,
which ``scripts/test.sh`` makes)

One answer = ``Guard(SurfacePolicy(stakes="high"), LexicalJudge()).run(record, answer)``: 20 claims, each citing one
of 20 assembled chunks with a verbatim span, every citation judged (20 judge calls, so 20 judge spans when traced).
Modes, each timed on the same answers, interleaved in rounds (blocks of answers per mode per round) so drift on
a shared machine hits every mode alike:

- ``off``: ``telemetry.configure(enabled=False)``: the guard as without the extra (one flag check).
- ``off + a telemetry-thread round trip``: ``off``, but between answers (outside the timed region) a job that
  does nothing goes through citelock's telemetry thread and is waited for, as the ``on`` rows wait for their
  events: the request thread sleeps and wakes between answers. What this row adds over ``off`` is the cost of
  that hand-off to the next answer (caches, scheduling), not citelock's work: compare the ``on`` rows with it.
- ``off + like work on the telemetry thread``: the same, the job doing what the worker does for one answer (a
  span and its 21 evaluation events, no exporter) on an unrelated, precomputed result: what that much work on
  another thread between answers costs the next answer, with no integration on the request thread at all.
- ``API, no provider``: the extra installed, no SDK configured: the OpenTelemetry API's no-op tracer and logger
  (a non-recording span per guard run; no judge proxies, no events built).
- ``on: Phoenix``: the SDK, a ``BatchSpanProcessor`` with the OTLP/HTTP exporter to a local Phoenix, evaluations
  as span events (Phoenix reads spans only): what a Phoenix user configures.
- ``on: discarding exporter, no Phoenix``: the same SDK set-up, its batch processor exporting to an exporter
  that discards the spans: no OTLP encoding, no Phoenix process ingesting on the same cores.
- ``on: Phoenix + log records``: the same, plus the evaluations as log records through a
  ``BatchLogRecordProcessor`` to an exporter that discards them (Phoenix takes no logs).
- ``on: Phoenix + a span per judge call``: ``judge_spans="all"``. By default (``auto``) the lexical judge's calls
  get no span (microseconds each, in process: a span would cost more than the call); a judge that calls a model
  gets one per call.
- ``..., on the request thread``: the same with ``deferred=False``: the events built, and the guard span ended,
  inside ``Guard.run`` (how every answer was traced before the telemetry thread; the "before" rows).

By default (``deferred=True``) a guard run whose judges are citelock's in-process ones captures its start and end
times and its trace context on the request thread and hands the result to citelock's telemetry thread, which
starts and ends the guard span from them and builds the 21 events. After each timed answer the bench
calls ``telemetry.flush()`` outside the timed region: the worker's work is done between answers, as in a service
where each answer waits seconds for its generation. ``all-thread cpu`` is the process's CPU time per answer over
a block, flush and exporter threads included (the mean): the total work, wherever it runs.

A second table times the integration alone: ``Guard.run``'s telemetry wrapper around a run that returns a
precomputed result (the same 20-citation result), so the guard's own variance on a loaded machine does not
drown the difference. ``added`` there is what the integration costs a call; its ratios are against a call that
does nothing, so read the added column.

Spans are 1 guard span per answer (+20 judge spans in the last row), events 21 per answer (20 citations, the
answer). The exporter works in its own thread, so on a loaded machine its work competes for the GIL and the CPUs
with the timed thread and with the local Phoenix ingesting: the "on" rows include that contention.

Two clocks per answer: wall time, and the CPU time of the thread that runs the guard (``time.thread_time``: what
the integration costs the request thread itself; the exporter's thread and other processes do not count, so it
is the steadier figure on a loaded machine). ``added`` is the mode's p50 minus ``off``'s p50, from this one run;
``paired`` is the median over rounds of the same difference within each round (the machine's drift between
rounds cancels out: the steadier figure on a shared machine).
Goal: under 0.3 ms added at p50 (on).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from citelock import Chunk, Guard, SurfacePolicy, assemble, serialize, telemetry
from citelock._observe import guard_observer
from citelock.judges import LexicalJudge
from citelock.telemetry import _deferred

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.phoenix_server import phoenix_executable, running_phoenix

CITATIONS = 20


def scenario() -> tuple[Any, dict[str, Any]]:
    chunks = [
        Chunk(id=f"c{i}", text=f"In {2000 + i} the plant in region {i} shipped {100 + i} turbines to the port of call.")
        for i in range(CITATIONS)
    ]
    record = serialize(assemble("What did the plants ship?", chunks), request_id="bench-otel")
    claims = [
        {
            "text": f"In {2000 + i} the plant in region {i} shipped {100 + i} turbines.",
            "citations": [{"chunk_id": f"c{i}", "span": f"shipped {100 + i} turbines"}],
        }
        for i in range(CITATIONS)
    ]
    return record, {"claims": claims}


@contextmanager
def mode_phoenix(
    base: str | None, logs: bool, judge_spans: telemetry.JudgeSpans = "auto", deferred: bool = True
) -> Iterator[Callable[[], None]]:
    """The SDK with a batch exporter to Phoenix at ``base`` (None: to an exporter that discards the spans)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult

    class Discard(LogRecordExporter):  # Phoenix takes no logs: the SDK's work up to the exporter, nothing after
        def export(self, batch: Any) -> LogRecordExportResult:
            return LogRecordExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class DiscardSpans(SpanExporter):  # the SDK's batching up to the exporter, no encoding, no Phoenix
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    resource = Resource.create({"service.name": "bench-otel", "openinference.project.name": "bench-otel"})
    tracer_provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces") if base is not None else DiscardSpans()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    logger_provider = None
    if logs:
        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(Discard()))

    def apply() -> None:
        telemetry.configure(
            tracer_provider=tracer_provider,
            logger_provider=logger_provider,
            logs=logs,
            span_events=True,
            judge_spans=judge_spans,
            deferred=deferred,
        )

    try:
        yield apply
    finally:
        tracer_provider.shutdown()
        if logger_provider is not None:
            logger_provider.shutdown()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=300, help="timed answers per mode")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds (answers are split across them)")
    parser.add_argument(
        "--no-phoenix", action="store_true", help="only the off, no-provider and discarding-exporter rows"
    )
    args = parser.parse_args()
    record, answer = scenario()
    guard = Guard(SurfacePolicy(name="bench", stakes="high"), LexicalJudge())
    work = like_work()
    BETWEEN["off + a telemetry-thread round trip"] = round_trip
    BETWEEN["off + like work on the telemetry thread"] = lambda: round_trip(work)
    assert len(guard.run(record, answer).report.citations) == CITATIONS

    with ExitStack() as stack:
        modes: dict[str, Callable[[], None]] = {
            "off": lambda: telemetry.configure(enabled=False),
            "off + a telemetry-thread round trip": lambda: telemetry.configure(enabled=False),
            "off + like work on the telemetry thread": lambda: telemetry.configure(enabled=False),
            "API, no provider": lambda: telemetry.configure(),
        }
        modes["on: discarding exporter, no Phoenix"] = stack.enter_context(mode_phoenix(None, logs=False))
        if not args.no_phoenix:
            executable = phoenix_executable()
            if executable is None:
                raise SystemExit("no Phoenix: set CITELOCK_PHOENIX or run scripts/test.sh (or pass --no-phoenix)")
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            base = stack.enter_context(running_phoenix(executable, workdir))
            modes["on: Phoenix (spans + span events)"] = stack.enter_context(mode_phoenix(base, logs=False))
            modes["on: Phoenix + log records"] = stack.enter_context(mode_phoenix(base, logs=True))
            modes["on: Phoenix + a span per judge call"] = stack.enter_context(
                mode_phoenix(base, logs=False, judge_spans="all")
            )
            modes["on: Phoenix, on the request thread"] = stack.enter_context(
                mode_phoenix(base, logs=False, deferred=False)
            )
            modes["on: Phoenix + logs, on the request thread"] = stack.enter_context(
                mode_phoenix(base, logs=True, deferred=False)
            )
        full = measure(modes, lambda: guard.run(record, answer), args.answers, args.rounds)
        fixed = guard.run(record, answer)

        def alone() -> object:  # the integration around no work: what Guard.run does around its own
            observer = guard_observer()
            if observer is None:
                return fixed
            return observer(lambda guard, record, answer, known_ids=None: fixed, guard, record, answer, None)

        own = measure(modes, alone, args.answers * 4, args.rounds)
        telemetry.configure()

    print(
        f"guard path per answer, {CITATIONS} citations, {CITATIONS} judge calls (lexical); "
        f"{args.answers} answers per mode, {args.rounds} interleaved rounds; load {os.getloadavg()[0]:.2f}"
    )
    table(full)
    print(
        f"\nthe integration alone (Guard.run's telemetry around a precomputed result), {args.answers * 4} calls a mode"
    )
    table(own)
    print(f"answers whose events the telemetry queue dropped: {telemetry.dropped()}")


Samples = dict[str, tuple[list[float], list[float], list[float]]]


def measure(modes: dict[str, Callable[[], None]], call: Callable[[], object], answers: int, rounds: int) -> Samples:
    """Per mode: wall ms and request-thread CPU ms per call, and the process's CPU ms per call over each block."""
    out: Samples = {name: ([], [], []) for name in modes}
    block = max(1, answers // rounds)
    for apply in modes.values():  # warm-up: imports, caches, exporter connections
        apply()
        for _ in range(20):
            call()
        telemetry.flush()
    names = list(modes)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # each round starts one mode later
            wall, cpu, process = out[name]
            modes[name]()
            between = BETWEEN.get(name, telemetry.flush)
            block_cpu = time.process_time_ns()
            for _ in range(block):
                started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
                call()
                cpu.append((time.thread_time_ns() - started_cpu) / 1e6)
                wall.append((time.perf_counter_ns() - started) / 1e6)
                between()  # outside the timed region: the worker's work, between answers
            process.append((time.process_time_ns() - block_cpu) / 1e6 / block)
    return out


def round_trip(work: Callable[[], None] = lambda: None) -> None:
    """A job through the telemetry thread, waited for: by default one that does nothing (the hand-off alone)."""
    _deferred.submit(_deferred.Job(work, lambda: None))
    telemetry.flush()


def like_work() -> Callable[[], None]:
    """The worker's work for one answer, on an unrelated result: a span with its 21 evaluation events (no exporter)."""
    from opentelemetry.sdk.trace import TracerProvider

    from citelock.telemetry._events import evaluation_events

    record, answer = scenario()
    result = Guard(SurfacePolicy(name="bench", stakes="high"), LexicalJudge()).run(record, answer)
    tracer = TracerProvider().get_tracer("bench-otel")

    def work() -> None:
        span = tracer.start_span("citelock.guard bench")
        for event in evaluation_events(result):
            span.add_event("gen_ai.evaluation.result", event)
        span.end()

    return work


BETWEEN: dict[str, Callable[[], None]] = {}  # the off rows' work between answers (default: telemetry.flush)


def paired_added(cpu: list[float], off_cpu: list[float], rounds: int) -> float:
    """The median over rounds of (this mode's request-thread CPU p50 - ``off``'s) within the same round.

    Each round's blocks ran minutes apart from other rounds' but seconds apart from each other, so the pairing
    cancels the machine's drift (other processes' load) that moves the whole-run p50s.
    """
    size = len(cpu) // rounds
    return statistics.median(
        statistics.median(cpu[r * size : (r + 1) * size]) - statistics.median(off_cpu[r * size : (r + 1) * size])
        for r in range(rounds)
    )


def table(samples: Samples) -> None:
    """Print p50/p95 wall and request-thread CPU, the p50 added over ``off`` and the ratio, and all-thread CPU."""
    off, off_cpu = statistics.median(samples["off"][0]), statistics.median(samples["off"][1])
    rounds = len(samples["off"][2])
    print(
        f"{'mode':42} {'wall p50':>9} {'wall p95':>9} {'added':>7} {'ratio':>6} "
        f"{'cpu p50':>8} {'cpu p95':>8} {'added':>7} {'ratio':>6} {'paired':>7} {'all-thread cpu':>15}   (ms)"
    )
    for name, (wall, cpu, process) in samples.items():
        p50, c50 = statistics.median(wall), statistics.median(cpu)
        paired = paired_added(cpu, samples["off"][1], rounds)
        print(
            f"{name:42} {p50:9.3f} {percentile(wall, 0.95):9.3f} {p50 - off:7.3f} {p50 / off:6.2f} "
            f"{c50:8.3f} {percentile(cpu, 0.95):8.3f} {c50 - off_cpu:7.3f} {c50 / off_cpu:6.2f} {paired:7.3f} "
            f"{statistics.fmean(process):15.3f}"
        )


if __name__ == "__main__":
    main()
