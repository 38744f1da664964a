"""Guarded streaming on the real bundled model (``local_model``), a real llama.cpp server (``server``) and a real
HTTP server that cuts its stream mid-answer.

These assert what streaming guarantees whatever the model writes: the deltas are the generation; events come in
order and are well formed; every claim's streamed verdict is the final guard's; nothing that failed its checks
is ever shown under ``after_checks``; a stream cut at a divergence stopped at that very delta; a cancelled
stream persisted its log entry, its checked claims and the truncation finding.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from citelock import Citelock, Generation, Guard, ReasonCode, SurfacePolicy
from citelock._request import Request
from citelock.errors import TruncatedOutputError
from citelock.store import PromptLog, ResultStore, ReviewQueue

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "The harbour museum opened in 1975. It holds 4,000 maps of the coast."},
]
QUESTION = "When did the Aurora bridge open, and how long is it?"
LOW = SurfacePolicy(name="chat", stakes="low", sample_rate=1.0, on_fail="drop_claim")


def _assert_well_formed(events: list[Any], *, show: str) -> None:
    """Order and completeness of a stream's events, against its own final answer."""
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done"
    done = events[-1].answer
    claims = done.answer.claims
    checked = [e for e in events if e.type == "claim.checked"]
    assert [e.claim_index for e in checked] == list(range(len(checked)))
    if not events[-1].cut:
        assert len(checked) == len(claims)
    for event in checked:
        assert event.claim == claims[event.claim_index]
        ours = {(f.reason, f.citation_index) for f in event.findings}
        theirs = {(f.reason, f.citation_index) for f in done.findings if f.claim_index == event.claim_index}
        assert ours <= theirs  # the final guard's free-check findings include the streamed ones (support adds)
        if event.passed:
            assert all(f.layer == "support" for f in done.findings if f.claim_index == event.claim_index)
    if show == "immediately":
        for n, claim in enumerate(claims[: len(checked)]):
            snapshots = [e.snapshot for e in events if e.type == "claim.delta" and e.claim_index == n]
            assert all(claim.text.startswith(s) for s in snapshots)
    else:
        assert not [e for e in events if e.type in ("claim.delta", "citation.delta")]
        passed = {e.claim_index for e in checked if e.passed}
        shown = [e.claim_index for e in events if e.type == "claim.shown"]
        assert set(shown) <= passed and len(shown) == len(set(shown))
        for e in events:
            if e.type == "claim.shown":
                first_check = next(c for c in checked if c.claim_index == e.claim_index)
                assert events.index(first_check) < events.index(e)


def _assert_cut_where_it_diverged(events: list[Any]) -> None:
    """If a citation diverged, generation stopped at that delta; if it did not, no citation left the prompt."""
    done = events[-1]
    diverged = [e for e in events if e.type == "claim.diverged"]
    reasons = {f.reason for f in done.answer.findings}
    if diverged:
        d = diverged[0]
        assert len(diverged) == 1 and done.cut and d.action == "cut"
        assert done.answer.generation.completion_tokens == d.tokens == d.delta_index + 1
        assert ReasonCode.ANSWER_TRUNCATED in reasons and done.answer.decision == "block"
    else:
        assert not done.cut and ReasonCode.ID_NOT_IN_PROMPT not in reasons


def _deltas_are_the_generation(items: Iterator[str | Generation]) -> Generation:
    pieces: list[str] = []
    generation = None
    for item in items:
        if isinstance(item, Generation):
            generation = item
        else:
            assert generation is None and isinstance(item, str) and item
            pieces.append(item)
    assert generation is not None and "".join(pieces) == generation.text
    return generation


@pytest.fixture(scope="module")
def local() -> Any:
    pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
    pytest.importorskip("llguidance", reason="the local extra is not installed: pip install 'citelock[local]'")
    from citelock.backends import LocalBackend

    return LocalBackend()


@pytest.mark.local_model
def test_local_model_stream_is_well_formed_and_its_verdicts_are_the_guards(local: Any, tmp_path: Path) -> None:
    log = PromptLog(tmp_path / "log.db")
    client = Citelock(local, log=log, guard=Guard(LOW))
    for show in ("immediately", "after_checks"):
        events = list(client.stream(QUESTION, CHUNKS, policy="substring", max_tokens=160, show=show))  # type: ignore[arg-type]
        _assert_well_formed(events, show=show)
        done = events[-1].answer
        assert done.generation.enforced
        again = Guard(LOW).run(log.get(done.request_id), done.answer)
        assert again.report.findings == done.report.findings and again.decision == done.decision


@pytest.mark.local_model
def test_local_backend_deltas_are_its_generation(local: Any) -> None:
    client = Citelock(local)
    prep = client._prepare(Request(QUESTION, tuple(CHUNKS), policy="sentence", max_tokens=120), local)
    generation = _deltas_are_the_generation(local.stream(prep.record, prep.schema, max_tokens=120))
    assert generation.enforced and generation.completion_tokens


@pytest.mark.local_model
def test_naive_local_stream_stops_at_a_diverging_id_or_has_none(local: Any) -> None:
    from citelock.backends import NaiveBackend

    events = list(Citelock(NaiveBackend()).stream(QUESTION, CHUNKS, max_tokens=120))
    _assert_well_formed(events, show="after_checks")
    _assert_cut_where_it_diverged(events)


@pytest.mark.local_model
def test_cancelling_the_local_model_mid_answer_persists_what_was_checked(local: Any, tmp_path: Path) -> None:
    db = tmp_path / "citelock.db"
    log, queue, results = PromptLog(db), ReviewQueue(db), ResultStore(db)
    client = Citelock(local, log=log, guard=Guard(LOW), sinks=[queue, results])
    events = client.stream(QUESTION, CHUNKS, request_id="cancel-real", policy="substring", show="immediately")
    seen = []
    for event in events:
        seen.append(event)
        if len(seen) == 5:
            break
    events.close()  # type: ignore[attr-defined]
    assert log.get("cancel-real").request_id == "cancel-real"
    stored = results.for_request("cancel-real")
    assert stored is not None and stored.decision == "block"
    assert len(stored.claims) == len([e for e in seen if e.type == "claim.checked"])
    assert ReasonCode.ANSWER_TRUNCATED in {f.reason for f in stored.report.findings}
    assert ReasonCode.ANSWER_TRUNCATED in {e.reason for e in queue if e.request_id == "cancel-real"}
    # generation really stopped: the decode loop let go of the model at once
    lock = local.runtime._lock
    assert lock.acquire(blocking=False)
    lock.release()


@pytest.mark.local_model
def test_local_model_astream(local: Any) -> None:
    client = Citelock(local, guard=Guard(LOW))

    async def collect() -> list[Any]:
        return [e async for e in client.astream(QUESTION, CHUNKS, policy="sentence", max_tokens=120)]

    events = asyncio.run(collect())
    _assert_well_formed(events, show="immediately")


@pytest.mark.server
def test_server_stream_over_sse_is_well_formed(llama_server: Any, tmp_path: Path) -> None:
    from citelock.backends import OpenAIBackend

    backend = OpenAIBackend(base_url=llama_server.base_url, server="llama-cpp-python")
    log = PromptLog(tmp_path / "log.db")
    client = Citelock(backend, log=log, guard=Guard(LOW))
    events = list(client.stream(QUESTION, CHUNKS, policy="sentence", max_tokens=160, show="after_checks"))
    _assert_well_formed(events, show="after_checks")
    done = events[-1].answer
    again = Guard(LOW).run(log.get(done.request_id), done.answer)
    assert again.report.findings == done.report.findings
    prep = client._prepare(Request(QUESTION, tuple(CHUNKS), policy="sentence", max_tokens=120), backend)
    _deltas_are_the_generation(backend.stream(prep.record, prep.schema, max_tokens=120))


@pytest.mark.server
def test_server_without_a_constraint_stops_at_a_diverging_id_or_has_none(llama_server: Any) -> None:
    from citelock.backends import OpenAIBackend

    backend = OpenAIBackend(base_url=llama_server.base_url, server="llama-cpp-python", constrain=False)
    events = list(Citelock(backend).stream(QUESTION, CHUNKS, max_tokens=120))
    _assert_well_formed(events, show="after_checks")
    _assert_cut_where_it_diverged(events)


@pytest.mark.server
def test_server_astream_with_an_async_client(llama_server: Any) -> None:
    import openai

    from citelock.backends import OpenAIBackend

    async def collect() -> list[Any]:
        client = openai.AsyncOpenAI(base_url=llama_server.base_url, api_key="local", max_retries=0, timeout=300)
        backend = OpenAIBackend.from_client(client, server="llama-cpp-python")
        events = [e async for e in Citelock(backend, guard=Guard(LOW)).astream(QUESTION, CHUNKS, policy="sentence")]
        await client.close()
        return events

    _assert_well_formed(asyncio.run(collect()), show="immediately")


class _CuttingHandler(http.server.BaseHTTPRequestHandler):
    """Streams one complete claim and half of the next over SSE, then hangs up (no finish reason)."""

    protocol_version = "HTTP/1.0"
    body = (
        '{"claims":[{"text":"It spans 880 meters.","citations":[{"chunk_id":"c-1","span":"spans 880 meters"}]},'
        '{"text":"It op'
    )

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for n in range(0, len(self.body), 7):
            chunk = {
                "id": "cut-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": self.body[n : n + 7]}, "finish_reason": None}],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


def test_a_server_cutting_the_stream_is_truncated_output_and_the_complete_claims_keep_their_verdicts(
    tmp_path: Path,
) -> None:
    pytest.importorskip("openai", reason="the openai extra is not installed")
    from citelock.backends import OpenAIBackend

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CuttingHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        backend = OpenAIBackend(
            base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", model="m", server="llama.cpp"
        )
        db = tmp_path / "citelock.db"
        results = ResultStore(db)
        client = Citelock(backend, log=PromptLog(db), guard=Guard(LOW), sinks=[ReviewQueue(db), results])
        seen: list[Any] = []
        with pytest.raises(TruncatedOutputError) as caught:
            for event in client.stream(QUESTION, CHUNKS, policy="substring", request_id="cut-1", show="after_checks"):
                seen.append(event)
        assert caught.value.partial == _CuttingHandler.body
        checked = [e for e in seen if e.type == "claim.checked"]
        assert [(e.claim_index, e.passed) for e in checked] == [(0, True)]
        stored = results.for_request("cut-1")
        assert stored is not None and [c.claim for c in stored.claims] == ["It spans 880 meters."]
        assert [f.reason for f in stored.report.findings] == [ReasonCode.ANSWER_TRUNCATED]
    finally:
        httpd.shutdown()
        httpd.server_close()
