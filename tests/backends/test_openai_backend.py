"""Unit tests of the OpenAI-compatible backend against a mocked HTTP transport (no server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import citelock
from citelock.backends._openai import OpenAIBackend
from citelock.constraint import SchemaOptions, build_schema
from citelock.errors import (
    BackendConnectionError,
    BackendHTTPError,
    BackendRefusalError,
    BackendTimeoutError,
    SchemaRejectedError,
    TruncatedOutputError,
)
from citelock.runtime import PROFILES

pytest.importorskip("openai")
from support.openai_transport import Server, httpx, scripted_client
from support.openai_transport import completion as _completion

CHUNKS = [
    {"id": "s1", "text": "The plant opened in 1998. It makes glass bottles."},
    {"id": "s2", "text": "The plant employs 40 people."},
]
OPTS = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=60, max_span_chars=80)


def backend(server: Server, kind: str = "llama-cpp-python", **kwargs: Any) -> OpenAIBackend:
    return OpenAIBackend.from_client(scripted_client(server), model="m", server=kind, **kwargs)


def good_answer() -> str:
    return json.dumps(
        {
            "claims": [
                {"text": "It opened in 1998.", "citations": [{"chunk_id": "s1", "span": "The plant opened in 1998."}]}
            ]
        }
    )


def test_json_object_schema_delivery_sends_logged_messages_and_adapted_schema(tmp_path: Any) -> None:
    server = Server(_completion(good_answer()))
    log = citelock.PromptLog(tmp_path / "log.db")
    result = citelock.answer(
        "When did the plant open?",
        CHUNKS,
        backend=backend(server, delivery="json_object_schema"),
        policy="sentence",
        options=OPTS,
        max_tokens=100,
        log=log,
    )
    body = server.bodies[0]
    record = log.get(result.request_id)
    assert body["messages"] == [{"role": m.role, "content": m.content} for m in record.messages]
    assert body["response_format"]["type"] == "json_object"
    text = body["response_format"]["schema"]["properties"]["claims"]["items"]["properties"]["text"]
    assert "maxLength" not in text and text["pattern"].startswith("^") and text["pattern"].endswith("{1,60}$")
    assert body["max_tokens"] == 100
    assert result.ok and result.generation.enforced
    assert result.span_policy == "sentence"


def test_tool_call_delivery_reads_the_arguments() -> None:
    server = Server(_completion(None, tool_args=good_answer(), finish="tool_calls"))
    result = citelock.answer(
        "When?", CHUNKS, backend=backend(server, delivery="tool_call"), policy="sentence", options=OPTS, max_tokens=100
    )
    body = server.bodies[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "cited_answer"}}
    assert body["tools"][0]["function"]["parameters"]["type"] == "object"
    assert result.ok and result.answer.claims[0].citations[0].chunk_id == "s1"


def test_openai_profile_uses_strict_json_schema_and_max_completion_tokens() -> None:
    server = Server(_completion(good_answer()))
    gen_backend = backend(server, kind="openai")
    citelock.answer("When?", CHUNKS, backend=gen_backend, policy="sentence", options=OPTS, max_tokens=90)
    body = server.bodies[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["max_completion_tokens"] == 90 and "max_tokens" not in body
    sent = json.dumps(body["response_format"]["json_schema"]["schema"])
    assert "maxLength" not in sent and "minLength" not in sent and "$schema" not in sent


def test_output_outside_the_schema_is_reported_not_trusted() -> None:
    fabricated = json.dumps(
        {
            "claims": [
                {
                    "text": "It opened in 1998.",
                    "citations": [{"chunk_id": "c-999", "span": "The plant opened in 1998."}],
                }
            ]
        }
    )
    server = Server(_completion(fabricated))
    result = citelock.answer("When?", CHUNKS, backend=backend(server), policy="sentence", options=OPTS, max_tokens=100)
    assert result.generation.enforced is False
    assert any(n.startswith("constraint not enforced") for n in result.generation.notes)
    assert [f.reason.value for f in result.findings] == ["ID_NOT_IN_PROMPT"]


def test_refusal_is_typed() -> None:
    server = Server(_completion(None, refusal="I can't help with that."))
    with pytest.raises(BackendRefusalError) as info:
        citelock.answer(
            "When?", CHUNKS, backend=backend(server, kind="openai"), policy="sentence", options=OPTS, max_tokens=50
        )
    assert info.value.refusal == "I can't help with that." and info.value.retryable is False


def test_truncation_at_max_tokens_is_typed() -> None:
    server = Server(_completion('{"claims":[{"text":"It op', finish="length", completion_tokens=10))
    with pytest.raises(TruncatedOutputError) as info:
        citelock.answer("When?", CHUNKS, backend=backend(server), policy="sentence", options=OPTS, max_tokens=10)
    assert info.value.max_tokens == 10 and info.value.partial.startswith('{"claims"')
    assert info.value.request_id == "chatcmpl-test" and not info.value.retryable


def test_truncated_tool_call_with_misleading_finish_reason_is_detected() -> None:
    # llama-cpp-python reports finish_reason="tool_calls" even when max_tokens cut the arguments.
    server = Server(_completion(None, tool_args='{"claims":[{"text":"x"', finish="tool_calls", completion_tokens=12))
    with pytest.raises(TruncatedOutputError):
        citelock.answer(
            "When?",
            CHUNKS,
            backend=backend(server, delivery="tool_call"),
            policy="sentence",
            options=OPTS,
            max_tokens=12,
        )


def test_http_errors_carry_status_request_id_and_retryability() -> None:
    server = Server((429, {"error": {"message": "rate limited"}}, {"x-request-id": "req_123"}))
    with pytest.raises(BackendHTTPError) as info:
        citelock.answer(
            "When?", CHUNKS, backend=backend(server, kind="openai"), policy="sentence", options=OPTS, max_tokens=50
        )
    assert (info.value.status, info.value.request_id, info.value.retryable) == (429, "req_123", True)
    assert info.value.provider == "openai" and info.value.citelock_request_id


def test_rejected_response_format_is_a_schema_error_not_retryable() -> None:
    message = "Input should be 'text' or 'json_object' (body.response_format.type)"
    server = Server((500, {"error": {"message": message}}, {}))
    with pytest.raises(SchemaRejectedError) as info:
        citelock.answer(
            "When?",
            CHUNKS,
            backend=backend(server, delivery="json_object_schema"),
            policy="sentence",
            options=OPTS,
            max_tokens=50,
        )
    assert info.value.status == 500 and info.value.retryable is False


def test_timeouts_and_connection_failures_are_retryable() -> None:
    server = Server(httpx.ReadTimeout("slow"), httpx.ConnectError("refused"))
    with pytest.raises(BackendTimeoutError) as timeout:
        citelock.answer("When?", CHUNKS, backend=backend(server), policy="sentence", options=OPTS, max_tokens=50)
    assert timeout.value.retryable
    with pytest.raises(BackendConnectionError) as refused:
        citelock.answer("When?", CHUNKS, backend=backend(server), policy="sentence", options=OPTS, max_tokens=50)
    assert refused.value.retryable
    assert isinstance(refused.value, citelock.RuntimeFailure)


def test_over_limit_schema_is_never_sent() -> None:
    server = Server()
    tight = PROFILES["llama-cpp-python"].with_limits(max_enum_values=2)
    gen_backend = backend(server, kind="llama-cpp-python")
    gen_backend.profile = tight
    context = citelock.assemble("When?", CHUNKS)
    schema = build_schema(context, "sentence", OPTS)
    record = citelock.serialize(context)
    with pytest.raises(citelock.UsageError, match="not sent"):
        gen_backend.generate(record, schema, max_tokens=50)
    assert server.bodies == []
