"""The instructor backend against a mocked HTTP transport: validation against the prompt, reasks, exhaustion."""

from __future__ import annotations

import json
from typing import Any

import pytest

import citelock
from citelock.backends._instructor import InstructorBackend
from citelock.constraint import SchemaOptions, fit_schema

openai = pytest.importorskip("openai")
pytest.importorskip("instructor")
try:
    import httpx2 as httpx
except ImportError:  # older openai releases use httpx
    import httpx  # type: ignore[no-redef]

CHUNKS = [
    {"id": "s1", "text": "The plant opened in 1998. It makes glass bottles."},
    {"id": "s2", "text": "The plant employs 40 people."},
]
OPTS = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=60, max_span_chars=80)


def tool_reply(arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "CitedAnswer", "arguments": json.dumps(arguments)}}
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60},
    }


def answer_with(span: str, chunk_id: str = "s1") -> dict[str, Any]:
    return {"claims": [{"text": "It opened in 1998.", "citations": [{"chunk_id": chunk_id, "span": span}]}]}


class Server:
    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, json=self.replies.pop(0))


def backend(server: Server, **kwargs: Any) -> InstructorBackend:
    client = openai.OpenAI(
        base_url="http://test/v1",
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=httpx.MockTransport(server)),
    )
    return InstructorBackend.from_client(client, model="m", server="llama-cpp-python", **kwargs)


def test_non_verbatim_span_is_reasked_with_the_reason_then_accepted() -> None:
    server = Server(
        tool_reply(answer_with("The plant opened in 1997.")), tool_reply(answer_with("The plant opened in 1998."))
    )
    result = citelock.answer(
        "When did it open?", CHUNKS, backend=backend(server, max_reasks=2), policy="id", options=OPTS, max_tokens=100
    )
    assert len(server.bodies) == 2
    reask = json.dumps(server.bodies[1]["messages"])
    assert "SPAN_NOT_IN_CHUNK" in reask
    assert server.bodies[0]["tool_choice"]["function"]["name"] == "CitedAnswer"
    assert result.ok and result.generation.enforced
    assert "attempts=2" in result.generation.notes[0]


def test_sentence_policy_sends_a_union_of_per_chunk_literals() -> None:
    server = Server(tool_reply(answer_with("The plant opened in 1998.")))
    result = citelock.answer("When?", CHUNKS, backend=backend(server), policy="sentence", options=OPTS, max_tokens=100)
    schema = json.dumps(server.bodies[0]["tools"][0]["function"]["parameters"])
    assert '"const": "s1"' in schema and '"const": "s2"' in schema and "The plant employs 40 people." in schema
    assert result.ok


def test_fabricated_id_is_rejected_by_validation() -> None:
    bad = answer_with("The plant opened in 1998.", chunk_id="c-999")
    server = Server(tool_reply(bad), tool_reply(bad))
    result = citelock.answer(
        "When?", CHUNKS, backend=backend(server, max_reasks=1), policy="id", options=OPTS, max_tokens=100
    )
    generation = result.generation
    assert generation.enforced is False
    assert any(n.startswith("reasks exhausted") for n in generation.notes)
    assert [f.reason.value for f in result.findings] == ["ID_NOT_IN_PROMPT"]


def test_exhausted_reasks_return_the_last_object_with_its_findings() -> None:
    server = Server(*(tool_reply(answer_with(f"The plant opened in {y}.")) for y in (1990, 1991, 1992)))
    gen_backend = backend(server, max_reasks=2)
    context = citelock.assemble("When?", CHUNKS)
    record = citelock.serialize(context)
    schema = fit_schema(context, "id", gen_backend.limits, OPTS)
    generation = gen_backend.generate(record, schema, max_tokens=100)
    assert len(server.bodies) == 3 and generation.attempts == 3 and generation.exhausted
    assert json.loads(generation.text) == answer_with("The plant opened in 1992.")
    assert generation.findings and "SPAN_NOT_IN_CHUNK" in generation.findings[0]
    assert generation.requests[0] == tuple({"role": m.role, "content": m.content} for m in record.messages)


def test_token_budget_stops_reasks_early() -> None:
    server = Server(*(tool_reply(answer_with(f"The plant opened in {y}.")) for y in (1990, 1991, 1992)))
    gen_backend = backend(server, max_reasks=2, token_budget=100)
    result = citelock.answer("When?", CHUNKS, backend=gen_backend, policy="id", options=OPTS, max_tokens=100)
    assert len(server.bodies) == 2  # 60 + 60 tokens >= 100 after the second attempt
    assert result.generation.enforced is False
    assert [f.reason.value for f in result.findings] == ["SPAN_NOT_IN_CHUNK"]


def test_quote_policy_gets_the_quote_sentence_model_of_the_schema() -> None:
    # The schema's own model: per chunk, a claim whose text is one of its sentences and cites only it.
    quoted = {"claims": [{"text": "The plant opened in 1998.", "citations": [{"chunk_id": "s1"}]}]}
    server = Server(tool_reply(quoted))
    result = citelock.answer("When?", CHUNKS, backend=backend(server), policy="quote", options=OPTS, max_tokens=100)
    assert result.span_policy == "quote_sentence" and result.requested_policy == "quote"
    assert len(server.bodies) == 1 and result.generation.enforced and result.ok
    sent = json.dumps(server.bodies[0]["tools"][0]["function"]["parameters"])
    assert '"enum": ["The plant opened in 1998.", "It makes glass bottles."]' in sent and '"span"' not in sent
    assert result.answer.claims[0].citations[0].span == "The plant opened in 1998."


def test_the_abstention_is_a_valid_answer_not_a_reask() -> None:
    server = Server(tool_reply({"claims": []}))
    result = citelock.answer("Who?", CHUNKS, backend=backend(server), policy="sentence", options=OPTS, max_tokens=100)
    assert len(server.bodies) == 1 and result.generation.enforced
    assert result.answer.abstained and result.answer.claims == ()


def test_free_strings_carry_the_profiles_string_rule_but_validation_keeps_the_bounds() -> None:
    long_span = "The plant opened in 1998. " * 4  # 104 characters, over max_span_chars=80
    server = Server(tool_reply(answer_with(long_span)), tool_reply(answer_with("The plant opened in 1998.")))
    result = citelock.answer("When?", CHUNKS, backend=backend(server), policy="id", options=OPTS, max_tokens=100)
    cite = server.bodies[0]["tools"][0]["function"]["parameters"]["$defs"]["Citation"]["properties"]["span"]
    assert cite["pattern"].startswith("^") and cite["pattern"].endswith("{1,80}$") and "maxLength" not in cite
    assert len(server.bodies) == 2 and "at most 80 characters" in json.dumps(server.bodies[1]["messages"])
    assert result.ok and result.generation.enforced


def test_an_output_cut_at_max_tokens_is_a_truncated_output_error_with_what_arrived() -> None:
    cut = tool_reply(answer_with("The plant opened in 1998"))
    partial = cut["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"][:30]
    cut["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = partial
    cut["choices"][0]["finish_reason"] = "length"
    server = Server(cut)
    with pytest.raises(citelock.TruncatedOutputError, match="max_tokens=100") as caught:
        citelock.answer("When?", CHUNKS, backend=backend(server), policy="id", options=OPTS, max_tokens=100)
    error = caught.value
    assert error.max_tokens == 100 and error.partial == partial  # what arrived, for the caller to inspect
    assert error.citelock_request_id and error.request_id == "chatcmpl-x"
    assert len(server.bodies) == 1  # a cut output is not reasked: more of the same budget would be cut again
