"""``wrap`` ranks its grammar as ``Citelock.answer`` does (issue #35 item 4, at every door).

The same question and chunks give the same constraint (the grammar or JSON Schema as sent to the server, the token
bound) through ``Citelock.answer`` over the same server and through ``wrap``'s ``create``; and a question whose
ranked grammar admits no sentence the high-stakes guard would serve is answered without sending anything, although
its chunks are relevant enough not to abstain on relevance alone (so it is the ranking that abstains).

The scripted transport records every request body; a server with nothing scripted fails any request it receives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

import citelock
from citelock import Guard, SurfacePolicy, assemble
from citelock.backends import OpenAIBackend
from citelock.errors import TruncatedOutputError
from citelock.guard._ranked import rank_request
from citelock.guard._relevance import should_abstain

openai = pytest.importorskip("openai")
from support.openai_transport import Server, completion, scripted_async_client, scripted_client  # noqa: E402

PARAGRAPH = (
    "The final was a football game to decide the champion of the league for the 2015 season. "
    "The final was played on February 7, 2016, at Harbor Stadium in Santa Clara, California. "
    "The home side defeated the visitors 24 to 10 to earn their third title."
)
CHUNKS = [  # the answer's chunk second: a ranked request lists it first
    {"id": "p-2", "text": "The league was founded in 1920. It has thirty-two member clubs across the country."},
    {"id": "p-1", "text": PARAGRAPH},
]
NOTHING_ADMITTED = "Where did the final take place?"
ADMITTED = "When was the final played?"
SURFACE = SurfacePolicy(name="docs", stakes="high")
CONSTRAINT_FIELDS = ("grammar", "response_format", "structured_outputs", "ebnf", "max_tokens", "max_completion_tokens")


def _constraint(body: dict[str, Any]) -> dict[str, Any]:
    """What a request body says of the answer's shape (the constraint and the token bound), not the messages."""
    merged = {**body, **body.get("extra_body", {})}
    return {key: merged[key] for key in CONSTRAINT_FIELDS if key in merged}


def _wrapped(server: Server, policy: str, kind: str = "llama-cpp-python", *, is_async: bool = False) -> Any:
    transport = scripted_async_client(server) if is_async else scripted_client(server)
    return citelock.wrap(transport, server=kind, guard=Guard(SURFACE), policy=policy)  # type: ignore[arg-type]


def _messages(question: str, *, holding: bool = False) -> list[dict[str, str]]:
    """The caller's messages; ``holding``: the system message holds the chunks, in ``CHUNKS`` order (not ranked)."""
    sources = "".join(f"\n[{c['id']}] {c['text']}" for c in CHUNKS) if holding else ""
    return [{"role": "system", "content": "Answer from the sources." + sources}, {"role": "user", "content": question}]


def test_the_fixture_is_relevant_but_its_ranked_grammar_admits_nothing() -> None:
    """What the abstention tests below rely on: relevance alone would send the request, the ranking does not."""
    assert not should_abstain(NOTHING_ADMITTED, [c["text"] for c in CHUNKS], SURFACE.abstain_below)
    ranked = rank_request(assemble(NOTHING_ADMITTED, CHUNKS), "quote", stakes="high")
    assert ranked is not None and ranked.admits_nothing
    admitted = rank_request(assemble(ADMITTED, CHUNKS), "quote", stakes="high")
    assert admitted is not None and admitted.admitted is not None


async def _collect(events: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in events]


@pytest.mark.parametrize("policy", ["quote", "quote_sentence"])
def test_wraps_create_abstains_when_the_ranked_grammar_admits_nothing(policy: str) -> None:
    reference = citelock.Citelock(citelock.FakeBackend([]), guard=Guard(SURFACE), policy=policy).answer(  # type: ignore[arg-type]
        NOTHING_ADMITTED, CHUNKS
    )
    assert reference.abstained_before_generation

    def create(client: Any, **extra: Any) -> Any:
        return client.chat.completions.create(model="m", messages=_messages(NOTHING_ADMITTED), chunks=CHUNKS, **extra)

    server = Server()  # nothing scripted: a request sent would fail the call
    answers = {
        "create": create(_wrapped(server, policy)).citelock,
        "stream": list(create(_wrapped(server, policy), stream=True))[-1].answer,
        "acreate": asyncio.run(create(_wrapped(server, policy, is_async=True))).citelock,
    }

    async def astream() -> list[Any]:
        return await _collect(await create(_wrapped(server, policy, is_async=True), stream=True))

    answers["astream"] = asyncio.run(astream())[-1].answer
    assert server.bodies == []
    for door, answer in answers.items():
        assert answer.abstained_before_generation, door
        assert answer.result.abstention == "pipeline" and answer.generation.completion_tokens == 0, door
        assert (answer.decision, answer.rendered) == (reference.decision, reference.rendered), door


@pytest.mark.parametrize("holding", [False, True])
@pytest.mark.parametrize("kind", ["llama-cpp-python", "vllm", "sglang"])
@pytest.mark.parametrize("policy", ["quote", "quote_sentence", "sentence", "substring"])
def test_the_constraint_wrap_sends_is_the_one_answer_sends(policy: str, kind: str, holding: bool) -> None:
    reply = completion(json.dumps({"claims": []}))
    ours = Server(reply)
    backend = OpenAIBackend.from_client(scripted_client(ours), server=kind, model="m")
    citelock.Citelock(backend, guard=Guard(SURFACE), policy=policy).answer(ADMITTED, CHUNKS)  # type: ignore[arg-type]
    theirs = Server(reply, reply)
    messages = _messages(ADMITTED, holding=holding)
    _wrapped(theirs, policy, kind).chat.completions.create(model="m", messages=messages, chunks=CHUNKS)
    events = _wrapped(theirs, policy, kind).chat.completions.create(
        model="m", messages=messages, chunks=CHUNKS, stream=True
    )
    with pytest.raises(TruncatedOutputError):  # the scripted server answers no SSE: only its request is compared
        list(events)
    assert len(ours.bodies) == 1 and len(theirs.bodies) == 2
    assert len(theirs.bodies[0]["messages"]) == 2 + (not holding)  # citelock's own message only when needed
    sent = _constraint(ours.bodies[0])
    assert set(sent) - {"max_tokens", "max_completion_tokens"}, sent  # a constraint was sent
    assert _constraint(theirs.bodies[0]) == sent
    assert {k: v for k, v in _constraint(theirs.bodies[1]).items() if k != "stream"} == sent


def test_a_ranked_quote_grammar_offers_only_the_admitted_sentence_through_wrap() -> None:
    server = Server(completion(json.dumps({"claims": []})))
    _wrapped(server, "quote").chat.completions.create(model="m", messages=_messages(ADMITTED), chunks=CHUNKS)
    grammar = server.bodies[0]["grammar"]
    assert '"played "' in grammar  # the admitted sentence: "The final was played on February 7, 2016, ..."
    assert '"founded "' not in grammar and '"defeated "' not in grammar  # every other sentence is excluded


def test_citelocks_own_context_message_lists_the_chunks_best_first() -> None:
    server = Server(completion(json.dumps({"claims": []})))
    response = _wrapped(server, "quote").chat.completions.create(model="m", messages=_messages(ADMITTED), chunks=CHUNKS)
    ours = server.bodies[0]["messages"][1]["content"]
    assert ours.index("p-1") < ours.index("p-2")
    assert [c.id for c in response.citelock.answer.claims] == []  # nothing claimed: the reply was empty
    assert not response.citelock.abstained_before_generation
