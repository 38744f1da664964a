"""Early abstention at every door: on a high-stakes surface, a request whose chunks hold nothing relevant to the
question is answered without generating (no backend call, no server request), through ``Citelock.answer`` /
``aanswer`` / ``stream`` / ``astream`` and ``wrap``'s ``create`` (sync and async, plain and ``stream=True``), with
the decision and the stored result ``answer`` gives.

The fake backend records every call and the scripted transport every request body (and has no response to give:
a request it received would fail the call), so "no tokens spent" is checked as "nothing was called"."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import FakeBackend, Guard, SurfacePolicy
from citelock.pipeline import ABSTENTION_TEXT
from citelock.store import PromptLog, ResultStore

openai = pytest.importorskip("openai")
from support.openai_transport import Server, scripted_async_client, scripted_client  # noqa: E402

CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-3", "text": "Harlow's city council voted 7 to 2 to raise the bridge toll to $3.50 in 2023."},
]
QUESTION = "What is the population of Harlow?"
MESSAGES = [{"role": "system", "content": "Answer from the sources."}, {"role": "user", "content": QUESTION}]
SURFACE = SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")


def _summary(answer: citelock.GuardedAnswer) -> tuple[Any, ...]:
    """What the decision and the stored result say (everything but the ids, the backend and the template)."""
    result = answer.result
    return (
        answer.decision,
        answer.served,
        answer.abstained_before_generation,
        answer.answer.abstained,
        answer.answer.claims,
        answer.findings,
        answer.rendered,
        answer.generation.completion_tokens,
        answer.generation.prompt_tokens,
        result.abstention,
        result.decision,
    )


def _stored(db: Path, answer: citelock.GuardedAnswer) -> None:
    """The prompt was logged, and the result stored, under the answer's request id."""
    assert PromptLog(db).get(answer.request_id).sha256 == answer.prompt_sha256
    stored = ResultStore(str(db))
    assert len(stored.latest()) == 1
    assert stored.for_request(answer.request_id) == answer.result


@pytest.fixture
def reference(tmp_path: Path) -> tuple[Any, ...]:
    """``Citelock.answer``'s abstention: what every other door must give."""
    fake = FakeBackend([])
    db = tmp_path / "ref.db"
    answer = citelock.Citelock(fake, log=db, guard=Guard(SURFACE), sinks=[ResultStore(str(db))]).answer(
        QUESTION, CHUNKS
    )
    assert fake.calls == []
    assert answer.abstained_before_generation and answer.rendered == ABSTENTION_TEXT
    assert answer.result.abstention == "pipeline" and answer.generation.completion_tokens == 0
    _stored(db, answer)
    return _summary(answer)


def _client(db: Path) -> tuple[citelock.Citelock, FakeBackend]:
    fake = FakeBackend([])  # nothing scripted: a call would fail
    return citelock.Citelock(fake, log=db, guard=Guard(SURFACE), sinks=[ResultStore(str(db))]), fake


def _done(events: list[Any]) -> citelock.GuardedAnswer:
    assert events[-1].type == "done"
    answer: citelock.GuardedAnswer = events[-1].answer
    return answer


async def _collect(events: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in events]


def test_the_client_doors_abstain_without_calling_the_backend(tmp_path: Path, reference: tuple[Any, ...]) -> None:
    doors = {
        "aanswer": lambda c: asyncio.run(c.aanswer(QUESTION, CHUNKS)),
        "stream": lambda c: _done(list(c.stream(QUESTION, CHUNKS))),
        "astream": lambda c: _done(asyncio.run(_collect(c.astream(QUESTION, CHUNKS)))),
    }
    for name, door in doors.items():
        db = tmp_path / f"{name}.db"
        client, fake = _client(db)
        answer = door(client)
        assert fake.calls == [], name
        assert _summary(answer) == reference, name
        _stored(db, answer)


def _wrapped(server: Server, db: Path, *, is_async: bool = False) -> Any:
    transport = scripted_async_client(server) if is_async else scripted_client(server)
    return citelock.wrap(
        transport, server="llama-cpp-python", log=PromptLog(db), guard=Guard(SURFACE), sinks=[ResultStore(str(db))]
    )


def _create(client: Any, **extra: Any) -> Any:
    return client.chat.completions.create(model="m", messages=MESSAGES, chunks=CHUNKS, **extra)


def test_wraps_create_abstains_without_sending_plain_and_streamed(tmp_path: Path, reference: tuple[Any, ...]) -> None:
    server = Server()  # no response scripted: a request sent would fail the call
    db = tmp_path / "sync.db"
    response = _create(_wrapped(server, db))
    assert server.bodies == []
    assert _summary(response.citelock) == reference
    assert response.choices[0].message.content == ABSTENTION_TEXT
    assert response.usage.completion_tokens == 0 and response.model == "m"
    _stored(db, response.citelock)
    assert PromptLog(db).get(response.citelock.request_id).metadata["backend"] == "wrap"

    db = tmp_path / "stream.db"
    events: Iterator[Any] = _create(_wrapped(server, db), stream=True)
    answer = _done(list(events))
    assert server.bodies == []
    assert _summary(answer) == reference
    _stored(db, answer)


def test_the_async_wraps_create_abstains_without_sending(tmp_path: Path, reference: tuple[Any, ...]) -> None:
    server = Server()
    db = tmp_path / "async.db"
    response = asyncio.run(_create(_wrapped(server, db, is_async=True)))
    assert server.bodies == [] and _summary(response.citelock) == reference
    _stored(db, response.citelock)

    async def streamed() -> list[Any]:
        return await _collect(await _create(_wrapped(server, tmp_path / "astream.db", is_async=True), stream=True))

    answer = _done(asyncio.run(streamed()))
    assert server.bodies == [] and _summary(answer) == reference
    _stored(tmp_path / "astream.db", answer)


def test_a_relevant_question_is_still_sent(tmp_path: Path) -> None:
    """The other side: the same surface and chunks, a question they answer, reaches the server."""
    from support.openai_transport import completion

    span = "The Aurora Bridge opened to traffic in 1932."
    claim = {"text": "The bridge opened in 1932.", "citations": [{"chunk_id": "c-1", "span": span}]}
    server = Server(completion(json.dumps({"claims": [claim]})))
    client = _wrapped(server, tmp_path / "sent.db")
    response = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "When did the Aurora Bridge open?"}], chunks=CHUNKS
    )
    assert len(server.bodies) == 1 and not response.citelock.abstained_before_generation
