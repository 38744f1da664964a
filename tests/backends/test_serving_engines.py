"""vLLM and SGLang grammar deliveries through the scripted transport, against their documented request/response shapes.

The fixtures in ``fixtures/serving_engines/`` follow the engines' OpenAI-compatible servers as their source and docs
define them (vLLM 0.10.2+ ``structured_outputs``, 0.6-0.11 ``guided_grammar``; SGLang ``ebnf``; each file says
which versions). No engine runs here: the request is checked field by field, the grammar sent is compiled by the
same reader the engine's guidance backend uses (llguidance), and the canned response is read back like a real one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import llguidance
import pytest

import citelock
from citelock.backends._openai import OpenAIBackend
from citelock.constraint import SchemaOptions
from citelock.errors import SchemaRejectedError
from citelock.runtime import PROFILES
from support.grammar_harness import accepts, accepts_gbnf
from support.hostile import chunks_for

pytest.importorskip("openai")
from support.openai_transport import Server, scripted_client

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serving_engines"
CHUNKS = [
    {"id": "s1", "text": "The plant opened in 1998. It makes glass bottles."},
    {"id": "s2", "text": "The plant employs 40 people."},
]
OPTS = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=60, max_span_chars=40)


def fixture(engine: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{engine}.json").read_text(encoding="utf-8"))
    return data


def dig(body: dict[str, Any], path: list[str]) -> Any:
    for key in path:
        body = body[key]
    return body


CASES = [
    ("vllm", "structured_outputs_grammar", "gbnf"),
    ("vllm", "structured_outputs_lark", "lark"),
    ("vllm", "guided_grammar", "gbnf"),
    ("sglang", "ebnf", "gbnf"),
]


@pytest.mark.parametrize(("engine", "delivery", "dialect"), CASES)
def test_substring_grammar_travels_in_the_engines_field(engine: str, delivery: str, dialect: str) -> None:
    data = fixture(engine)
    server = Server(data["response"])
    backend = OpenAIBackend.from_client(scripted_client(server), server=engine, model="m", delivery=delivery)
    result = citelock.answer("When did the plant open?", CHUNKS, backend=backend, policy="substring", options=OPTS)
    body = server.bodies[0]
    grammar = dig(body, data["request_fields"][delivery])
    assert isinstance(grammar, str)
    # no JSON Schema travels beside the grammar, and nothing else the engine would read as a second constraint
    assert "response_format" not in body and "tools" not in body
    other = {k for fields in data["request_fields"].values() for k in fields[:1]} - {
        data["request_fields"][delivery][0]
    }
    assert not other & set(body)
    abstain, good = '{"claims":[]}', data["response"]["choices"][0]["message"]["content"]
    fabricated = good.replace('"s1"', '"c-999"')
    if dialect == "gbnf":
        assert "::=" in grammar and accepts_gbnf(grammar, good) and accepts_gbnf(grammar, abstain)
        assert not accepts_gbnf(grammar, fabricated)
    else:
        assert grammar.startswith("%llguidance") and accepts(grammar, good) and not accepts(grammar, fabricated)
        assert llguidance.LLMatcher.validate_grammar(llguidance.grammar_from("grammar", grammar)) == ""
    assert result.span_policy == "substring" and result.generation.enforced
    assert f"delivery: {delivery} ({engine})" in result.generation.notes
    assert [(c.chunk_id, c.span) for claim in result.answer.claims for c in claim.citations] == [
        ("s1", "opened in 1998")
    ]
    assert result.ok and not result.findings


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_default_delivery_is_the_gbnf_grammar_and_hostile_text_compiles(engine: str) -> None:
    data = fixture(engine)
    server = Server(
        data["response"]
        | {
            "choices": [
                {**data["response"]["choices"][0], "message": {"role": "assistant", "content": '{"claims":[]}'}}
            ]
        }
    )
    backend = OpenAIBackend.from_client(scripted_client(server), server=engine, model="m")
    chunks = chunks_for(["bs", "dq", "ctl", "astral", "gbnf"])
    result = citelock.answer("Where is the file?", chunks, backend=backend, policy="substring", options=OPTS)
    field = dig(server.bodies[0], data["request_fields"][PROFILES[engine].deliveries[0].name])
    assert result.span_policy == "substring" and result.answer.abstained
    compiled = llguidance.grammar_from("ebnf", field)
    assert llguidance.LLMatcher.validate_grammar(compiled) == ""
    assert accepts_gbnf(
        field,
        json.dumps(
            {"claims": [{"text": "x", "citations": [{"chunk_id": "dq", "span": 'said "bonjour"'}]}]},
            ensure_ascii=False,
            separators=(",", ":"),
        ),
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_grammar_the_engine_refuses_is_a_typed_error_not_a_pass(engine: str) -> None:
    refused = fixture(engine)["invalid_grammar"]
    server = Server((refused["status"], refused["body"], {}))
    backend = OpenAIBackend.from_client(scripted_client(server), server=engine, model="m")
    with pytest.raises(SchemaRejectedError) as info:
        citelock.answer("When did the plant open?", CHUNKS, backend=backend, policy="substring", options=OPTS)
    assert info.value.status == 400 and not info.value.retryable
    assert "grammar" in str(info.value).lower() and info.value.provider == engine


def test_an_engine_that_ignores_the_grammar_is_reported_never_trusted() -> None:
    data = fixture("vllm")
    ignored = json.dumps(
        {"claims": [{"text": "It opened.", "citations": [{"chunk_id": "s1", "span": "opened in 1999"}]}]}
    )
    response = data["response"] | {
        "choices": [{**data["response"]["choices"][0], "message": {"role": "assistant", "content": ignored}}]
    }
    backend = OpenAIBackend.from_client(scripted_client(Server(response)), server="vllm", model="m")
    result = citelock.answer("When did the plant open?", CHUNKS, backend=backend, policy="substring", options=OPTS)
    assert result.generation.enforced is False
    assert any(n.startswith("constraint not enforced") and "not verbatim" in n for n in result.generation.notes)
    assert "SPAN_NOT_IN_CHUNK" in {f.reason.value for f in result.findings}


def test_a_grammar_over_the_engines_bound_is_downgraded_before_sending() -> None:
    # the xgrammar bound (our budget): a context whose substring trie is bigger goes out as the sentence grammar
    profile = PROFILES["sglang"].with_limits(max_grammar_chars=3_000)
    data = fixture("sglang")
    server = Server(data["response"])
    backend = OpenAIBackend.from_client(scripted_client(server), server=profile, model="m")
    words = " ".join(f"word{n}" for n in range(300)) + "."
    result = citelock.answer(
        "What?", [*CHUNKS, {"id": "w", "text": words}], backend=backend, policy="substring", options=OPTS
    )
    assert result.requested_policy == "substring" and result.span_policy == "sentence"
    assert "grammar characters, over the backend's limit of 3,000" in (result.downgrade_reason or "")
    assert len(server.bodies[0]["ebnf"]) <= 3_000
