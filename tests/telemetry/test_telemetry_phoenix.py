"""citelock's spans and evaluations in a real Arize Phoenix, exported over OTLP/HTTP, read back with its client.

What Phoenix (20.x) does with them: it ingests OTLP traces only. Its ``/v1/logs`` answers 405, so the
``gen_ai.evaluation.result`` log records the conventions recommend do not reach it; with
``configure(span_events=True)`` each evaluation is a span event on the ``citelock.guard`` span, which Phoenix
stores and shows with the span. Phoenix's own evaluation objects are *annotations* (REST API, ``annotator_kind``
LLM / CODE / HUMAN): the last test turns the events into annotations with Phoenix's client, the recipe the docs give.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from phoenix.client import Client

from citelock import telemetry
from citelock.store import ReviewQueue
from support.otel_scenario import ANSWER, EXPECTED, STORE, guard, record
from support.phoenix_server import phoenix_executable, running_phoenix

pytestmark = pytest.mark.phoenix_server
PROJECT = "citelock-tests"
WAIT_S = 60.0


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    executable = phoenix_executable()
    if executable is None:
        pytest.skip("no Phoenix server: set CITELOCK_PHOENIX or run scripts/test.sh (it makes .venv-phoenix)")
    with running_phoenix(executable, tmp_path_factory.mktemp("phoenix")) as base:
        yield base


@pytest.fixture
def exporting(phoenix: str) -> Iterator[TracerProvider]:
    resource = Resource.create({"service.name": "citelock-tests", "openinference.project.name": PROJECT})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
    telemetry.configure(tracer_provider=provider, span_events=True)
    try:
        yield provider
    finally:
        telemetry.configure()
        provider.shutdown()


def _trace_spans(client: Client, trace_id: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            spans = client.spans.get_spans(project_identifier=PROJECT, trace_ids=[trace_id], limit=1000)
        except httpx.HTTPStatusError as exc:  # the project exists once Phoenix has inserted its first span
            if exc.response.status_code != 404 or time.monotonic() > deadline:
                raise
            spans = []
        if len(spans) >= count or time.monotonic() > deadline:
            return [dict(s) for s in spans]
        time.sleep(0.5)


def test_a_guarded_answer_is_one_trace_in_phoenix_with_one_evaluation_per_citation(
    phoenix: str, exporting: TracerProvider
) -> None:
    tracer = exporting.get_tracer("app")
    with tracer.start_as_current_span("app.request") as app:
        result = guard().run(record(), ANSWER, known_ids=STORE)
    assert telemetry.flush(30.0) and exporting.force_flush(30_000)
    trace_id = f"{app.get_span_context().trace_id:032x}"
    judge_calls = result.accounting.judge_calls + result.accounting.diagnosis_calls
    spans = _trace_spans(Client(base_url=phoenix), trace_id, 2 + judge_calls)
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert len(spans) == 2 + judge_calls, [s["name"] for s in spans]
    (root,) = [s for s in spans if s["name"] == "app.request"]
    (guarded,) = [s for s in spans if s["name"] == "citelock.guard finance"]
    assert guarded.get("parent_id") == root["context"]["span_id"]
    judges = [s for s in spans if s["name"].startswith("citelock.judge")]
    assert judges and all(by_id[j["parent_id"]] is guarded for j in judges)
    events = [e for e in guarded.get("events", []) if e["name"] == telemetry.EVALUATION_EVENT]
    per_citation = {
        (e["attributes"]["citelock.claim_index"], e["attributes"]["citelock.citation_index"]): (
            e["attributes"]["gen_ai.evaluation.name"],
            e["attributes"]["gen_ai.evaluation.score.label"],
        )
        for e in events
        if "citelock.citation_index" in e["attributes"]
    }
    assert per_citation == EXPECTED
    (answer,) = [e for e in events if e["attributes"]["gen_ai.evaluation.name"] == "citelock.answer"]
    assert answer["attributes"]["gen_ai.evaluation.score.label"] == result.decision


def test_phoenix_does_not_take_otlp_logs(phoenix: str) -> None:
    response = httpx.post(f"{phoenix}/v1/logs", content=b"", headers={"Content-Type": "application/x-protobuf"})
    assert response.status_code in (404, 405)


def _annotate(client: Client, span: dict[str, Any], kind: str) -> None:
    """The docs' recipe: each gen_ai.evaluation.result span event as a Phoenix annotation on its span."""
    for event in span.get("events", []):
        if event["name"] != telemetry.EVALUATION_EVENT:
            continue
        attrs = event["attributes"]
        client.spans.add_span_annotation(
            span_id=span["context"]["span_id"],
            annotation_name=attrs["gen_ai.evaluation.name"],
            annotator_kind=kind,  # type: ignore[arg-type]
            label=attrs.get("gen_ai.evaluation.score.label"),
            score=attrs.get("gen_ai.evaluation.score.value"),
            explanation=attrs.get("gen_ai.evaluation.explanation"),
            identifier=f"{attrs.get('citelock.claim_index', '')}:{attrs.get('citelock.citation_index', '')}",
            sync=True,
        )


def test_review_outcome_reaches_the_same_trace_as_a_human_annotation(
    phoenix: str, exporting: TracerProvider, tmp_path: Path
) -> None:
    tracer = exporting.get_tracer("app")
    with tracer.start_as_current_span("app.request") as app:
        logged = record("req-review").model_copy(update={"metadata": telemetry.trace_metadata()})
        result = guard().run(logged, ANSWER, known_ids=STORE)
    entry = ReviewQueue(str(tmp_path / "q.db")).enqueue_result(result)[0]
    # later, outside any trace: the reviewer's outcome goes to the trace the logged prompt carries
    assert telemetry.emit_review(entry, "repair", reviewer="ana", note="cite clause 7", record=logged) == 1
    assert telemetry.flush(30.0) and exporting.force_flush(30_000)
    trace_id = f"{app.get_span_context().trace_id:032x}"
    client = Client(base_url=phoenix)
    judge_calls = result.accounting.judge_calls + result.accounting.diagnosis_calls
    spans = _trace_spans(client, trace_id, 3 + judge_calls)
    (guarded,) = [s for s in spans if s["name"].startswith("citelock.guard")]
    (review,) = [s for s in spans if s["name"] == "citelock.review"]
    _annotate(client, guarded, "CODE")
    _annotate(client, review, "HUMAN")
    annotations = client.spans.get_span_annotations(
        span_ids=[guarded["context"]["span_id"], review["context"]["span_id"]], project_identifier=PROJECT
    )
    human = [a for a in annotations if a["annotator_kind"] == "HUMAN"]
    assert [(a["name"], a["result"]["label"]) for a in human] == [("citelock.review", "repair")]
    code = {(a["name"], a["result"]["label"]) for a in annotations if a["annotator_kind"] == "CODE"}
    assert set(EXPECTED.values()) <= code


def test_a_wrapped_call_is_one_trace_in_phoenix_with_its_evaluations_on_the_chat_span(
    phoenix: str, exporting: TracerProvider
) -> None:
    pytest.importorskip("openai")
    from test_telemetry_wrap import ANSWER as WRAPPED
    from test_telemetry_wrap import CHUNKS, conversation

    import citelock
    from support.openai_transport import Server, completion, scripted_client

    client = citelock.wrap(scripted_client(Server(completion(WRAPPED))), server="llama-cpp-python")
    with exporting.get_tracer("app").start_as_current_span("app.request") as app:
        client.chat.completions.create(model="m", messages=conversation(), chunks=CHUNKS)
    assert telemetry.flush(30.0) and exporting.force_flush(30_000)
    spans = _trace_spans(Client(base_url=phoenix), f"{app.get_span_context().trace_id:032x}", 5)
    by_step = {s["name"].split(" ")[0]: s for s in spans}
    assert set(by_step) == {"app.request", "citelock.answer", "citelock.assemble", "chat", "citelock.guard"}
    answer = by_step["citelock.answer"]
    assert answer.get("parent_id") == by_step["app.request"]["context"]["span_id"]
    for step in ("citelock.assemble", "chat", "citelock.guard"):
        assert by_step[step].get("parent_id") == answer["context"]["span_id"], step
    assert by_step["chat"]["attributes"]["gen_ai.response.id"] == "chatcmpl-test"
    events = [e for e in by_step["citelock.guard"].get("events", []) if e["name"] == telemetry.EVALUATION_EVENT]
    assert events and {e["attributes"]["gen_ai.response.id"] for e in events} == {"chatcmpl-test"}
