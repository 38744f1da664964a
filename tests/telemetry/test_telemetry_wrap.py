"""``wrap(client)`` calls traced as ``Citelock.answer`` is: sync, async and ``stream=True`` (in-memory SDK exporters).

The non-streamed calls go through a scripted HTTP transport (canned completions), the streamed ones to a real SSE
server on 127.0.0.1. What is asserted is what the integration guarantees for any answer: one ``citelock.answer``
span under the caller's span with its assemble, chat and guard steps, the chat span carrying the provider's
response id and usage, and every evaluation event parented to that chat span with that response id.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import citelock
from citelock import telemetry

openai = pytest.importorskip("openai")
from support.openai_transport import Server, completion, scripted_async_client, scripted_client  # noqa: E402

CHUNKS = [
    {"id": "kb-1", "text": "The ferry leaves Arden at 7:15 every weekday. It returns at 18:40."},
    {"id": "kb-2", "text": "Bicycles travel free on the ferry. Dogs must be on a lead."},
]
FABRICATED_IDS = {"ID_NOT_IN_PROMPT", "FABRICATED_ID", "STALE_ID"}
STEP = 5  # characters per SSE chunk


def cited(chunk_id: str, span: str, text: str) -> str:
    return json.dumps({"claims": [{"text": text, "citations": [{"chunk_id": chunk_id, "span": span}]}]})


GOOD = cited("kb-1", "The ferry leaves Arden at 7:15 every weekday.", "The ferry leaves at 7:15.")
ANSWER = cited("kb-999", "The ferry leaves Arden at 7:15 every weekday.", "The ferry leaves at 6:00.")


def conversation() -> list[dict[str, str]]:
    """The caller's own turn, the chunks in its own format."""
    passages = "\n".join(f"Passage [{c['id']}]: {c['text']}" for c in CHUNKS)
    return [
        {"role": "system", "content": "You are Harbourline's support assistant. Be brief."},
        {"role": "user", "content": f"Use these passages.\n{passages}\n\nQuestion: When does the ferry leave?"},
    ]


class _SSE(http.server.BaseHTTPRequestHandler):
    """Streams ``body`` over SSE (it ignores every constraint), STEP characters a chunk, completion id ``s-1``."""

    protocol_version = "HTTP/1.0"
    body = GOOD

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        pieces = [self.body[n : n + STEP] for n in range(0, len(self.body), STEP)]
        for n, piece in enumerate(pieces):
            choice = {
                "index": 0,
                "delta": {"content": piece},
                "finish_reason": "stop" if n == len(pieces) - 1 else None,
            }
            chunk = {"id": "s-1", "object": "chat.completion.chunk", "created": 0, "model": "sse", "choices": [choice]}
            try:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the client closed the stream
                return
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


def _serve(body: str) -> Iterator[tuple[str, None]]:
    handler = type("Handler", (_SSE,), {"body": body})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", None
    finally:
        httpd.shutdown()
        httpd.server_close()


class Captured:
    def __init__(self) -> None:
        self.spans, self.logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def by_step(self) -> dict[str, ReadableSpan]:
        assert telemetry.flush(30.0)
        spans = self.spans.get_finished_spans()
        steps = {s.name.split(" ")[0]: s for s in spans}
        assert len(steps) == len(spans), [s.name for s in spans]  # one span per step
        return steps

    def events(self) -> list[tuple[dict[str, Any], int | None]]:
        assert telemetry.flush(30.0)
        return [(dict(i.log_record.attributes or {}), i.log_record.span_id) for i in self.logs.get_finished_logs()]


@pytest.fixture
def captured() -> Iterator[Captured]:
    c = Captured()
    telemetry.configure(tracer_provider=c.tracer_provider, logger_provider=c.logger_provider)
    try:
        yield c
    finally:
        telemetry.configure()


def _assert_traced_like_answer(
    captured: Captured, app: Any, response_id: str, label: str = "ID_NOT_IN_PROMPT"
) -> dict[str, ReadableSpan]:
    steps = captured.by_step()
    answer = steps["citelock.answer"]
    assert answer.parent is not None and answer.parent.span_id == app.get_span_context().span_id
    for step in ("citelock.assemble", "chat", "citelock.guard"):
        assert steps[step].parent is not None and steps[step].parent.span_id == answer.context.span_id, step
        assert steps[step].context.trace_id == app.get_span_context().trace_id
    chat = steps["chat"]
    assert chat.attributes is not None and chat.attributes["gen_ai.response.id"] == response_id
    assert chat.end_time is not None and chat.end_time <= steps["citelock.guard"].start_time  # guard after generation
    events = captured.events()
    assert events, "every answer has at least its answer-level evaluation"
    assert {span_id for _, span_id in events} == {chat.context.span_id}
    assert {e["gen_ai.response.id"] for e, _ in events} == {response_id}
    labels = {e["gen_ai.evaluation.score.label"] for e, _ in events if e["gen_ai.evaluation.name"] != "citelock.answer"}
    assert labels == {label}  # the free checks' verdict on an id that is in no chunk of the prompt
    return steps


def test_a_wrapped_call_is_traced_as_citelock_answer(captured: Captured, tmp_path: Path) -> None:
    server = Server(completion(ANSWER))
    client = citelock.wrap(scripted_client(server), server="llama-cpp-python", log=str(tmp_path / "log.db"))
    with captured.tracer_provider.get_tracer("app").start_as_current_span("app.request") as app:
        response = client.chat.completions.create(model="m", messages=conversation(), chunks=CHUNKS)
    steps = _assert_traced_like_answer(captured, app, "chatcmpl-test")
    chat = steps["chat"]
    assert chat.kind == trace.SpanKind.CLIENT
    assert chat.attributes is not None and chat.attributes["gen_ai.usage.input_tokens"] == 50
    assert chat.attributes["gen_ai.usage.output_tokens"] == 20
    assert chat.attributes["citelock.request_id"] == response.citelock.request_id
    assert '"id":"kb-1"' in str(steps["citelock.assemble"].attributes["gen_ai.retrieval.documents"])


def test_an_async_wrapped_call_is_traced_the_same_way(captured: Captured) -> None:
    client = citelock.wrap(scripted_async_client(Server(completion(ANSWER))), server="llama-cpp-python")

    async def call() -> Any:
        with captured.tracer_provider.get_tracer("app").start_as_current_span("app.request") as app:
            await client.chat.completions.create(model="m", messages=conversation(), chunks=CHUNKS)
        return app

    app = asyncio.run(call())
    _assert_traced_like_answer(captured, app, "chatcmpl-test")


@pytest.fixture
def fabricating() -> Iterator[tuple[str, None]]:
    yield from _serve(ANSWER)


def test_a_streamed_wrapped_call_is_traced_and_no_span_leaks_into_the_callers_loop(
    captured: Captured, fabricating: tuple[str, None]
) -> None:
    url, _ = fabricating
    client = citelock.wrap(openai.OpenAI(base_url=url, api_key="x", max_retries=0), server="llama-cpp-python")
    with captured.tracer_provider.get_tracer("app").start_as_current_span("app.request") as app:
        events = client.chat.completions.create(model="sse", messages=conversation(), chunks=CHUNKS, stream=True)
        seen = []
        for event in events:
            assert trace.get_current_span() is app  # citelock's spans are current only inside its own steps
            seen.append(event)
    assert seen[-1].type == "done"
    # the fabricated id cut the stream: a partial generation has no provider id, so the request id stands in
    _assert_traced_like_answer(captured, app, seen[-1].answer.request_id)


def test_an_async_streamed_wrapped_call_is_traced_the_same_way(
    captured: Captured, fabricating: tuple[str, None]
) -> None:
    url, _ = fabricating
    client = citelock.wrap(openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0), server="llama-cpp-python")

    async def call() -> tuple[Any, Any]:
        with captured.tracer_provider.get_tracer("app").start_as_current_span("app.request") as app:
            stream = await client.chat.completions.create(
                model="sse", messages=conversation(), chunks=CHUNKS, stream=True
            )
            seen = []
            async for event in stream:
                assert trace.get_current_span() is app
                seen.append(event)
        return app, seen[-1]

    app, done = asyncio.run(call())
    _assert_traced_like_answer(captured, app, done.answer.request_id)


def test_a_stream_closed_early_still_ends_its_spans(captured: Captured, fabricating: tuple[str, None]) -> None:
    url, _ = fabricating
    client = citelock.wrap(openai.OpenAI(base_url=url, api_key="x", max_retries=0), server="llama-cpp-python")
    with captured.tracer_provider.get_tracer("app").start_as_current_span("app.request"):
        events = client.chat.completions.create(model="sse", messages=conversation(), chunks=CHUNKS, stream=True)
        next(iter(events))
        events.close()  # the consumer stops reading: citelock persists what was checked, the spans end
    steps = captured.by_step()
    assert {"citelock.answer", "citelock.assemble", "chat", "citelock.guard"} <= set(steps)
    assert steps["citelock.guard"].parent is not None
    assert steps["citelock.guard"].parent.span_id == steps["citelock.answer"].context.span_id


@pytest.fixture
def good() -> Iterator[tuple[str, None]]:
    yield from _serve(GOOD)


def test_a_whole_stream_evaluates_the_providers_response_id(captured: Captured, good: tuple[str, Any]) -> None:
    client = citelock.wrap(openai.OpenAI(base_url=good[0], api_key="x", max_retries=0), server="llama-cpp-python")
    list(client.chat.completions.create(model="sse", messages=conversation(), chunks=CHUNKS, stream=True))
    chat = captured.by_step()["chat"]
    assert chat.attributes is not None and chat.attributes["gen_ai.response.id"] == "s-1"
    assert {e["gen_ai.response.id"] for e, _ in captured.events()} == {"s-1"}
    assert {span_id for _, span_id in captured.events()} == {chat.context.span_id}


@pytest.mark.server
def test_a_wrapped_call_on_the_real_server_is_traced(captured: Captured, llama_server: Any, tmp_path: Path) -> None:
    options = citelock.SchemaOptions(max_claims=1, max_citations=1, max_text_chars=40, max_span_chars=60)
    messages = conversation()
    own = openai.OpenAI(base_url=llama_server.base_url, api_key="local", max_retries=0, timeout=300)
    client = citelock.wrap(own, server="llama-cpp-python", log=str(tmp_path / "log.db"), options=options)
    with captured.tracer_provider.get_tracer("app").start_as_current_span("app.request") as app:
        response = client.chat.completions.create(messages=messages, chunks=CHUNKS, max_tokens=200)
    steps = captured.by_step()
    assert steps["citelock.answer"].parent is not None
    assert steps["citelock.answer"].parent.span_id == app.get_span_context().span_id
    chat = steps["chat"]
    assert chat.attributes is not None and chat.attributes["gen_ai.response.id"] == response.id  # the server's id
    assert chat.attributes["gen_ai.usage.input_tokens"] == response.usage.prompt_tokens
    events = captured.events()
    assert {span_id for _, span_id in events} == {chat.context.span_id}
    assert {e["gen_ai.response.id"] for e, _ in events} == {response.id}
    (answer,) = [e for e, _ in events if e["gen_ai.evaluation.name"] == "citelock.answer"]
    assert answer["gen_ai.evaluation.score.label"] == response.citelock.decision
    assert not {e["gen_ai.evaluation.score.label"] for e, _ in events} & FABRICATED_IDS  # the constraint's guarantee
