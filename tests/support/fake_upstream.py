"""A fake OpenAI-compatible upstream: a real HTTP server on 127.0.0.1 whose reply the request's ``model`` names.

It ignores every constraint (so what the guard does with a bad answer is visible):

- ``good``: one claim citing ``kb-1`` with a verbatim span (passes the free checks);
- ``fabricate``: one good claim, then one citing ``kb-999``, an id that was never in the prompt;
- ``err500`` / ``err429`` (with ``Retry-After: 7``): that HTTP status;
- ``slow``: ``good`` after 5 s; ``slowstream``: ``good``, streamed at 0.2 s a chunk.

``stream: true`` gets the reply as SSE, ``STEP`` characters a chunk. Every request body is kept in ``seen``
(its Authorization header in ``authorizations``);
a streamed request whose client went away is counted in ``disconnects``. ``latency_s`` delays every reply;
``replies`` adds (or replaces) replies by model name.

:func:`fake_upstream` runs it in a thread of the calling process (what the tests inspect); :func:`upstream_process`
runs it in a process of its own, sharing no GIL with the caller (the gateway benchmark's fixed-latency upstream:
there ``seen`` and the other lists stay empty in the caller).
"""

from __future__ import annotations

import http.server
import json
import multiprocessing
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CHUNKS = [
    {"id": "kb-1", "text": "The ferry leaves Arden at 7:15 every weekday. It returns at 18:40."},
    {"id": "kb-2", "text": "Bicycles travel free on the ferry. Dogs must be on a lead."},
]
GOOD_CLAIM = {
    "text": "The ferry leaves at 7:15.",
    "citations": [{"chunk_id": "kb-1", "span": "The ferry leaves Arden at 7:15 every weekday."}],
}
FABRICATED_CLAIM = {
    "text": "The ferry is free for cars.",
    "citations": [{"chunk_id": "kb-999", "span": "Cars travel free."}],
}
REPLIES = {
    "good": json.dumps({"claims": [GOOD_CLAIM]}),
    "slow": json.dumps({"claims": [GOOD_CLAIM]}),
    "fabricate": json.dumps({"claims": [GOOD_CLAIM, FABRICATED_CLAIM]}),
}
STEP = 6


@dataclass
class Upstream:
    """The running server."""

    url: str
    seen: list[dict[str, Any]] = field(default_factory=list)
    disconnects: list[int] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    latency_s: float = 0.0
    replies: dict[str, str] = field(default_factory=lambda: dict(REPLIES))
    keep: bool = True  # False: ``seen`` and ``authorizations`` stay empty (a benchmark's long run)


def _handler(state: Upstream) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._json(200, {"object": "list", "data": [{"id": "good", "object": "model", "owned_by": "fake"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if state.keep:
                state.seen.append(body)
                state.authorizations.append(self.headers.get("authorization"))
            model = body.get("model", "good")
            if state.latency_s:
                time.sleep(state.latency_s)
            if model == "slow":
                time.sleep(5)
            if model == "err500":
                self._json(500, {"error": {"message": "boom", "type": "server_error"}})
                return
            if model == "err429":
                self._json(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after": "7"})
                return
            text = state.replies.get(model, state.replies["good"])
            if body.get("stream"):
                self._stream(text, model)
                return
            self._json(
                200,
                {
                    "id": "cmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
                },
            )

        def _stream(self, text: str, model: str) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            pieces = [text[n : n + STEP] for n in range(0, len(text), STEP)]
            for n, piece in enumerate(pieces):
                last = n == len(pieces) - 1
                choice = {"index": 0, "delta": {"content": piece}, "finish_reason": "stop" if last else None}
                chunk = {
                    "id": "s-1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [choice],
                }
                try:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    if model == "slowstream":
                        time.sleep(0.2)
                except (BrokenPipeError, ConnectionResetError):
                    state.disconnects.append(n)
                    return
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def _server(
    latency_s: float, replies: Mapping[str, str] | None, keep: bool = True
) -> tuple[http.server.ThreadingHTTPServer, Upstream]:
    state = Upstream(url="", latency_s=latency_s, replies={**REPLIES, **(replies or {})}, keep=keep)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    httpd.request_queue_size = 256  # a benchmark's 32 concurrent connections are all accepted
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    return httpd, state


@contextmanager
def fake_upstream(latency_s: float = 0.0, replies: Mapping[str, str] | None = None) -> Iterator[Upstream]:
    """Run the fake upstream on a free port of 127.0.0.1, in a thread, for the duration of the block."""
    httpd, state = _server(latency_s, replies)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _serve_forever(latency_s: float, replies: Mapping[str, str] | None, urls: Any) -> None:
    httpd, state = _server(latency_s, replies, keep=False)
    urls.put(state.url)
    httpd.serve_forever()


@contextmanager
def upstream_process(latency_s: float = 0.0, replies: Mapping[str, str] | None = None) -> Iterator[str]:
    """Run the fake upstream in a process of its own for the duration of the block; yield its ``/v1`` URL."""
    urls: Any = multiprocessing.Queue()
    process = multiprocessing.Process(target=_serve_forever, args=(latency_s, replies, urls), daemon=True)
    process.start()
    try:
        yield str(urls.get(timeout=30))
    finally:
        process.terminate()
        process.join(10)
