"""FakeBackend's zero-config mode (each chunk's first sentence, under the request's schema) and its native async.

The zero-config answer is the fake's own construction, not a model's choice, so these tests assert it exactly:
one claim per chunk, the chunk's first sentence the schema allows, an output the schema accepts (checked twice: the
schema's own check and, where the JSON Schema is exact, ``jsonschema``), and a guard that passes it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from typing import Any

import jsonschema
import pytest

import citelock
from citelock import BackendLimits, Citelock, FakeBackend, GuardedAnswer, SchemaOptions
from citelock.constraint import POLICY_ORDER, CitationSchema, SpanPolicy, build_schema, quote_body
from citelock.constraint._schema import chunk_sentences
from citelock.errors import RuntimeFailure, UsageError
from citelock.records import PromptRecord
from citelock.stream import Done

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023. Tea stayed flat."},
    {"id": "c-3", "text": "The harbour ferry runs every twenty minutes from the north pier. It is free on Sundays."},
]
QUESTION = "What do the sources say about the Aurora bridge, prices and the ferry?"
FIRST = {c["id"]: chunk_sentences(c["text"])[0] for c in CHUNKS}


def _sent(fake: FakeBackend) -> tuple[CitationSchema, dict[str, Any]]:
    schema = fake.calls[-1].schema
    assert schema is not None
    return schema, json.loads(fake_output(fake))


def fake_output(fake: FakeBackend) -> str:
    call = fake.calls[-1]
    return fake.generate(call.record, call.schema, max_tokens=call.max_tokens).text


@pytest.mark.parametrize("policy", POLICY_ORDER)
def test_zero_config_cites_each_chunks_first_sentence_under_every_policy(policy: SpanPolicy) -> None:
    fake = FakeBackend()
    result = citelock.answer(QUESTION, CHUNKS, backend=fake, policy=policy)
    assert result.span_policy == policy and result.downgrade_reason is None
    assert result.ok and not result.findings, result.findings
    cited = [(claim.text, claim.citations[0].chunk_id) for claim in result.answer.claims]
    if policy in ("quote", "quote_sentence"):
        # the ranked grammar admits only the top sentence the guard would serve (guard/_ranked.py): the fake cites
        # what the schema allows, and nothing else
        assert cited and set(cited) <= {(FIRST[c["id"]], c["id"]) for c in CHUNKS}
        assert len(cited) == len(set(cited))
    else:
        assert cited == [(FIRST[c["id"]], c["id"]) for c in CHUNKS]
    for claim in result.answer.claims:
        span = claim.citations[0].span
        assert span == (quote_body(claim.text) if policy in ("quote", "quote_sentence") else claim.text)
    schema, data = _sent(fake)
    assert schema.violations(data) == []
    if schema.exact_json_schema:
        jsonschema.validate(data, schema.json_schema)


@pytest.mark.parametrize("policy", ["substring", "sentence", "id"])
def test_zero_config_keeps_to_the_schemas_bounds(policy: SpanPolicy) -> None:
    options = SchemaOptions(max_claims=2, max_text_chars=24, max_span_chars=20)
    fake = FakeBackend()
    result = citelock.answer(QUESTION, CHUNKS, backend=fake, policy=policy, options=options)
    assert len(result.answer.claims) == 2
    assert all(
        len(claim.text) <= 24 and FIRST[claim.citations[0].chunk_id].startswith(claim.text)
        for claim in result.answer.claims
    )
    schema, data = _sent(fake)
    assert schema.violations(data) == []
    jsonschema.validate(data, schema.json_schema)
    assert result.ok, result.findings


def test_zero_config_without_a_schema_writes_prose_with_markers() -> None:
    fake = FakeBackend(limits=BackendLimits(policies=()))
    result = citelock.answer(QUESTION, CHUNKS, backend=fake)
    assert fake.calls[0].schema is None
    assert result.answer.format == "free_text"
    assert [(c.text, [x.chunk_id for x in c.citations]) for c in result.answer.claims] == [
        (FIRST[c["id"]], [c["id"]]) for c in CHUNKS
    ]
    assert result.ok, result.findings


def test_zero_config_that_cannot_meet_min_claims_says_so() -> None:
    options = SchemaOptions(max_claims=3, min_claims=3)
    with pytest.raises(RuntimeFailure, match="at least 3 claims"):
        citelock.answer(QUESTION, CHUNKS[:2], backend=FakeBackend(), options=options)


def test_a_single_output_not_in_a_list_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="wrap a single output in a list"):
        FakeBackend('{"claims":[]}')  # type: ignore[arg-type]


def test_the_async_methods_are_native_coroutines() -> None:
    assert inspect.iscoroutinefunction(FakeBackend.agenerate)
    assert inspect.isasyncgenfunction(FakeBackend.astream)


def _where(threads: list[int]) -> Any:
    zero_config = FakeBackend()

    def script(record: PromptRecord, schema: CitationSchema | None) -> str:
        threads.append(threading.get_ident())
        call = zero_config.generate(record, schema, max_tokens=10_000)
        return call.text

    return script


def test_aanswer_and_astream_run_on_the_event_loop_thread() -> None:
    threads: list[int] = []
    client = Citelock(FakeBackend(_where(threads)))

    async def run() -> tuple[int, GuardedAnswer, list[Any]]:
        answered = await client.aanswer(QUESTION, CHUNKS, request_id="a-1")
        events = [event async for event in client.astream(QUESTION, CHUNKS, request_id="a-1")]
        return threading.get_ident(), answered, events

    loop_thread, answered, events = asyncio.run(run())
    assert threads == [loop_thread, loop_thread]  # no worker thread generated either answer
    done = events[-1]
    assert isinstance(done, Done) and not done.cut
    assert answered.ok and done.answer.ok
    assert [c.text for c in done.answer.answer.claims] == [c.text for c in answered.answer.claims]


def test_astream_closed_early_stops_where_the_consumer_stopped() -> None:
    fake = FakeBackend()
    context = citelock.assemble(QUESTION, CHUNKS)
    record = citelock.serialize(context)
    schema = build_schema(context, "sentence")

    async def run() -> int:
        stream = fake.astream(record, schema, max_tokens=10_000)
        taken = 0
        async for _ in stream:
            taken += 1
            if taken == 3:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return taken

    assert asyncio.run(run()) == 3
    assert fake.streamed == 3
    whole = "".join(fake.deltas(fake.generate(record, schema, max_tokens=10_000).text))
    assert schema.violations(json.loads(whole)) == []
