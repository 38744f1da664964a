"""The OpenTelemetry integration against the real SDK (in-memory exporters): spans, parents, evaluation events."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import citelock
from citelock import Chunk, FakeBackend, UsageError, telemetry
from citelock.store import ReviewQueue
from support.otel_scenario import ANSWER, EXPECTED, STORE, guard, record


@dataclass
class Captured:
    spans: InMemorySpanExporter
    logs: InMemoryLogRecordExporter
    tracer_provider: TracerProvider

    def finished(self) -> tuple[ReadableSpan, ...]:
        assert telemetry.flush(30.0)  # the guard span ends on citelock's telemetry thread
        return self.spans.get_finished_spans()

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name.startswith(prefix)]

    def events(self) -> list[dict[str, object]]:
        assert telemetry.flush(30.0)
        out = []
        for item in self.logs.get_finished_logs():
            assert item.log_record.event_name == telemetry.EVALUATION_EVENT
            out.append({**dict(item.log_record.attributes or {}), "_span_id": item.log_record.span_id})
        return out


@pytest.fixture
def captured() -> Iterator[Captured]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    telemetry.configure(tracer_provider=tracer_provider, logger_provider=logger_provider)
    try:
        yield Captured(spans, logs, tracer_provider)
    finally:
        telemetry.configure()


def test_guard_run_nests_under_the_current_span_with_one_evaluation_per_citation(captured: Captured) -> None:
    tracer = captured.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("app.request") as app:
        result = guard().run(record(), ANSWER, known_ids=STORE)
    (guard_span,) = captured.named("citelock.guard")
    assert guard_span.name == "citelock.guard finance"
    assert guard_span.parent is not None and guard_span.parent.span_id == app.get_span_context().span_id
    assert guard_span.context.trace_id == app.get_span_context().trace_id
    assert guard_span.attributes["citelock.decision"] == result.decision
    judges = captured.named("citelock.judge")
    assert len(judges) == result.accounting.judge_calls + result.accounting.diagnosis_calls
    assert all(j.parent is not None and j.parent.span_id == guard_span.context.span_id for j in judges)
    assert {j.attributes["gen_ai.request.model"] for j in judges} == {"keyword-test 1"}

    events = captured.events()
    per_citation = {
        (e["citelock.claim_index"], e["citelock.citation_index"]): (
            e["gen_ai.evaluation.name"],
            e["gen_ai.evaluation.score.label"],
        )
        for e in events
        if "citelock.citation_index" in e
    }
    assert per_citation == EXPECTED
    (answer,) = [e for e in events if e["gen_ai.evaluation.name"] == "citelock.answer"]
    assert answer["gen_ai.evaluation.score.label"] == result.decision == "block"
    assert answer["gen_ai.evaluation.score.value"] == pytest.approx(1 / 3)
    assert all(e["gen_ai.response.id"] == "req-otel" for e in events)
    # parented to the guard span: no generation span is known to a bare Guard.run
    assert {e["_span_id"] for e in events} == {guard_span.context.span_id}


def test_the_callers_guard_is_not_touched(captured: Captured) -> None:
    g = guard()
    judge = g.judge
    g.run(record(), ANSWER, known_ids=STORE)
    assert g.judge is judge


def test_span_events_option_puts_the_evaluations_on_the_guard_span(captured: Captured) -> None:
    telemetry.configure(tracer_provider=captured.tracer_provider, logger_provider=None, logs=False, span_events=True)
    guard().run(record(), ANSWER, known_ids=STORE)
    (guard_span,) = captured.named("citelock.guard")
    names = [e.name for e in guard_span.events]
    assert names == [telemetry.EVALUATION_EVENT] * 4  # three citations and the answer
    assert captured.logs.get_finished_logs() == ()


def test_configure_refuses_to_emit_nowhere() -> None:
    with pytest.raises(UsageError, match="nowhere"):
        telemetry.configure(logs=False, span_events=False)


def test_check_report_through_emit(captured: Captured) -> None:
    report = citelock.check(record(), ANSWER, known_ids=STORE)
    assert telemetry.emit(report, response_id="chatcmpl-1") == 4  # three citations and the answer
    events = captured.events()
    # the free checks alone: support is not judged, so the unsupported claim's citation passes provenance
    labels = [e["gen_ai.evaluation.score.label"] for e in events if "citelock.citation_index" in e]
    assert labels == ["pass", "FABRICATED_ID", "pass"]
    assert {e["gen_ai.response.id"] for e in events} == {"chatcmpl-1"}
    (span,) = captured.named("citelock.evaluate")
    assert {e["_span_id"] for e in events} == {span.context.span_id}


def test_citelock_answer_spans_and_events_parented_to_the_generation(captured: Captured, tmp_path) -> None:
    chunks = [Chunk(id="c1", text="Revenue grew 12% in 2024.", metadata={"score": 0.9})]
    backend = FakeBackend([{"claims": [ANSWER["claims"][0]]}])
    client = citelock.Citelock(backend, log=str(tmp_path / "log.db"))
    tracer = captured.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("app.request") as app:
        result = client.answer("How did revenue do?", chunks)
    by_name = {s.name.split(" ")[0]: s for s in captured.finished()}
    answer_span = by_name["citelock.answer"]
    assert answer_span.parent is not None and answer_span.parent.span_id == app.get_span_context().span_id
    for step in ("citelock.assemble", "chat", "citelock.guard"):
        assert by_name[step].parent is not None and by_name[step].parent.span_id == answer_span.context.span_id
    generation = by_name["chat"]
    assert generation.attributes["gen_ai.operation.name"] == "chat"
    assert generation.attributes["gen_ai.response.id"] == result.request_id
    assert '"id":"c1"' in str(by_name["citelock.assemble"].attributes["gen_ai.retrieval.documents"])
    events = captured.events()
    assert events, "every answer has at least its answer-level evaluation"
    assert {e["_span_id"] for e in events} == {generation.context.span_id}
    # the logged prompt carries the trace it was answered in, for a later audit
    logged = client.log.get(result.request_id)  # type: ignore[union-attr]
    assert logged.metadata["traceparent"].split("-")[1:3] == [
        f"{answer_span.context.trace_id:032x}",
        f"{answer_span.context.span_id:016x}",
    ]


def test_aanswer_nests_its_steps_the_same_way(captured: Captured, tmp_path) -> None:
    import asyncio

    client = citelock.Citelock(FakeBackend([{"claims": [ANSWER["claims"][0]]}]))
    chunks = [Chunk(id="c1", text="Revenue grew 12% in 2024.")]
    with captured.tracer_provider.get_tracer("app").start_as_current_span("app.request"):
        asyncio.run(client.aanswer("How did revenue do?", chunks))
    by_name = {s.name.split(" ")[0]: s for s in captured.finished()}
    answer_span = by_name["citelock.answer"]
    for step in ("citelock.assemble", "chat", "citelock.guard"):
        assert by_name[step].parent is not None and by_name[step].parent.span_id == answer_span.context.span_id
    assert {e["_span_id"] for e in captured.events()} == {by_name["chat"].context.span_id}


def test_an_audit_outside_any_trace_lands_on_the_original_trace(captured: Captured) -> None:
    origin = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    logged = record().model_copy(update={"metadata": {"traceparent": origin}})
    guard().run(logged, ANSWER, known_ids=STORE)
    (guard_span,) = captured.named("citelock.guard")
    assert f"{guard_span.context.trace_id:032x}" == "ab" * 16
    assert guard_span.parent is not None and f"{guard_span.parent.span_id:016x}" == "cd" * 8
    # inside another trace (an audit job's span) it is linked to the original instead
    with captured.tracer_provider.get_tracer("job").start_as_current_span("audit.job"):
        guard().run(logged, ANSWER, known_ids=STORE)
    linked = captured.named("citelock.guard")[-1]
    assert [f"{link.context.trace_id:032x}" for link in linked.links] == ["ab" * 16]


def test_review_outcome_is_a_human_evaluation_on_the_original_trace(captured: Captured, tmp_path) -> None:
    origin = "00-" + "12" * 16 + "-" + "34" * 8 + "-01"
    logged = record().model_copy(update={"metadata": {"traceparent": origin}})
    result = guard().run(logged, ANSWER, known_ids=STORE)
    queue = ReviewQueue(str(tmp_path / "q.db"))
    entry = queue.enqueue_result(result)[0]
    assert telemetry.emit_review(entry, "accept", reviewer="ana", note="the passage does say so", record=logged) == 1
    (review,) = [e for e in captured.events() if e["gen_ai.evaluation.name"] == "citelock.review"]
    assert review["citelock.annotator.kind"] == "HUMAN"
    assert review["gen_ai.evaluation.score.label"] == "accept"
    assert review["citelock.entry_id"] == entry.id
    (span,) = captured.named("citelock.review")
    assert f"{span.context.trace_id:032x}" == "12" * 16


def test_malformed_traceparent_is_ignored_not_fatal(captured: Captured) -> None:
    logged = record().model_copy(update={"metadata": {"traceparent": "not-a-traceparent"}})
    guard().run(logged, ANSWER, known_ids=STORE)
    (guard_span,) = captured.named("citelock.guard")
    assert guard_span.parent is None and not guard_span.links


def test_global_providers_need_no_citelock_setup() -> None:
    code = """
from opentelemetry import trace, _logs
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
import sys
sys.path.insert(0, "tests")
from support.otel_scenario import ANSWER, STORE, guard, record
spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(spans)); trace.set_tracer_provider(tp)
lp = LoggerProvider(); lp.add_log_record_processor(SimpleLogRecordProcessor(logs)); _logs.set_logger_provider(lp)
guard().run(record(), ANSWER, known_ids=STORE)
import citelock.telemetry
assert citelock.telemetry.flush(30.0)
guards = [s for s in spans.get_finished_spans() if s.name.startswith("citelock.guard")]
print(len(guards), len(logs.get_finished_logs()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "4"]


def test_without_the_extra_nothing_is_imported_and_the_guard_runs() -> None:
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, "tests")
from support.otel_scenario import ANSWER, STORE, guard, record
import citelock, citelock.telemetry as t
result = guard().run(record(), ANSWER, known_ids=STORE)
print(result.decision, t.active(), any(m.startswith("opentelemetry") for m in sys.modules))
try:
    t.emit(result)
except citelock.MissingExtraError as exc:
    print("missing", exc.extra)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["block", "False", "False", "missing", "otel"]


def test_turned_off_by_environment() -> None:
    code = """
import sys
sys.path.insert(0, "tests")
import citelock.telemetry as t
from support.otel_scenario import ANSWER, STORE, guard, record
guard().run(record(), ANSWER, known_ids=STORE)
print(t.active(), "opentelemetry.trace" in sys.modules)
"""
    env = {**__import__("os").environ, "CITELOCK_TELEMETRY": "off"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["False", "False"]


def test_review_desk_outcome_is_emitted_on_the_logged_prompts_trace(captured: Captured, tmp_path) -> None:
    pytest.importorskip("fastapi", reason='the review desk needs its extra: pip install "citelock[review]"')
    from citelock.review import ReviewDesk
    from citelock.store import Credential, PromptLog

    db = str(tmp_path / "desk.db")
    origin = "00-" + "56" * 16 + "-" + "78" * 8 + "-01"
    logged = record("req-desk").model_copy(update={"metadata": {"traceparent": origin}})
    PromptLog(db).append(logged)
    entry = ReviewQueue(db).enqueue_result(guard().run(logged, ANSWER, known_ids=STORE))[0]
    reviewer = Credential(username="ana", role="reviewer", kind="token", csrf="x", expires_at=None)
    ReviewDesk(db).record_outcome(entry.id, reviewer, "escalate", category="ranking")
    (review,) = [e for e in captured.events() if e["gen_ai.evaluation.name"] == "citelock.review"]
    assert (review["gen_ai.evaluation.score.label"], review["citelock.reviewer"]) == ("escalate", "ana")
    (span,) = captured.named("citelock.review")
    assert f"{span.context.trace_id:032x}" == "56" * 16


def test_citelock_audit_emits_for_logged_traffic_on_each_rows_original_trace(captured: Captured, tmp_path) -> None:
    from citelock.audit import run_audit
    from support.audit_rows import make_row, write_jsonl

    traces = {i: f"{i + 1:032x}" for i in range(4)}
    rows = []
    for i, trace_id in traces.items():
        row = make_row(i)
        row["metadata"] = {"traceparent": f"00-{trace_id}-{i + 1:016x}-01"}
        rows.append(row)
    summary = run_audit([str(write_jsonl(tmp_path / "rows.jsonl", rows))], out=tmp_path / "out", processes=1)
    guards = captured.named("citelock.guard")
    assert len(guards) == summary.run_answers == len(rows)
    assert sorted(f"{s.context.trace_id:032x}" for s in guards) == sorted(traces.values())
    answers = [e for e in captured.events() if e["gen_ai.evaluation.name"] == "citelock.answer"]
    assert len(answers) == len(guards)


def test_in_process_judges_get_no_span_unless_asked(captured: Captured) -> None:
    from citelock.guard import Guard, SurfacePolicy
    from citelock.judges import LexicalJudge

    lexical = Guard(SurfacePolicy(name="finance", stakes="high"), LexicalJudge())
    result = lexical.run(record(), ANSWER, known_ids=STORE)
    assert result.accounting.judge_calls > 0 and captured.named("citelock.judge") == []
    telemetry.configure(tracer_provider=captured.tracer_provider, judge_spans="all")
    result = lexical.run(record(), ANSWER, known_ids=STORE)
    calls = result.accounting.judge_calls + result.accounting.diagnosis_calls
    assert len(captured.named("citelock.judge")) == calls
    with pytest.raises(UsageError, match="judge_spans"):
        telemetry.configure(judge_spans="some")  # type: ignore[arg-type]


def test_evaluating_parents_the_events_to_the_callers_generation(captured: Captured) -> None:
    tracer = captured.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("chat gpt-x") as generation:
        pass  # the caller's own openai call, already finished
    with telemetry.evaluating(span=generation, response_id="chatcmpl-42"):
        guard().run(record(), ANSWER, known_ids=STORE)
    events = captured.events()
    assert {e["_span_id"] for e in events} == {generation.get_span_context().span_id}
    assert {e["gen_ai.response.id"] for e in events} == {"chatcmpl-42"}
    guard().run(record(), ANSWER, known_ids=STORE)  # outside the block: back to the guard span and the request id
    later = captured.events()[len(events) :]
    assert {e["gen_ai.response.id"] for e in later} == {"req-otel"}


def test_unparseable_answer_is_an_error_on_the_guard_span(captured: Captured) -> None:
    with pytest.raises(citelock.ParseError):
        guard().run(record(), {"claims": "not a list"})
    (span,) = captured.named("citelock.guard")
    assert span.attributes["error.type"] == "ParseError"
    assert span.status.status_code.name == "ERROR"
    assert captured.events() == []


def test_citelock_stream_is_traced_as_answer_and_keeps_no_span_current_between_events(captured: Captured) -> None:
    import asyncio

    from opentelemetry import trace as otel_trace

    chunks = [Chunk(id="c1", text="Revenue grew 12% in 2024.")]
    tracer = captured.tracer_provider.get_tracer("app")
    for run in ("sync", "async"):
        client = citelock.Citelock(FakeBackend([{"claims": [ANSWER["claims"][0]]}]))
        captured.spans.clear()
        captured.logs.clear()
        with tracer.start_as_current_span("app.request") as app:
            if run == "sync":
                for _ in client.stream("How did revenue do?", chunks):
                    assert otel_trace.get_current_span() is app
            else:

                async def consume(app: object = app, client: citelock.Citelock = client) -> None:
                    async for _ in client.astream("How did revenue do?", chunks):
                        assert otel_trace.get_current_span() is app

                asyncio.run(consume())
        by_name = {s.name.split(" ")[0]: s for s in captured.finished()}
        answer_span = by_name["citelock.answer"]
        assert answer_span.parent is not None and answer_span.parent.span_id == app.get_span_context().span_id
        for step in ("citelock.assemble", "chat", "citelock.guard"):
            assert by_name[step].parent is not None, (run, step)
            assert by_name[step].parent.span_id == answer_span.context.span_id, (run, step)
        assert {e["_span_id"] for e in captured.events()} == {by_name["chat"].context.span_id}, run
