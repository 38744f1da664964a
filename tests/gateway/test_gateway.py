"""The guard gateway driven by the real ``openai`` SDK (plain and ``stream=True``) and plain HTTP, against a fake
upstream (a real HTTP server on 127.0.0.1) through a real uvicorn server: what a caller gets back, what it never
gets (a fabricated id shown as verified, a streamed claim that later fails, a traceback), and what is stored."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import citelock
from citelock.gateway import BLOCKED_TYPE, GatewayKeys, GatewayLimits, GatewaySettings, GatewaySurface, create_app
from citelock.store import PromptLog, ResultStore, ReviewQueue
from support.fake_upstream import CHUNKS, FABRICATED_CLAIM, GOOD_CLAIM, Upstream, fake_upstream
from support.gateway_server import served

openai = pytest.importorskip("openai")

QUESTION = [
    {"role": "system", "content": "You are the Harbourline help desk. Answer only from the passages."},
    {"role": "user", "content": "Hi, do you run a ferry?"},
    {"role": "assistant", "content": "Yes, every weekday."},
    {"role": "user", "content": "When does the ferry leave Arden?"},
]
UPSTREAM_SECRET = "sk-upstream-never-leaves"


def _surface(name: str, **door: Any) -> GatewaySurface:
    policy = citelock.SurfacePolicy(name=name, stakes="low", sample_rate=0.0, on_fail=door.pop("on_fail", "block"))
    return GatewaySurface(policy=policy, **door)


SURFACES = {
    "support": _surface("support", show="after_checks"),
    "kiosk": _surface("kiosk", on_block="refuse", refusal="Please ask at the ticket office."),
    "drop": _surface("drop", on_fail="drop_claim", show="after_checks"),
    "live": _surface("live", on_fail="drop_claim", show="immediately"),
    "chat": _surface("chat", passthrough=True),
}


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with fake_upstream() as up:
        yield up


def _settings(upstream_url: str, db: Path, **extra: Any) -> GatewaySettings:
    return GatewaySettings(
        surfaces=SURFACES, default_surface="support", db=str(db), upstream=upstream_url, server="llama.cpp", **extra
    )


@pytest.fixture
def gateway(upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("CITELOCK_UPSTREAM_API_KEY", UPSTREAM_SECRET)
    limits = GatewayLimits(max_body_bytes=20_000, max_chunks=3, max_chunk_chars=500, timeout_s=2.0)
    with served(create_app(_settings(upstream.url, tmp_path / "gw.db", limits=limits))) as url:
        yield url


def _client(url: str, key: str = "none") -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def _create(client: Any, model: str = "good", surface: str | None = None, **extra: Any) -> Any:
    ours: dict[str, Any] = {"chunks": CHUNKS}
    if surface is not None:
        ours["surface"] = surface
    return client.chat.completions.with_raw_response.create(
        model=model, messages=QUESTION, extra_body={"citelock": ours}, **extra
    )


def test_a_valid_answer_comes_back_guarded_with_headers_and_the_citelock_record(
    gateway: str, upstream: Upstream, tmp_path: Path
) -> None:
    raw = _create(_client(gateway))
    completion = raw.parse()
    assert raw.headers["x-citelock-decision"] == "pass"
    assert raw.headers["x-citelock-surface"] == "support"
    record = completion.model_extra["citelock"]
    assert record["request_id"] == raw.headers["x-citelock-request-id"]
    assert record["result"]["decision"] == "pass"
    assert completion.choices[0].message.content == record["rendered"]
    assert "kb-1" in completion.choices[0].message.content  # the footnote names the verified source
    # the caller's messages went upstream as given (in order; citelock's context message holds the chunks)
    sent = upstream.seen[-1]["messages"]
    assert [m for m in sent if m in QUESTION] == QUESTION
    assert "grammar" in upstream.seen[-1]  # the per-request constraint, the way llama.cpp takes it
    logged = PromptLog(tmp_path / "gw.db").get(record["request_id"])
    assert [m.model_dump() for m in logged.messages] == sent
    assert len(ResultStore(tmp_path / "gw.db")) == 1


def test_a_fabricated_id_is_blocked_as_a_400_in_the_openai_envelope(gateway: str, tmp_path: Path) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _create(_client(gateway), "fabricate")
    body = caught.value.response.json()
    assert caught.value.response.headers["x-citelock-decision"] == "block"
    assert body["error"]["type"] == BLOCKED_TYPE
    assert body["error"]["code"] in ("ID_NOT_IN_PROMPT", "FABRICATED_ID")
    assert body["citelock"]["result"]["decision"] == "block"
    assert "7:15" not in json.dumps(body["error"])  # no answer text in the error
    entries = [entry for entry, _ in ReviewQueue(tmp_path / "gw.db").items()]
    assert any(e.reason.value == body["error"]["code"] for e in entries)


def test_a_refusing_surface_answers_200_with_its_refusal_and_content_filter(gateway: str) -> None:
    raw = _create(_client(gateway), "fabricate", "kiosk")
    completion = raw.parse()
    assert raw.headers["x-citelock-decision"] == "block"
    assert completion.choices[0].finish_reason == "content_filter"
    assert completion.choices[0].message.content == "Please ask at the ticket office."
    assert completion.model_extra["citelock"]["result"]["decision"] == "block"


def test_a_drop_claim_surface_serves_only_the_verified_claim(gateway: str) -> None:
    raw = _create(_client(gateway), "fabricate", "drop")
    content = raw.parse().choices[0].message.content
    assert GOOD_CLAIM["text"] in content
    assert FABRICATED_CLAIM["text"] not in content and "kb-999" not in content


def _stream(url: str, model: str, surface: str) -> tuple[str, list[Any]]:
    stream = _client(url).chat.completions.create(
        model=model, messages=QUESTION, stream=True, extra_body={"citelock": {"chunks": CHUNKS, "surface": surface}}
    )
    text, chunks = "", []
    for chunk in stream:
        chunks.append(chunk)
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    return text, chunks


def test_a_stream_ends_with_the_verdict_chunk(gateway: str) -> None:
    text, chunks = _stream(gateway, "good", "support")
    assert text == GOOD_CLAIM["text"]
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["citelock"]["result"]["decision"] == "pass"
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_a_stream_shows_nothing_that_later_fails(gateway: str) -> None:
    text, chunks = _stream(gateway, "fabricate", "drop")
    assert FABRICATED_CLAIM["text"] not in text and "free for cars" not in text
    events = [c.model_extra.get("citelock", {}).get("event") for c in chunks]
    assert "claim.withheld" in events or "claim.diverged" in events
    assert chunks[-1].model_extra["citelock"]["rendered"].count("kb-999") == 0


def test_a_blocked_stream_ends_with_one_error_chunk(gateway: str) -> None:
    with pytest.raises(openai.APIError) as caught:
        _stream(gateway, "fabricate", "support")
    assert "blocked" in str(caught.value)


def test_an_immediate_stream_retracts_a_shown_claim_that_fails(gateway: str) -> None:
    response = httpx.post(
        f"{gateway}/v1/chat/completions",
        json={"model": "fabricate", "messages": QUESTION, "stream": True,
              "citelock": {"chunks": CHUNKS, "surface": "live"}},
        timeout=30,
    )  # fmt: skip
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    assert chunks[-1]["citelock"]["request_id"] == response.headers["x-citelock-request-id"]
    shown = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    ours = [c["citelock"] for c in chunks if "citelock" in c and "event" in c["citelock"]]
    failed = {e["claim_index"] for e in ours if e["event"] in ("claim.retracted", "claim.diverged", "claim.withheld")}
    assert failed, ours
    if "free for cars" in shown:  # shown as generated: it must have been taken down
        assert any(e["event"] == "claim.retracted" and e["claim_index"] in failed for e in ours)


def _post(url: str, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body).encode()
    merged = {"content-type": "application/json", **(headers or {})}
    return httpx.post(f"{url}/v1/chat/completions", content=content, headers=merged, timeout=30)


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert "Traceback" not in response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["message"] and error["type"]
    return error


def _body(**citelock: Any) -> dict[str, Any]:
    return {"model": "good", "messages": QUESTION, "citelock": {"chunks": CHUNKS, **citelock}}


def test_bad_bodies_get_their_status_and_a_json_error(gateway: str) -> None:
    assert "JSON" in _error(_post(gateway, None, raw=b"{not json"), 400)["message"]
    assert _error(_post(gateway, [1, 2]), 400)["message"].startswith("the request body is a JSON list")
    assert (
        "citelock.chunks is missing" in _error(_post(gateway, {"model": "good", "messages": QUESTION}), 400)["message"]
    )
    assert _error(_post(gateway, {**_body(), "messages": "hi"}), 400)["param"] == "messages"
    too_many = [{"id": f"c{n}", "text": f"text {n}"} for n in range(4)]
    assert _error(_post(gateway, _body(chunks=too_many)), 400)["code"] == "too_many_chunks"
    assert _error(_post(gateway, _body(chunks=[{"id": "c", "text": "x" * 501}])), 400)["code"] == "chunk_too_large"
    assert _error(_post(gateway, _body(surface="nope")), 400)["code"] == "surface_not_found"
    assert "citelock.policy" in _error(_post(gateway, _body(policy="verbatim")), 400)["message"]
    own_format = {**_body(), "response_format": {"type": "json_object"}}
    assert "response_format" in _error(_post(gateway, own_format), 400)["message"]
    oversized = {**_body(), "padding": "x" * 30_000}
    assert _error(_post(gateway, oversized), 413)["code"] == "body_too_large"
    assert _error(httpx.get(f"{gateway}/v1/nothing-here", timeout=10), 404)["type"] == "not_found_error"


def test_upstream_failures_fail_closed(gateway: str, upstream: Upstream) -> None:
    assert _error(_post(gateway, {**_body(), "model": "err500"}), 502)["type"] == "upstream_error"
    limited = _post(gateway, {**_body(), "model": "err429"})
    assert _error(limited, 429)["type"] == "rate_limit_error"
    assert limited.headers["retry-after"] == "7"
    assert _error(_post(gateway, {**_body(), "model": "slow"}), 504)["code"] == "request_timeout"


def test_an_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    settings = _settings(f"http://127.0.0.1:{port}/v1", tmp_path / "gw.db", model="good")
    with served(create_app(settings)) as url:
        assert _error(_post(url, _body()), 502)["code"] == "upstream_failed"
        stream = _post(url, {**_body(), "stream": True})
        assert _error(stream, 502)["code"] == "upstream_failed"
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 503
        assert httpx.get(f"{url}/healthz", timeout=10).json() == {"status": "ok"}


def test_keys_once_one_exists_every_request_needs_one(gateway: str, upstream: Upstream, tmp_path: Path) -> None:
    assert _post(gateway, _body()).status_code == 200  # no key exists yet: open
    keys = GatewayKeys(tmp_path / "gw.db")
    secret = keys.create(["support"], label="test")
    assert _error(_post(gateway, _body()), 401)["type"] == "authentication_error"
    assert _error(_post(gateway, _body(), {"authorization": "Bearer clk_wrong"}), 401)["code"] == "invalid_api_key"
    bearer = {"authorization": f"Bearer {secret}"}
    assert _error(_post(gateway, _body(surface="kiosk"), bearer), 403)["code"] == "surface_not_allowed"
    assert _post(gateway, _body(), bearer).status_code == 200
    assert _error(httpx.get(f"{gateway}/v1/models", timeout=10), 401)["type"] == "authentication_error"
    # the upstream's key is the gateway's own: the caller's key never goes upstream, the upstream's never comes back
    assert set(upstream.authorizations) == {f"Bearer {UPSTREAM_SECRET}"}
    response = _post(gateway, _body(), bearer)
    assert UPSTREAM_SECRET not in response.text and UPSTREAM_SECRET not in str(response.headers)
    keys.revoke(keys.entries()[0].key_id)
    assert _error(_post(gateway, _body(), bearer), 401)["code"] == "invalid_api_key"


def test_models_and_health(gateway: str) -> None:
    listed = _client(gateway).models.list()
    assert [m.id for m in listed.data] == ["good"]
    ready = httpx.get(f"{gateway}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["checks"] == {"store": "ok", "upstream": "ok"}


def test_a_client_that_disconnects_cancels_the_upstream_stream(gateway: str, upstream: Upstream) -> None:
    import time

    body = {
        "model": "slowstream",
        "messages": QUESTION,
        "stream": True,
        "citelock": {"chunks": CHUNKS, "surface": "live"},
    }
    with httpx.stream("POST", f"{gateway}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        for n, _ in enumerate(response.iter_lines()):
            if n >= 2:
                break
    deadline = time.monotonic() + 10
    while not upstream.disconnects and time.monotonic() < deadline:
        time.sleep(0.1)
    assert upstream.disconnects, "the upstream stream was not closed when the client went away"
    total = -(-len(json.dumps({"claims": [GOOD_CLAIM]})) // 6)
    assert upstream.disconnects[0] < total - 1  # closed well before it finished


def test_node_fetch_gets_the_same_answer(gateway: str) -> None:
    import shutil
    import subprocess

    node = shutil.which("node")
    assert node is not None, "node is needed for the TypeScript/fetch test"
    script = Path(__file__).with_name("fetch_client.mjs")
    env = {**os.environ, "GATEWAY_URL": gateway, "CHUNKS": json.dumps(CHUNKS)}
    done = subprocess.run([node, str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["plain"]["status"] == 200 and result["plain"]["decision"] == "pass"
    assert result["plain"]["citelock_decision"] == "pass"
    assert result["blocked"]["status"] == 400 and result["blocked"]["type"] == BLOCKED_TYPE
    assert result["stream"]["done"] is True and result["stream"]["decision"] == "pass"
    assert result["stream"]["text"] == GOOD_CLAIM["text"]
    assert result["badjson"]["status"] == 400 and result["badjson"]["has_error"] is True


def test_a_surface_that_allows_it_passes_a_request_without_chunks_through(gateway: str, upstream: Upstream) -> None:
    plain = {"model": "good", "messages": QUESTION, "citelock": {"surface": "chat"}}
    response = _post(gateway, plain)
    assert response.status_code == 200 and response.headers["x-citelock-decision"] == "passthrough"
    assert "citelock" not in response.json()  # not guarded, and not dressed up as guarded
    assert "grammar" not in upstream.seen[-1] and upstream.seen[-1]["messages"] == QUESTION
    streamed = _post(gateway, {**plain, "stream": True})
    assert streamed.headers["x-citelock-decision"] == "passthrough"
    assert streamed.text.rstrip().endswith("data: [DONE]")
    # any other surface refuses a request without chunks
    assert "citelock.chunks is missing" in _error(_post(gateway, {**plain, "citelock": {}}), 400)["message"]


def test_an_unexpected_failure_is_a_json_500_that_names_no_internals(tmp_path: Path) -> None:
    from citelock.gateway._door import Doors

    class Broken(Doors):
        async def answer(self, request: Any, timeout_s: float | None = None) -> Any:
            raise RuntimeError("secret internal state /etc/passwd")

    settings = _settings("http://127.0.0.1:9/v1", tmp_path / "gw.db", model="good")
    with served(create_app(settings, doors=Broken(settings))) as url:
        error = _error(_post(url, _body()), 500)
        assert error["type"] == "server_error" and "RuntimeError" in error["message"]
        assert "secret internal state" not in error["message"]
        assert _error(httpx.get(f"{url}/v1/chat/completions", timeout=10), 405)["type"] == "invalid_request_error"


def test_a_timed_out_request_leaves_its_timeout_record_and_never_its_result(gateway: str, tmp_path: Path) -> None:
    import time

    response = _post(gateway, {**_body(), "model": "slow"})  # the upstream answers after 5 s; the limit is 2 s
    assert _error(response, 504)["code"] == "request_timeout"
    request_id = response.headers["x-citelock-request-id"]
    db = tmp_path / "gw.db"
    assert PromptLog(db).get(request_id).request_id == request_id  # the prompt, as it was sent
    stored = ResultStore(db).for_request(request_id)
    assert stored is not None and stored.decision == "block"
    cut = [f for f in stored.report.findings if f.reason.value == "ANSWER_TRUNCATED"]
    assert len(cut) == 1 and "time limit of 2 s" in cut[0].detail
    entries = [entry for entry, _ in ReviewQueue(db).items() if entry.request_id == request_id]
    assert [e.reason.value for e in entries] == ["ANSWER_TRUNCATED"]  # queued with it, in the same transaction
    time.sleep(3.5)  # past the upstream's late answer: nothing more is written for this request
    assert len(ResultStore(db)) == 1
    assert ResultStore(db).for_request(request_id) == stored


def test_a_deadline_ends_a_request_once_as_claimed_or_expired() -> None:
    from citelock.gateway._deadline import Deadline

    claimed = Deadline(1.0)
    assert claimed.claim() and not claimed.expire() and not claimed.expired  # a claimed result is answered
    expired = Deadline(1.0)
    assert expired.expire() and expired.expired and not expired.claim()  # an expired request's result is not
