"""A constrained call's output is parsed under its schema or not at all, and ``span_policy`` says what it held.

Against a real OpenAI-compatible server on 127.0.0.1 that ignores every constraint (plain and SSE), through
``citelock.wrap``, and through :func:`citelock.answer` with a backend that declared a constraint it did not
enforce. Prose, or a ``{"text": ...}`` object, from such a call is ``UnparsedAnswerError``, never free text that
a short line without a stop could slip through as a "heading"; the naive backend (no constraint declared) keeps
its free-text parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import BackendLimits, FakeBackend, ReasonCode
from citelock.errors import ParseError, UnparsedAnswerError
from citelock.judges import LexicalJudge
from citelock.prompt._parse import held_policy, parse_answer, parse_constrained

openai = pytest.importorskip("openai")
from test_wrap import CHUNKS, _ignoring_server, conversation  # noqa: E402
from test_wrap_stream import _serve  # noqa: E402

HIGH = citelock.SurfacePolicy(name="legal", stakes="high", on_fail="block")
PROSE = [
    "The Aurora Bridge never opened",
    "The ferry never leaves Arden",
    "Sure, the ferry leaves at 6:00.",
    json.dumps({"text": "The ferry leaves at 6:00 [kb-1]."}),
    "[kb-1] The ferry leaves at 6:00",
    json.dumps(["The ferry leaves at 6:00"]),
]


@pytest.fixture
def prose_server(request: pytest.FixtureRequest) -> Iterator[str]:
    http, url, _seen = _ignoring_server(request.param)
    try:
        yield url
    finally:
        http.shutdown()
        http.server_close()


@pytest.mark.parametrize("server_kind", ["vllm", "llama-cpp-python", "openai"])
@pytest.mark.parametrize("prose_server", PROSE, indirect=True)
def test_prose_from_a_constrained_call_is_never_served(prose_server: str, server_kind: str, tmp_path: Path) -> None:
    client = citelock.wrap(
        openai.OpenAI(base_url=prose_server, api_key="x", max_retries=0),
        server=server_kind,
        guard=citelock.Guard(HIGH, LexicalJudge()),
        log=tmp_path / "log.db",
    )
    with pytest.raises(UnparsedAnswerError, match="schema's JSON") as caught:
        client.chat.completions.create(model="ignorer", messages=conversation(), chunks=CHUNKS)
    assert caught.value.generation.enforced is False
    assert citelock.PromptLog(tmp_path / "log.db").get(caught.value.record.request_id) is not None  # logged first


@pytest.mark.parametrize("body", ["The Aurora Bridge never opened", json.dumps({"text": "It leaves at 6:00."})])
def test_prose_streamed_to_a_constrained_call_raises_and_shows_nothing(body: str, tmp_path: Path) -> None:
    for url, _seen in _serve(body):
        client = citelock.wrap(
            openai.OpenAI(base_url=url, api_key="x", max_retries=0),
            server="vllm",
            guard=citelock.Guard(HIGH, LexicalJudge()),
            log=tmp_path / "log.db",
        )
        events: list[Any] = []
        with pytest.raises(UnparsedAnswerError, match="schema's JSON"):
            for event in client.chat.completions.create(
                model="sse", messages=conversation(), chunks=CHUNKS, stream=True
            ):
                events.append(event)
        assert not [e for e in events if e.type == "claim.shown"]


def test_a_backend_that_declared_a_constraint_does_not_get_a_free_text_parse() -> None:
    chunks = [{"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932."}]
    unenforced = FakeBackend(["The Aurora Bridge never opened"], enforced=False)
    with pytest.raises(UnparsedAnswerError, match="declared the substring citation constraint"):
        citelock.answer("When did the Aurora Bridge open?", chunks, backend=unenforced)
    naive = FakeBackend(["The Aurora Bridge never opened"], limits=BackendLimits(policies=()))
    result = citelock.answer("When did the Aurora Bridge open?", chunks, backend=naive)
    assert result.span_policy is None and result.answer.format == "free_text"
    # one short line is the answer, not a heading over nothing: a factual claim without a citation
    assert ReasonCode.UNCITED_CLAIM in {f.reason for f in result.findings} and not result.served


def _output(citations: list[dict[str, str]]) -> str:
    return json.dumps({"claims": [{"text": "The ferry leaves Arden at 7:15 every weekday.", "citations": citations}]})


@pytest.mark.parametrize(
    ("body", "held"),
    [
        (_output([{"chunk_id": "kb-1"}]), "id"),  # the schema asked for spans, the server sent none
        (_output([]), "none"),  # nothing cited at all
        (_output([{"chunk_id": "kb-1", "span": "The ferry leaves Arden at 7:15 every weekday."}]), "substring"),
    ],
)
def test_span_policy_is_what_the_output_held(body: str, held: str, tmp_path: Path) -> None:
    http, url, _seen = _ignoring_server(body)
    try:
        client = citelock.wrap(openai.OpenAI(base_url=url, api_key="x", max_retries=0), server="vllm")
        response = client.chat.completions.create(model="ignorer", messages=conversation(), chunks=CHUNKS)
    finally:
        http.shutdown()
        http.server_close()
    guarded = response.citelock
    assert guarded.requested_policy == "substring"  # vLLM takes the substring grammar: what the schema asked
    assert guarded.span_policy == held and guarded.answer.span_policy == held
    if held == "substring":  # the output holds the schema's shape and passes its verification
        assert guarded.generation.enforced and guarded.downgrade_reason is None
    else:
        assert guarded.generation.enforced is False
        assert guarded.downgrade_reason is not None and f"it held {held}" in guarded.downgrade_reason
        assert "ignored" in guarded.downgrade_reason


def test_an_enforced_answer_keeps_the_schemas_policy() -> None:
    chunks = [{"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932."}]
    cite = {"chunk_id": "c-1", "span": "opened to traffic in 1932"}
    output = json.dumps({"claims": [{"text": "It opened in 1932.", "citations": [cite]}]})
    result = citelock.answer("When did it open?", chunks, backend=FakeBackend([output]))
    assert result.generation.enforced and result.span_policy == "substring" and result.downgrade_reason is None


@pytest.mark.parametrize(
    "text",
    ["The Aurora Bridge never opened", "", "  ", '{"text": "x [c-1]."}', "[1, 2]", "{not json", '"claims"', "null"],
)
def test_parse_constrained_refuses_everything_but_the_schemas_json(text: str) -> None:
    with pytest.raises(ParseError, match="declared the id citation constraint"):
        parse_constrained(text, "id")


def test_held_policy_reads_the_output_not_the_schema() -> None:
    spans = parse_answer({"claims": [{"text": "a b", "citations": [{"chunk_id": "c-1", "span": "a"}]}]})
    ids = parse_answer({"claims": [{"text": "a b", "citations": [{"chunk_id": "c-1"}]}]})
    mixed = parse_answer(
        {"claims": [{"text": "a b", "citations": [{"chunk_id": "c-1", "span": "a"}, {"chunk_id": "c-2"}]}]}
    )
    uncited = parse_answer({"claims": [{"text": "a b", "citations": []}]})
    abstained = parse_answer({"claims": []})
    assert [held_policy(a, "substring") for a in (spans, ids, mixed, uncited, abstained)] == [
        "substring",
        "id",
        "id",
        "none",
        "substring",
    ]
    assert held_policy(ids, "quote") == "quote" and held_policy(uncited, "quote") == "none"
    assert held_policy(ids, "id") == "id"
