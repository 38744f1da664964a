"""citelock.wrap over the caller's own openai client (scripted transport and a real HTTP server on 127.0.0.1).

What is asserted is what the wrapper guarantees: the caller's messages are sent and logged exactly (plus what
citelock injected, recorded), the constraint is in the request and in the log, bad calls raise before anything is
logged or sent, a server that ignores the constraint is never reported as enforced, SDK errors arrive typed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import ReasonCode
from citelock._wrap import BLOCKED_TEXT, AsyncWrappedOpenAI, WrappedOpenAI
from citelock.errors import BackendConnectionError, BackendHTTPError, InputError, UsageError
from citelock.judges import LexicalJudge

openai = pytest.importorskip("openai")
from support.openai_transport import Server, completion, scripted_async_client, scripted_client  # noqa: E402

SYSTEM = {"role": "system", "content": "You are Harbourline's support assistant. Be brief."}
CHUNKS = [
    {"id": "kb-1", "text": "The ferry leaves Arden at 7:15 every weekday. It returns at 18:40."},
    {"id": "kb-2", "text": "Bicycles travel free on the ferry. Dogs must be on a lead."},
]


def own_user_turn(question: str) -> dict[str, str]:
    """The chunks in the caller's own user message, in the caller's own format."""
    passages = "\n".join(f"Passage [{c['id']}]: {c['text']}" for c in CHUNKS)
    return {"role": "user", "content": f"Use these passages.\n{passages}\n\nQuestion: {question}"}


def conversation() -> list[dict[str, str]]:
    return [
        SYSTEM,
        {"role": "user", "content": "Hi, do you run a ferry?"},
        {"role": "assistant", "content": "Yes, Harbourline runs the Arden ferry every weekday."},
        own_user_turn("When does the ferry leave Arden?"),
    ]


def cited(chunk_id: str, span: str, text: str = "The ferry leaves at 7:15.") -> str:
    return json.dumps({"claims": [{"text": text, "citations": [{"chunk_id": chunk_id, "span": span}]}]})


def wrapped(server: Server, tmp_path: Path, **options: Any) -> Any:
    options.setdefault("log", citelock.PromptLog(tmp_path / "log.db"))
    return citelock.wrap(scripted_client(server), server="llama-cpp-python", **options)


def test_the_callers_messages_are_sent_and_logged_exactly_with_the_constraint(tmp_path: Path) -> None:
    server = Server(completion(cited("kb-1", "The ferry leaves Arden at 7:15 every weekday.")))
    client = wrapped(server, tmp_path)
    assert isinstance(client, WrappedOpenAI)
    messages = conversation()
    response = client.chat.completions.create(model="m", messages=messages, chunks=CHUNKS, temperature=0.0)
    body = server.bodies[0]
    assert body["messages"] == messages  # nothing added: every chunk was in the caller's user message
    assert body["temperature"] == 0.0 and body["model"] == "m"
    guarded = response.citelock
    assert isinstance(guarded, citelock.GuardedAnswer)
    record = client.citelock.log.get(guarded.request_id)
    assert [m.model_dump() for m in record.messages] == messages
    assert record.sha256 == guarded.prompt_sha256
    assert all(pc.status == "complete" and pc.placement.message == 3 for pc in record.chunks)
    injected = record.metadata["wrap"]
    assert injected["context_message"] is None
    assert injected["constraint"] == {key: body[key] for key in injected["constraint"]}  # logged as sent
    assert "grammar" in injected["constraint"]  # llama-cpp-python takes the citation grammar
    assert guarded.generation.enforced and guarded.ok
    assert response.choices[0].message.content == guarded.rendered
    assert response.citelock_output == cited("kb-1", "The ferry leaves Arden at 7:15 every weekday.")
    assert "citelock" not in response.model_dump()  # the SDK's own fields are the server's


def test_chunks_the_messages_lack_go_into_one_message_of_citelocks_own(tmp_path: Path) -> None:
    server = Server(completion(cited("kb-2", "Bicycles travel free on the ferry.")))
    client = wrapped(server, tmp_path)
    messages = [SYSTEM, {"role": "user", "content": "Can I bring my bike?"}]
    response = client.chat.completions.create(model="m", messages=messages, chunks=CHUNKS)
    sent = server.bodies[0]["messages"]
    assert sent[0] == SYSTEM and sent[2] == messages[1] and len(sent) == 3
    assert sent[1]["role"] == "system" and all(c["text"] in sent[1]["content"] for c in CHUNKS)
    record = client.citelock.log.get(response.citelock.request_id)
    assert [m.model_dump() for m in record.messages] == sent
    assert record.metadata["wrap"]["context_message"] == 1
    assert {pc.placement.message for pc in record.chunks if pc.placement} == {1}


def test_a_chunk_cut_short_in_the_callers_message_is_truncated_and_constrained_to_what_was_sent(
    tmp_path: Path,
) -> None:
    server = Server(completion(cited("kb-1", "The ferry leaves Arden at 7:15 every weekday.")))
    client = wrapped(server, tmp_path)
    cut = CHUNKS[0]["text"][:50]
    messages = [{"role": "user", "content": f"[kb-1] {cut}\n[kb-2] {CHUNKS[1]['text']}\nWhen does it leave?"}]
    response = client.chat.completions.create(model="m", messages=messages, chunks=CHUNKS, citelock_policy="sentence")
    record = client.citelock.log.get(response.citelock.request_id)
    assert {pc.id: pc.status for pc in record.chunks} == {"kb-1": "truncated", "kb-2": "complete"}
    grammar = server.bodies[0]["grammar"]
    assert "It returns at 18:40." not in grammar  # the lost tail cannot be quoted
    assert response.citelock.generation.enforced and response.citelock.ok  # the span is in what survived
    lost = Server(completion(cited("kb-1", "It returns at 18:40.")))  # a server that ignored the constraint
    again = wrapped(lost, tmp_path).chat.completions.create(
        model="m", messages=messages, chunks=CHUNKS, citelock_policy="sentence"
    )
    assert not again.citelock.generation.enforced
    assert [f.reason for f in again.citelock.findings] == [ReasonCode.SPAN_TRUNCATED]


def _ignoring_server(reply: str) -> tuple[ThreadingHTTPServer, str, list[dict[str, Any]]]:
    """A real OpenAI-compatible server on 127.0.0.1 that ignores every constraint and answers ``reply``."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._reply({"object": "list", "data": [{"id": "ignorer", "object": "model"}]})

        def do_POST(self) -> None:
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self._reply(completion(reply))

        def _reply(self, data: dict[str, Any]) -> None:
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    return http, f"http://127.0.0.1:{http.server_port}/v1", seen


@pytest.fixture
def ignorer() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    fabricated = cited("kb-999", "The ferry leaves Arden at 7:15 every weekday.", "The ferry leaves at 6:00.")
    http, url, seen = _ignoring_server(fabricated)
    try:
        yield url, seen
    finally:
        http.shutdown()
        http.server_close()


@pytest.mark.parametrize("server_kind", ["vllm", "llama-cpp-python", "openai"])
def test_a_server_that_ignores_the_constraint_is_never_reported_enforced(
    ignorer: tuple[str, list[dict[str, Any]]], server_kind: str, tmp_path: Path
) -> None:
    url, seen = ignorer
    surface = citelock.SurfacePolicy(name="legal", stakes="high", on_fail="block")
    client = citelock.wrap(
        openai.OpenAI(base_url=url, api_key="x", max_retries=0),
        server=server_kind,
        guard=citelock.Guard(surface, LexicalJudge()),
        log=tmp_path / "log.db",
    )
    response = client.chat.completions.create(model="ignorer", messages=conversation(), chunks=CHUNKS)
    guarded = response.citelock
    assert seen, "the request reached the server"
    assert guarded.generation.enforced is False
    assert any("constraint not enforced" in note for note in guarded.generation.notes)
    assert ReasonCode.ID_NOT_IN_PROMPT in {f.reason for f in guarded.findings}
    assert not guarded.served and guarded.decision == "block"
    content = response.choices[0].message.content
    assert content == BLOCKED_TEXT and "kb-999" not in content and "6:00" not in content


def test_a_drop_claim_surface_serves_nothing_of_the_fabricated_claim(
    ignorer: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, _ = ignorer
    surface = citelock.SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")
    client = citelock.wrap(
        openai.OpenAI(base_url=url, api_key="x", max_retries=0),
        server="vllm",
        guard=citelock.Guard(surface, LexicalJudge()),
    )
    response = client.chat.completions.create(model="ignorer", messages=conversation(), chunks=CHUNKS)
    assert not response.citelock.generation.enforced
    assert "6:00" not in response.choices[0].message.content


BAD_CALLS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({}, UsageError, "chunks= is missing"),
    ({"chunks": []}, InputError, "chunks= is empty"),
    ({"chunks": [CHUNKS[0], CHUNKS[0]]}, InputError, "appears twice"),
    ({"chunks": CHUNKS, "response_format": {"type": "json_object"}}, UsageError, "response_format"),
    ({"chunks": CHUNKS, "extra_body": {"grammar": "root ::= x"}}, UsageError, "extra_body\\['grammar'\\]"),
    ({"chunks": CHUNKS, "tools": [{"type": "function"}]}, UsageError, "tools"),
    ({"chunks": CHUNKS, "stream": "yes"}, UsageError, "stream must be True or False"),
    ({"chunks": CHUNKS, "stream": True, "stream_options": {"include_usage": True}}, UsageError, "stream_options"),
    ({"chunks": CHUNKS, "n": 2}, UsageError, "n=2"),
    ({"chunks": CHUNKS, "max_tokens": 0}, UsageError, "max_tokens"),
    ({"chunks": "kb-1"}, InputError, "list of chunks"),
]


@pytest.mark.parametrize(("extra", "error", "match"), BAD_CALLS)
def test_a_bad_call_raises_before_anything_is_logged_or_sent(
    extra: dict[str, Any], error: type[Exception], match: str, tmp_path: Path
) -> None:
    server = Server()
    client = wrapped(server, tmp_path)
    with pytest.raises(error, match=match):
        client.chat.completions.create(model="m", messages=conversation(), **extra)
    assert len(client.citelock.log) == 0 and server.bodies == []


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "content of type list"),
        ([{"role": "user", "content": "hi", "name": "ann"}], "keys \\['name'\\]"),
        ([SYSTEM], "no 'user' message"),
        ("hello", "list of"),
    ],
)
def test_messages_that_cannot_be_logged_exactly_are_refused(messages: Any, match: str, tmp_path: Path) -> None:
    server = Server()
    client = wrapped(server, tmp_path)
    with pytest.raises(InputError, match=match):
        client.chat.completions.create(model="m", messages=messages, chunks=CHUNKS)
    assert len(client.citelock.log) == 0 and server.bodies == []


def test_messages_that_put_a_chunks_text_under_another_id_are_refused(tmp_path: Path) -> None:
    server = Server()
    client = wrapped(server, tmp_path)
    swapped = f"<doc id=kb-2>{CHUNKS[0]['text']}</doc>\n<doc id=kb-2>{CHUNKS[1]['text']}</doc>\nWhen?"
    with pytest.raises(InputError, match=r"kb-1.*under id 'kb-2'"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": swapped}], chunks=CHUNKS)
    header_only = f"[kb-1] (see the timetable)\n[kb-2] {CHUNKS[1]['text']}\nWhen?"
    with pytest.raises(InputError, match=r"kb-1.*its text is not"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": header_only}], chunks=CHUNKS)
    assert len(client.citelock.log) == 0 and server.bodies == []


def test_sdk_errors_arrive_typed_with_the_sdks_exception_as_cause(tmp_path: Path) -> None:
    server = Server(
        (503, {"error": {"message": "overloaded"}}, {}),
        openai_transport_error(),
    )
    client = wrapped(server, tmp_path)
    with pytest.raises(BackendHTTPError) as http:
        client.chat.completions.create(model="m", messages=conversation(), chunks=CHUNKS)
    assert http.value.status == 503 and isinstance(http.value.__cause__, openai.APIStatusError)
    assert http.value.citelock_request_id in client.citelock.log  # logged before the call, as sent
    with pytest.raises(BackendConnectionError) as down:
        client.chat.completions.create(model="m", messages=conversation(), chunks=CHUNKS)
    assert isinstance(down.value.__cause__, openai.APIConnectionError)


def openai_transport_error() -> Exception:
    from support.openai_transport import httpx

    return httpx.ConnectError("refused")


def test_the_async_client_is_wrapped_the_same_way(tmp_path: Path) -> None:
    server = Server(completion(cited("kb-1", "It returns at 18:40.", "It returns at 18:40.")))
    client = citelock.wrap(scripted_async_client(server), server="vllm", log=tmp_path / "log.db", policy="sentence")
    assert isinstance(client, AsyncWrappedOpenAI)
    messages = conversation()
    response = asyncio.run(client.chat.completions.create(model="m", messages=messages, chunks=CHUNKS))
    body = server.bodies[0]
    assert body["messages"] == messages
    assert "structured_outputs" in body  # vLLM >= 0.12 takes the constraint there
    record = client.citelock.log.get(response.citelock.request_id)
    assert record.metadata["wrap"]["constraint"]["structured_outputs"] == body["structured_outputs"]
    assert response.citelock.generation.enforced and response.citelock.ok


def test_other_client_attributes_are_the_clients_own(tmp_path: Path) -> None:
    server = Server({"object": "list", "data": [{"id": "m", "object": "model"}]})
    client = wrapped(server, tmp_path)
    assert [m.id for m in client.models.list().data] == ["m"]
    with pytest.raises(UsageError, match="already wrapped"):
        citelock.wrap(client)


def test_a_model_left_out_is_asked_of_the_server(tmp_path: Path) -> None:
    server = Server(
        {"object": "list", "data": [{"id": "served-model", "object": "model"}]},
        completion(cited("kb-1", "It returns at 18:40.", "It returns at 18:40.")),
    )
    client = wrapped(server, tmp_path)
    response = client.chat.completions.create(messages=conversation(), chunks=CHUNKS)
    assert server.bodies[1]["model"] == "served-model" and response.citelock.model == "served-model"


def test_content_raw_keeps_the_models_output_and_metadata_is_recorded(tmp_path: Path) -> None:
    output = cited("kb-1", "It returns at 18:40.", "It returns at 18:40.")
    server = Server(completion(output))
    client = wrapped(server, tmp_path, content="raw")
    response = client.chat.completions.create(
        model="m", messages=conversation(), chunks=CHUNKS, citelock_metadata={"user": "u-7"}
    )
    assert response.choices[0].message.content == output == response.citelock_output
    assert "citelock_metadata" not in server.bodies[0]
    assert client.citelock.log.get(response.citelock.request_id).metadata["user"] == "u-7"
    with pytest.raises(UsageError, match="content must be"):
        citelock.wrap(scripted_client(Server()), content="html")  # type: ignore[arg-type]
