"""The shared OpenAI-compatible transport and ``from_client``: the caller's own client, sync and async (no server)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import citelock
from citelock.backends import InstructorBackend, OpenAIBackend
from citelock.errors import BackendHTTPError, UsageError
from citelock.judges import LLMJudge, OpenAICompleter
from citelock.runtime import OpenAITransport, output_text

pytest.importorskip("openai")
from support.openai_transport import Server, completion, scripted_async_client, scripted_client

openai = pytest.importorskip("openai")

CHUNKS = [{"id": "s1", "text": "The plant opened in 1998. It makes glass bottles."}]
ANSWER = json.dumps(
    {"claims": [{"text": "It opened in 1998.", "citations": [{"chunk_id": "s1", "span": "The plant opened in 1998."}]}]}
)
MODELS = {"object": "list", "data": [{"id": "served-model", "object": "model", "created": 0, "owned_by": "me"}]}


def test_from_client_sends_every_request_through_the_callers_client() -> None:
    server = Server(MODELS, completion(ANSWER), completion(ANSWER))
    client = scripted_client(server)
    backend = OpenAIBackend.from_client(client)
    assert backend.client is client and backend.transport.client is client
    assert backend.profile.kind == "llama-cpp-python"  # a base URL that is not OpenAI's
    first = citelock.answer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=100)
    second = citelock.answer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=100)
    assert server.bodies[0] == {"get": "/v1/models"}  # the model name is asked once, then reused
    assert [b["model"] for b in server.bodies[1:]] == ["served-model", "served-model"]
    assert first.ok and first.generation.enforced and first.model == "served-model"
    assert second.ok and len(server.bodies) == 3


def test_from_client_profile_defaults_to_openai_for_openais_url_and_can_be_named() -> None:
    assert OpenAIBackend.from_client(openai.OpenAI(api_key="x")).profile.kind == "openai"
    client = scripted_client(Server())
    assert OpenAIBackend.from_client(client, server="vllm").profile.kind == "vllm"
    with pytest.raises(UsageError, match="unknown server kind 'tgi'"):
        OpenAIBackend.from_client(client, server="tgi")


def test_from_client_rejects_what_is_not_an_openai_client() -> None:
    for bad in (object(), "http://127.0.0.1:8080/v1"):
        with pytest.raises(UsageError, match=r"openai\.OpenAI or openai\.AsyncOpenAI client"):
            OpenAIBackend.from_client(bad)


def test_an_async_client_is_awaited_by_aanswer() -> None:
    server = Server(MODELS, completion(ANSWER))
    backend = OpenAIBackend.from_client(scripted_async_client(server))
    assert backend.transport.is_async
    result = asyncio.run(citelock.aanswer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=100))
    assert result.ok and result.generation.enforced and result.model == "served-model"
    assert server.bodies[0] == {"get": "/v1/models"}  # asked without blocking, then used
    assert server.bodies[1]["model"] == "served-model" and server.bodies[1]["grammar"].startswith("root ::= ")


def test_an_async_client_refuses_the_sync_path_before_sending() -> None:
    server = Server()
    backend = OpenAIBackend.from_client(scripted_async_client(server), model="m")
    with pytest.raises(UsageError, match="AsyncOpenAI"):
        citelock.answer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=100)
    assert server.bodies == []


def test_async_failures_are_typed_like_sync_ones() -> None:
    server = Server((429, {"error": {"message": "rate limited"}}, {"x-request-id": "req_9"}))
    backend = OpenAIBackend.from_client(scripted_async_client(server), model="m", server="openai")
    with pytest.raises(BackendHTTPError) as info:
        asyncio.run(citelock.aanswer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=50))
    assert (info.value.status, info.value.request_id, info.value.retryable) == (429, "req_9", True)


def test_a_sync_client_also_serves_aanswer() -> None:
    server = Server(completion(ANSWER))
    backend = OpenAIBackend.from_client(scripted_client(server), model="m")
    result = asyncio.run(citelock.aanswer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=100))
    assert result.ok and len(server.bodies) == 1


def test_instructor_and_judge_take_the_callers_sync_client_only() -> None:
    server = Server(completion('{"verdict": "no"}'))
    completer = OpenAICompleter.from_client(scripted_client(server), model="m")
    assert LLMJudge(completer).judge("It opened in 1999.", "It opened in 1998.").label == "no"
    assert isinstance(completer.transport, OpenAITransport)
    with pytest.raises(UsageError, match="not AsyncOpenAI"):
        OpenAICompleter.from_client(scripted_async_client(Server()))
    with pytest.raises(UsageError, match="not AsyncOpenAI"):
        InstructorBackend.from_client(scripted_async_client(Server()))


def test_payload_holds_the_shared_fields_under_the_servers_token_field() -> None:
    transport = OpenAITransport.from_client(scripted_client(Server()), server="openai", model="m")
    payload = transport.payload([{"role": "user", "content": "hi"}], max_tokens=7, temperature=0.2, seed=3)
    assert payload == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 7,
        "temperature": 0.2,
        "seed": 3,
    }
    with pytest.raises(UsageError, match="max_tokens must be positive, got 0"):
        transport.payload([], max_tokens=0, temperature=0.0)


class _Call:
    def __init__(self, arguments: str) -> None:
        self.function = type("F", (), {"arguments": arguments})()


class _Message:
    def __init__(self, content: str | None, calls: list[Any]) -> None:
        self.content = content
        self.tool_calls = calls


def test_output_text_reads_where_the_delivery_says_and_notes_otherwise() -> None:
    assert output_text(_Message(None, [_Call('{"a":1}')]), "tool_arguments") == ('{"a":1}', None)
    assert output_text(_Message("{}", []), "tool_arguments") == (
        "{}",
        "no tool call came back: the message content was used",
    )
    assert output_text(_Message("{}", [_Call("x")]), "content") == ("{}", None)
    assert output_text(_Message("", [_Call("x")]), None) == ("x", "the output came back as a tool call")
