"""Stream guarded answers from a web handler: a Starlette ``StreamingResponse`` of newline-delimited JSON.

Only what the surface allows reaches the browser: on this high-stakes surface a claim is sent after its free
checks, its support judge and the answer-level checks (relevance) passed (``claim.shown``), a failing one is
announced as withheld, and the last line is the guard's decision with the rendered answer. A claim already sent
that the final result refuses (a surface that shows claims earlier, a stream that fails or is cut) is
``claim.retracted``: the page takes it down. A client that disconnects cancels generation; the claims
checked so far are persisted with an ``ANSWER_TRUNCATED`` finding.

    uvicorn examples.stream_starlette:app --host 127.0.0.1 --port 8000   # the bundled local model
    python examples/stream_starlette.py --fake                             # one request, scripted backend
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from citelock import Citelock, FakeBackend, Guard, SurfacePolicy

LEGAL = Guard(SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim"))
client = Citelock(guard=LEGAL)  # the bundled model, loaded on the first request


def line(event: Any) -> str:
    """One NDJSON line per event a reader may see."""
    if event.type == "claim.shown":
        return json.dumps({"type": event.type, "claim_index": event.claim_index, "claim": event.claim.text}) + "\n"
    if event.type in ("claim.withheld", "claim.retracted"):
        fields = {"type": event.type, "claim_index": event.claim_index, "reasons": [r.value for r in event.reasons]}
        if event.type == "claim.retracted":
            fields["action"] = event.action  # "retract": take it down; "mark": show it marked unverified
        return json.dumps(fields) + "\n"
    if event.type == "done":
        answer = event.answer
        return json.dumps({"type": "done", "decision": answer.decision, "rendered": answer.rendered}) + "\n"
    return ""  # deltas and check events stay on the server


async def ask(request: Request) -> StreamingResponse:
    """POST {"question": ..., "chunks": [{"id": ..., "text": ...}]} -> NDJSON of verified claims."""
    body = await request.json()

    async def lines() -> AsyncIterator[str]:
        async for event in request.app.state.client.astream(body["question"], body["chunks"]):
            if text := line(event):
                yield text

    return StreamingResponse(lines(), media_type="application/x-ndjson")


app = Starlette(routes=[Route("/ask", ask, methods=["POST"])])
app.state.client = client


if __name__ == "__main__" and "--fake" in sys.argv:
    from starlette.testclient import TestClient

    scripted = {
        "claims": [
            {"text": "The bridge spans 880 meters.", "citations": [{"chunk_id": "c-1", "span": "spans 880 meters"}]},
            {"text": "It opened in 1931.", "citations": [{"chunk_id": "c-1", "span": "opened in 1932"}]},
        ]
    }
    app.state.client = Citelock(FakeBackend([scripted]), guard=LEGAL)
    chunks = [{"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."}]
    with TestClient(app) as http:
        reply = http.post("/ask", json={"question": "How long is the bridge?", "chunks": chunks})
        print(reply.text, end="")
