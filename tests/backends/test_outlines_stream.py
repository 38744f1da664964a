"""Guarded streaming over OutlinesBackend without a model: outlines' server clients (sync and async) whose
``generate_stream`` is scripted. The deltas are the generation, the last event's answer is ``answer``'s for the
same generation, a stream that ignores the constraint is cut at the diverging delta with outlines' generator
closed, and a model type outlines does not stream yields one step. The real model (outlines' llama.cpp model on
the bundled GGUF): ``test_outlines_stream_local_model.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import Citelock, Generation, Guard, GuardedAnswer, ReasonCode, SurfacePolicy
from citelock.backends import OutlinesBackend
from citelock.constraint import fit_schema
from citelock.errors import ConstraintViolationError, UsageError
from citelock.store import PromptLog, ResultStore

outlines = pytest.importorskip(
    "outlines", reason="the outlines extra is not installed: pip install 'citelock[outlines]'"
)
openai = pytest.importorskip("openai")

URL = "http://127.0.0.1:9/v1"  # nothing listens: constructing a client must not connect
CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-2", "text": "The bridge was closed in 2019 for repairs. It reopened in 2021."},
]
QUESTION = "When did the bridge open?"
# timings, and the note carrying the constraint's build time (constraint_ms=...)
TIMING = {"generation": {"latency_s", "first_token_s", "tokens_per_s", "schema_build_ms", "notes"}}
GOOD = json.dumps(
    {
        "claims": [
            {"text": "It opened in 1932.", "citations": [{"chunk_id": "c-1", "span": "opened in 1932"}]},
            {"text": "It reopened in 2021.", "citations": [{"chunk_id": "c-2", "span": "reopened in 2021"}]},
        ]
    },
    separators=(",", ":"),
)
FABRICATED = GOOD.replace('"c-2"', '"c-9"')


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class Script:
    """outlines' ``generate`` / ``generate_stream`` of one model, scripted; records what it was sent and read."""

    def __init__(self, output: str, size: int = 1) -> None:
        self.output, self.size = output, size
        self.sent: list[tuple[Any, Any, dict[str, Any]]] = []
        self.read = 0
        self.closed = False

    def generate(self, model_input: Any, output_type: Any, **kwargs: Any) -> str:
        self.sent.append((model_input, output_type, kwargs))
        return self.output

    def generate_stream(self, model_input: Any, output_type: Any, **kwargs: Any) -> Iterator[str]:
        self.sent.append((model_input, output_type, kwargs))
        try:
            yield ""  # outlines' clients yield empty deltas (a role-only chunk): skipped
            for piece in _pieces(self.output, self.size):
                self.read += 1
                yield piece
        finally:
            self.closed = True

    async def agenerate(self, model_input: Any, output_type: Any, **kwargs: Any) -> str:
        return self.generate(model_input, output_type, **kwargs)

    async def agenerate_stream(self, model_input: Any, output_type: Any, **kwargs: Any) -> AsyncIterator[str]:
        for piece in self.generate_stream(model_input, output_type, **kwargs):
            await asyncio.sleep(0)
            yield piece


def _backend(monkeypatch: pytest.MonkeyPatch, script: Script, *, is_async: bool = False) -> OutlinesBackend:
    if is_async:
        model = outlines.from_openai(openai.AsyncOpenAI(base_url=URL, api_key="x", max_retries=0), "served-model")
        monkeypatch.setattr(model, "generate", script.agenerate)
        monkeypatch.setattr(model, "generate_stream", script.agenerate_stream)
    else:
        model = outlines.from_openai(openai.OpenAI(base_url=URL, api_key="x", max_retries=0), "served-model")
        monkeypatch.setattr(model, "generate", script.generate)
        monkeypatch.setattr(model, "generate_stream", script.generate_stream)
    return OutlinesBackend(model)


def _same(a: GuardedAnswer, b: GuardedAnswer) -> None:
    assert a.model_dump(exclude=TIMING) == b.model_dump(exclude=TIMING)  # type: ignore[arg-type]
    assert a.generation.notes[0] == b.generation.notes[0] and a.generation.notes[0].endswith("output type JsonSchema")


def test_the_backend_stream_deltas_are_its_generation_and_what_generate_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = Script(GOOD, size=7)
    backend = _backend(monkeypatch, script)
    record = citelock.serialize(citelock.assemble(QUESTION, CHUNKS))
    schema = fit_schema(citelock.assemble(QUESTION, CHUNKS), "id", backend.limits)
    items = list(backend.stream(record, schema, max_tokens=200))
    generation = items[-1]
    assert isinstance(generation, Generation) and all(isinstance(i, str) and i for i in items[:-1])
    assert "".join(items[:-1]) == generation.text == GOOD  # type: ignore[arg-type]
    assert generation.enforced and generation.model == "served-model" and generation.finish_reason == "stop"
    whole = backend.generate(record, schema, max_tokens=200)
    timed = {"latency_s": 0.0, "first_token_s": None, "constraint_ms": 0.0, "notes": ()}
    assert dataclasses.replace(whole, **timed) == dataclasses.replace(generation, **timed)  # type: ignore[arg-type]
    (streamed_input, streamed_type, streamed_kwargs), (input_, type_, kwargs) = script.sent
    assert streamed_kwargs == kwargs and streamed_type.schema == type_.schema  # the same request, streamed
    assert streamed_input.messages == input_.messages and script.closed


@pytest.mark.parametrize("show", ["immediately", "after_checks"])
def test_the_done_answer_equals_answer_for_the_same_generation(monkeypatch: pytest.MonkeyPatch, show: str) -> None:
    client = Citelock(_backend(monkeypatch, Script(GOOD, size=3)), policy="id")
    events = list(client.stream(QUESTION, CHUNKS, request_id="r-1", show=show))  # type: ignore[arg-type]
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done" and not events[-1].cut
    checked = [e for e in events if e.type == "claim.checked"]
    assert [e.claim_index for e in checked] == [0, 1]
    done = events[-1].answer
    assert done.generation.enforced and done.backend == "outlines"
    _same(done, client.answer(QUESTION, CHUNKS, request_id="r-1"))


def test_a_stream_that_ignores_the_constraint_is_cut_at_the_diverging_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server client whose engine ignored the JSON Schema: the id stops being a prefix of a prompt id at the
    delta that wrote its ``9``; no delta after it is read, and outlines' generator is closed."""
    script = Script(FABRICATED, size=1)
    events = list(Citelock(_backend(monkeypatch, script), policy="id").stream(QUESTION, CHUNKS))
    diverged = [e for e in events if e.type == "claim.diverged"]
    at = FABRICATED.index('"c-9"') + len('"c-9')  # deltas up to and including the "9"
    assert len(diverged) == 1 and diverged[0].field == "chunk_id" and diverged[0].value == "c-9"
    assert diverged[0].tokens == at and diverged[0].action == "cut"
    assert script.read == at and script.closed
    done = events[-1]
    assert done.type == "done" and done.cut and done.answer.decision == "block"
    generation = done.answer.generation
    assert generation.completion_tokens == at and done.answer.model == "served-model"  # not the model object's repr
    reasons = {f.reason for f in done.answer.findings}
    assert {ReasonCode.ANSWER_TRUNCATED, diverged[0].reason} <= reasons


def test_closing_the_stream_closes_outlines_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(GOOD, size=1)
    events = Citelock(_backend(monkeypatch, script), policy="id").stream(QUESTION, CHUNKS, show="immediately")
    for n, _ in enumerate(events):
        if n == 10:
            break
    events.close()  # type: ignore[attr-defined]
    assert script.closed and 0 < script.read < len(GOOD)


def test_astream_on_an_async_client_and_on_a_sync_one(monkeypatch: pytest.MonkeyPatch) -> None:
    async_script, sync_script = Script(GOOD, size=5), Script(GOOD, size=5)
    async_client = Citelock(_backend(monkeypatch, async_script, is_async=True), policy="id")
    sync_client = Citelock(_backend(monkeypatch, sync_script), policy="id")

    async def run() -> tuple[list[Any], list[Any], GuardedAnswer]:
        a = [e async for e in async_client.astream(QUESTION, CHUNKS, request_id="r-2")]
        b = [e async for e in sync_client.astream(QUESTION, CHUNKS, request_id="r-2")]  # in a worker thread
        return a, b, await async_client.aanswer(QUESTION, CHUNKS, request_id="r-2")

    from_async, from_sync, whole = asyncio.run(run())
    for events, same in ((from_async, whole), (from_sync, sync_client.answer(QUESTION, CHUNKS, request_id="r-2"))):
        assert events[-1].type == "done" and not events[-1].cut
        assert [e.claim_index for e in events if e.type == "claim.checked"] == [0, 1]
        _same(events[-1].answer, same)
    assert async_script.closed and sync_script.closed
    with pytest.raises(UsageError, match="is async; call astream"):
        next(iter(async_client.backend.stream(None, None, max_tokens=1)))  # type: ignore[arg-type,attr-defined]


def test_a_model_type_outlines_does_not_stream_yields_its_answer_as_one_step(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(GOOD)
    backend = _backend(monkeypatch, script)
    backend.kind = dataclasses.replace(backend.kind, streams=False)  # as Transformers, VLLMOffline, dottxt
    record = citelock.serialize(citelock.assemble(QUESTION, CHUNKS))
    schema = fit_schema(citelock.assemble(QUESTION, CHUNKS), "id", backend.limits)
    items = list(backend.stream(record, schema, max_tokens=200))
    assert items[0] == GOOD and isinstance(items[1], Generation) and items[1].text == GOOD and len(items) == 2
    assert script.read == 0  # generate, not generate_stream
    events = list(Citelock(backend, policy="id").stream(QUESTION, CHUNKS))
    assert events[-1].type == "done" and [e.claim_index for e in events if e.type == "claim.checked"] == [0, 1]


def test_an_output_that_breaks_the_schema_raises_and_persists_the_checked_claims(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No id or span diverges, yet the whole output is not an answer the schema allows (an extra key): the
    stream raises ConstraintViolationError instead of a done event, and what was checked reaches the store."""
    broken = GOOD[:-1] + ',"note":"x"}'
    db = tmp_path / "citelock.db"
    results = ResultStore(db)
    backend = _backend(monkeypatch, Script(broken, size=4))
    low = SurfacePolicy(name="chat", stakes="low", sample_rate=1.0, on_fail="drop_claim")
    client = Citelock(backend, policy="id", log=PromptLog(db), guard=Guard(low), sinks=[results])
    seen: list[Any] = []
    with pytest.raises(ConstraintViolationError, match="output broke the constraint sent as JsonSchema"):
        for event in client.stream(QUESTION, CHUNKS, request_id="broken-1"):
            seen.append(event)
    assert "done" not in [e.type for e in seen]
    stored = results.for_request("broken-1")
    assert stored is not None and stored.decision == "block"
    assert len(stored.claims) == len([e for e in seen if e.type == "claim.checked"]) == 2
    truncation = [f for f in stored.report.findings if f.reason == ReasonCode.ANSWER_TRUNCATED]
    assert len(truncation) == 1 and "the constraint failed mid-decode" in truncation[0].detail
