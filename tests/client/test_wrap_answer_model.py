"""citelock.answer_model: the per-request citation model for a structured-output call of the caller's own."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

import citelock
from citelock import ReasonCode
from citelock.errors import InputError, UsageError

CHUNKS = [
    {"id": "s1", "text": "The plant opened in 1998. It makes glass bottles."},
    {"id": "s2", "text": "The plant employs 40 people."},
]
OPTS = citelock.SchemaOptions(max_claims=2, max_citations=1, max_text_chars=60, max_span_chars=60)
MESSAGES = [
    {"role": "system", "content": "Answer from the passages."},
    {"role": "user", "content": "(s1) The plant opened in 1998. It makes glass bottles.\n(s2) The plant employs 40 "
     "people.\nWhen did the plant open?"},
]  # fmt: skip


def _cited(chunk_id: str, span: str) -> dict[str, object]:
    return {"claims": [{"text": "It opened in 1998.", "citations": [{"chunk_id": chunk_id, "span": span}]}]}


def test_the_model_admits_only_this_turns_ids_and_sentences() -> None:
    shape = citelock.answer_model(CHUNKS, policy="sentence", options=OPTS)
    assert shape.schema.policy == "sentence" and shape.schema.ids == ("s1", "s2")
    shape.model.model_validate(_cited("s1", "The plant opened in 1998."))
    with pytest.raises(ValidationError):
        shape.model.model_validate(_cited("s9", "The plant opened in 1998."))
    with pytest.raises(ValidationError):
        shape.model.model_validate(_cited("s2", "The plant opened in 1998."))  # a sentence of s1, not of s2
    text = json.dumps(shape.response_format)
    assert '"strict": true' in text and "The plant employs 40 people." in text


def test_checkable_turns_the_parsed_object_and_the_messages_into_what_check_guards() -> None:
    shape = citelock.answer_model(CHUNKS, policy="sentence", options=OPTS)
    parsed = shape.model.model_validate(_cited("s1", "The plant opened in 1998."))
    record, answer = shape.checkable(parsed, MESSAGES, metadata={"user": "u1"})
    assert [m.model_dump() for m in record.messages] == MESSAGES
    assert record.metadata == {"span_policy": "sentence", "user": "u1"}
    assert {pc.status for pc in record.chunks} == {"complete"}
    assert citelock.check(record, answer).ok
    wrong_record, wrong = shape.checkable(_cited("s1", "It opened in 1999."), MESSAGES)
    assert [f.reason for f in citelock.check(wrong_record, wrong).findings] == [ReasonCode.SPAN_NOT_IN_CHUNK]


def test_a_policy_the_servers_json_schema_cannot_enforce_is_downgraded_with_its_reason() -> None:
    shape = citelock.answer_model(CHUNKS, policy="substring", options=OPTS)
    assert shape.schema.policy == "sentence" and shape.schema.requested_policy == "substring"
    assert shape.schema.downgrade_reason and "substring" in shape.schema.downgrade_reason
    with pytest.raises(ValidationError):
        shape.model.model_validate(_cited("s1", "opened in 1998"))  # not one of s1's sentences


def test_bad_input_is_refused() -> None:
    with pytest.raises(InputError, match="empty"):
        citelock.answer_model([])
    with pytest.raises(InputError, match="appears twice"):
        citelock.answer_model([CHUNKS[0], CHUNKS[0]])
    with pytest.raises(UsageError, match="unknown"):
        citelock.answer_model(CHUNKS, server="nonesuch")
    shape = citelock.answer_model(CHUNKS, options=OPTS)
    other = citelock.answer_model(CHUNKS[:1], options=OPTS)
    with pytest.raises(InputError, match="expected an instance"):
        shape.answer(other.model.model_validate(_cited("s1", "The plant opened in 1998.")))


def test_response_format_is_the_one_the_server_takes() -> None:
    openai_shape = citelock.answer_model(CHUNKS, options=OPTS)
    assert openai_shape.response_format["type"] == "json_schema"
    assert openai_shape.response_format["json_schema"]["strict"] is True
    llama = citelock.answer_model(CHUNKS, server="llama-cpp-python", options=OPTS)
    assert llama.response_format["type"] == "json_object"  # llama-cpp-python refuses json_schema
    assert llama.response_format["schema"] == llama.json_schema


@pytest.mark.parametrize("output", ["It opened in 1998 [s1].", "The plant never opened", '{"text": "It opened [s1]."}'])
def test_output_of_the_constrained_call_is_its_schemas_json_or_nothing(output: str) -> None:
    """A string handed to answer() is the constrained call's output: prose or {"text"} is refused, never free text."""
    from citelock.errors import ParseError

    shape = citelock.answer_model(CHUNKS, policy="sentence", options=OPTS)
    with pytest.raises(ParseError, match="sentence citation constraint"):
        shape.answer(output)
    with pytest.raises(ParseError, match="sentence citation constraint"):
        shape.checkable(output, MESSAGES)
    answer = shape.answer(json.dumps(_cited("s1", "The plant opened in 1998.")))  # its JSON as text: parsed
    assert answer.span_policy == "sentence" and citelock.check(shape.record(MESSAGES), answer).ok
    # the record says which constraint the call declared; caller metadata cannot unsay it (a replay's parse rule)
    forged = shape.record(MESSAGES, metadata={"span_policy": None})
    assert forged.metadata["span_policy"] == "sentence"
    with pytest.raises(ParseError, match="sentence citation constraint"):
        citelock.check(forged, output)
