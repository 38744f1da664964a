"""``wrap(client).chat.completions.create(..., stream=True, chunks=...)``: citelock's stream events, built from the
SSE stream of the caller's own request, against a real HTTP server on 127.0.0.1 (and the real llama.cpp server)."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import ReasonCode
from citelock.judges import LexicalJudge

openai = pytest.importorskip("openai")
from test_wrap import CHUNKS, cited, conversation  # noqa: E402

GOOD = cited("kb-1", "The ferry leaves Arden at 7:15 every weekday.")
FABRICATED = cited("kb-999", "The ferry leaves Arden at 7:15 every weekday.", "The ferry leaves at 6:00.")
HIGH = citelock.SurfacePolicy(name="legal", stakes="high", on_fail="block")
STEP = 5  # characters per SSE chunk


class _SSE(http.server.BaseHTTPRequestHandler):
    """Streams ``body`` (whatever the request asked for: it ignores every constraint) over SSE, STEP chars a chunk."""

    protocol_version = "HTTP/1.0"
    body = GOOD
    seen: list[dict[str, Any]] = []  # noqa: RUF012 - per-server class, set in the fixture

    def do_GET(self) -> None:
        data = json.dumps({"object": "list", "data": [{"id": "sse", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.seen.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        pieces = [self.body[n : n + STEP] for n in range(0, len(self.body), STEP)]
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1
            choice = {"index": 0, "delta": {"content": piece}, "finish_reason": "stop" if last else None}
            chunk = {"id": "s-1", "object": "chat.completion.chunk", "created": 0, "model": "sse", "choices": [choice]}
            try:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the client closed the stream: stop generating
                return
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


def _serve(body: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Handler", (_SSE,), {"body": body, "seen": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", handler.seen
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def good() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    yield from _serve(GOOD)


@pytest.fixture
def fabricating() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    yield from _serve(FABRICATED)


def _check_events(events: list[Any]) -> Any:
    assert events and all(isinstance(e.type, str) for e in events)
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done"
    done = events[-1].answer
    assert isinstance(done, citelock.GuardedAnswer)
    return done


def test_stream_true_yields_citelocks_events_from_the_callers_own_sse_request(
    good: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, seen = good
    log = citelock.PromptLog(tmp_path / "log.db")
    client = citelock.wrap(openai.OpenAI(base_url=url, api_key="x", max_retries=0), server="llama.cpp", log=log)
    events = client.chat.completions.create(model="sse", messages=conversation(), chunks=CHUNKS, stream=True)
    assert len(log) == 1 and seen == []  # prepared and logged at the call, sent when iteration begins
    events = list(events)
    done = _check_events(events)
    assert len(seen) == 1 and seen[0]["stream"] is True
    assert seen[0]["messages"] == conversation()  # the caller's messages as given
    assert "grammar" in seen[0]  # the injected constraint travelled with the streamed request
    record = log.get(done.request_id)
    assert [m.model_dump() for m in record.messages] == seen[0]["messages"]
    assert done.answer.raw == GOOD and done.ok
    assert [c.model_dump(mode="json", exclude_none=True) for c in done.answer.claims] == json.loads(GOOD)["claims"]


def test_a_server_that_ignores_the_constraint_is_cut_at_the_diverging_delta(
    fabricating: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, _ = fabricating
    client = citelock.wrap(
        openai.OpenAI(base_url=url, api_key="x", max_retries=0),
        server="vllm",
        guard=citelock.Guard(HIGH, LexicalJudge()),
        log=tmp_path / "log.db",
    )
    events = list(client.chat.completions.create(model="sse", messages=conversation(), chunks=CHUNKS, stream=True))
    done = _check_events(events)
    diverged = [e for e in events if e.type == "claim.diverged"]
    assert len(diverged) == 1 and diverged[0].action == "cut" and diverged[0].field == "chunk_id"
    # "kb-9" stops being a prefix of kb-1/kb-2 at the character after "kb-"; that character is in this delta
    at = FABRICATED.index("kb-999") + len("kb-")
    assert diverged[0].delta_index == at // STEP
    assert events[-1].cut and done.generation.completion_tokens == diverged[0].tokens == at // STEP + 1
    assert done.generation.enforced is False and not done.served and done.decision == "block"
    assert ReasonCode.ANSWER_TRUNCATED in {f.reason for f in done.findings}
    assert not [e for e in events if e.type in ("claim.shown", "claim.delta")]  # nothing unverified shown


def test_the_async_client_streams_the_same_events(good: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = good

    async def collect() -> list[Any]:
        raw = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        client = citelock.wrap(raw, server="llama.cpp")
        stream = await client.chat.completions.create(model="sse", messages=conversation(), chunks=CHUNKS, stream=True)
        events = [e async for e in stream]
        await raw.close()
        return events

    done = _check_events(asyncio.run(collect()))
    assert done.answer.raw == GOOD and done.ok and seen[0]["stream"] is True


def test_a_stream_that_is_not_a_bool_is_refused_before_anything_is_logged(tmp_path: Path) -> None:
    log = citelock.PromptLog(tmp_path / "log.db")
    client = citelock.wrap(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x"), server="llama.cpp", log=log)
    with pytest.raises(citelock.UsageError, match="stream must be True or False, got 'yes'"):
        client.chat.completions.create(model="m", messages=conversation(), chunks=CHUNKS, stream="yes")
    assert len(log) == 0


@pytest.mark.server
@pytest.mark.parametrize("policy", ["substring", "sentence"])
def test_wrapped_stream_on_the_real_server_keeps_the_guarantees(llama_server: Any, policy: str, tmp_path: Path) -> None:
    log = citelock.PromptLog(tmp_path / "log.db")
    surface = citelock.SurfacePolicy(name="chat", stakes="low", sample_rate=1.0, on_fail="drop_claim")
    raw = openai.OpenAI(base_url=llama_server.base_url, api_key="local", max_retries=0, timeout=300)
    client = citelock.wrap(raw, server="llama-cpp-python", log=log, guard=citelock.Guard(surface), policy=policy)  # type: ignore[arg-type]
    events = list(client.chat.completions.create(messages=conversation(), chunks=CHUNKS, stream=True))
    done = _check_events(events)
    checked = [e for e in events if e.type == "claim.checked"]
    assert [e.claim_index for e in checked] == list(range(len(checked)))
    assert [e.claim for e in checked] == list(done.answer.claims[: len(checked)])
    record = log.get(done.request_id)
    if done.generation.enforced:
        ids = {c["id"] for c in CHUNKS}
        texts = {pc.id: record.messages[pc.placement.message].content for pc in record.chunks if pc.placement}
        for claim in done.answer.claims:
            for cite in claim.citations:
                assert cite.chunk_id in ids
                assert cite.span is not None and cite.span in texts[cite.chunk_id]
        bad = {ReasonCode.ID_NOT_IN_PROMPT, ReasonCode.FABRICATED_ID, ReasonCode.SPAN_NOT_IN_CHUNK}
        assert not bad & {f.reason for f in done.findings}
    else:
        assert any("not enforced" in note for note in done.generation.notes)


def test_a_hostile_server_streaming_2000_claims_is_cut_at_the_schemas_bound(tmp_path: Path) -> None:
    """#34 item 7: ~200 KB of claims that ignored the constraint, over real SSE: cut at the bound, not read on."""
    import time

    cite = {"chunk_id": "kb-1", "span": "7:15"}
    claim = {"text": "The ferry leaves Arden at 7:15 every weekday.", "citations": [cite]}
    body = json.dumps({"claims": [claim] * 2000})
    assert len(body) > 180_000
    answers: list[Any] = []
    options = citelock.SchemaOptions(max_claims=3)
    for source in _serve(body):
        url, _ = source
        surface = citelock.SurfacePolicy(name="chat", stakes="low", sample_rate=0.0, on_fail="drop_claim")
        client = citelock.wrap(
            openai.OpenAI(base_url=url, api_key="x", max_retries=0),
            server="vllm",
            guard=citelock.Guard(surface),
            log=tmp_path / "log.db",
            options=options,
            sinks=[lambda answer, _result: answers.append(answer)],
        )
        started = time.perf_counter()
        with pytest.raises(citelock.OutputBoundsError) as info:
            list(client.chat.completions.create(model="sse", messages=conversation(), chunks=CHUNKS, stream=True))
        elapsed = time.perf_counter() - started
    print(f"\n[hostile] 2000 claims ({len(body)} chars): cut after {elapsed:.2f} s")
    assert (info.value.bound, info.value.limit) == ("claims", 3)
    (answer,) = answers  # persisted before the error was raised
    assert answer.decision == "block" and len(answer.answer.claims) == 3
    assert ReasonCode.ANSWER_TRUNCATED in {f.reason for f in answer.findings}
    assert answer.generation.completion_tokens * STEP < 5 * len(json.dumps(claim))  # read up to the 4th claim only
