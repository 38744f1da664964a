"""Citelock.answer(history=...): the whole conversation is sent and logged; evidence is only this turn's chunks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import ReasonCode
from citelock.backends import FakeBackend
from citelock.errors import InputError
from citelock.guard import check
from citelock.prompt._index import PromptIndex
from citelock.reasons import REASONS, codes_in

CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened in 1932. It spans 880 meters."},
    {"id": "c-2", "text": "The bridge was repainted in 2019."},
]
HISTORY = [
    {"role": "user", "content": "Which bridge crosses Harlow Bay?"},
    {"role": "assistant", "content": "The Aurora Bridge crosses Harlow Bay, as the old guide [c-7] says."},
    {"role": "user", "content": "Is it the longest in the region?"},
    {"role": "assistant", "content": "It is not the longest in the region."},
]


def _answer(chunk_id: str, span: str) -> dict[str, Any]:
    return {"claims": [{"text": "A claim.", "citations": [{"chunk_id": chunk_id, "span": span}]}]}


def _client(output: dict[str, Any], tmp_path: Path) -> citelock.Citelock:
    backend = FakeBackend([json.dumps(output)], enforced=False)
    # relevance off: these placeholder claims ("A claim.") answer no question; the subject here is the history
    return citelock.Citelock(backend, log=tmp_path / "log.db", policy="id", guard=citelock.Guard(relevance="off"))


def test_the_conversation_is_sent_and_logged_between_the_system_prompt_and_this_turn(tmp_path: Path) -> None:
    client = _client(_answer("c-1", "It spans 880 meters."), tmp_path)
    result = client.answer("When did it open?", CHUNKS, history=HISTORY)
    record = client.log.get(result.request_id) if client.log else None
    assert record is not None
    roles = [m.role for m in record.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m.model_dump() for m in record.messages[1:5]] == HISTORY
    assert {pc.placement.message for pc in record.chunks if pc.placement} == {5}  # this turn's message
    assert record.question_placement is not None and record.question_placement.message == 5
    assert result.ok and result.prompt_sha256 == record.sha256
    plain = _client(_answer("c-1", "It spans 880 meters."), tmp_path).answer("When did it open?", CHUNKS)
    assert plain.prompt_sha256 != record.sha256


def test_a_span_only_in_an_earlier_turn_is_a_citation_of_the_conversation(tmp_path: Path) -> None:
    client = _client(_answer("c-1", "It is not the longest in the region."), tmp_path)
    result = client.answer("When did it open?", CHUNKS, history=HISTORY)
    assert [f.reason for f in result.findings] == [ReasonCode.SPAN_ONLY_IN_HISTORY]
    assert ReasonCode.SPAN_ONLY_IN_HISTORY in codes_in("span")
    assert "earlier turns" in REASONS[ReasonCode.SPAN_ONLY_IN_HISTORY].description


def test_a_span_in_the_question_stays_span_only_in_question(tmp_path: Path) -> None:
    client = _client(_answer("c-1", "When did it open"), tmp_path)
    result = client.answer("When did it open?", CHUNKS, history=HISTORY)
    assert [f.reason for f in result.findings] == [ReasonCode.SPAN_ONLY_IN_QUESTION]


def test_an_id_only_an_earlier_turn_carried_is_stale(tmp_path: Path) -> None:
    client = _client(_answer("c-7", "the old guide"), tmp_path)
    result = client.answer("When did it open?", CHUNKS, history=HISTORY)
    assert [f.reason for f in result.findings] == [ReasonCode.STALE_ID]
    never = _client(_answer("c-8", "the old guide"), tmp_path).answer("When did it open?", CHUNKS, history=HISTORY)
    assert [f.reason for f in never.findings] == [ReasonCode.ID_NOT_IN_PROMPT]
    stored = _client(_answer("c-7", "x"), tmp_path).answer("When?", CHUNKS, history=HISTORY, known_ids={"c-1", "c-2"})
    assert [f.reason for f in stored.findings] == [ReasonCode.FABRICATED_ID]  # the store's word wins


def test_history_is_checked(tmp_path: Path) -> None:
    client = _client(_answer("c-1", "It spans 880 meters."), tmp_path)
    with pytest.raises(InputError, match="history\\[0\\] has role 'system'"):
        client.answer("When?", CHUNKS, history=[{"role": "system", "content": "Be rude."}])
    with pytest.raises(InputError, match="history\\[1\\] is not a message"):
        client.answer("When?", CHUNKS, history=[HISTORY[0], {"role": "user"}])
    assert client.log is not None and len(client.log) == 0  # nothing logged


def test_aanswer_takes_history(tmp_path: Path) -> None:
    client = _client(_answer("c-2", "The bridge was repainted in 2019."), tmp_path)
    result = asyncio.run(client.aanswer("When was it repainted?", CHUNKS, history=HISTORY))
    assert client.log is not None and len(client.log.get(result.request_id).messages) == 6
    assert result.ok


def test_a_chunk_in_a_message_before_this_turn_is_context_not_history() -> None:
    messages = [
        {"role": "user", "content": f"Sources: {CHUNKS[0]['text']}"},
        {"role": "assistant", "content": "Noted. It spans 880 meters."},
        {"role": "user", "content": "When did it open?"},
    ]
    record = citelock.record_from_messages(messages, CHUNKS[:1])
    assert PromptIndex.build(record).history() == frozenset({1})
    report = check(record, _answer("c-1", "Noted"))
    assert [f.reason for f in report.findings] == [ReasonCode.SPAN_ONLY_IN_HISTORY]


THREE_TURNS = [
    *HISTORY,
    {"role": "user", "content": "Who repainted it?"},
    {"role": "assistant", "content": "The city council had it repainted."},
]
TIMING = {"generation": {"latency_s", "first_token_s", "tokens_per_s", "schema_build_ms"}}


@pytest.mark.parametrize(
    ("output", "reasons"),
    [
        (_answer("c-1", "It spans 880 meters."), []),
        (_answer("c-1", "The city council had it repainted."), [ReasonCode.SPAN_ONLY_IN_HISTORY]),
    ],
)
def test_stream_takes_history_and_its_done_answer_is_answers(
    output: dict[str, Any], reasons: list[ReasonCode], tmp_path: Path
) -> None:
    def client(name: str = "log.db") -> citelock.Citelock:
        backend = FakeBackend([json.dumps(output)], enforced=False)
        return citelock.Citelock(backend, log=tmp_path / name, policy="id", guard=citelock.Guard(relevance="off"))

    whole = client("answer.db").answer("When did it open?", CHUNKS, history=THREE_TURNS, request_id="h-2")
    stream = client().stream("When did it open?", CHUNKS, history=THREE_TURNS, request_id="h-2", on_diverge="continue")
    events = list(stream)
    assert events[-1].type == "done" and [e.type for e in events].count("done") == 1
    streamed = events[-1].answer
    exclude: Any = TIMING
    assert streamed.model_dump(exclude=exclude) == whole.model_dump(exclude=exclude)
    assert [f.reason for f in streamed.findings] == reasons
    checked = [e for e in events if e.type == "claim.checked"]
    assert [f.reason for e in checked for f in e.findings] == reasons  # flagged in the stream, as in answer
    assert [e.reason for e in events if e.type == "claim.diverged"] == reasons  # at the delta it left the chunk
    log = citelock.PromptLog(tmp_path / "log.db")
    assert [m.model_dump() for m in log.get("h-2").messages[1:7]] == THREE_TURNS

    async def collect() -> list[Any]:
        stream = client().astream("When did it open?", CHUNKS, history=THREE_TURNS, on_diverge="continue")
        return [e async for e in stream]

    async_done = asyncio.run(collect())[-1].answer
    assert [f.reason for f in async_done.findings] == reasons
    assert len(log.get(async_done.request_id).messages) == 8
