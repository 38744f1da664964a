"""A guarded stream as server-sent ``chat.completion.chunk`` events, in the shape every OpenAI SDK reads.

Only what the surface's show policy allows becomes content: under ``immediately`` a claim's text as it is
generated (``claim.delta``); under ``after_checks`` / ``after_judge`` a claim's text once it passed
(``claim.shown``), so nothing that later fails is ever on the caller's screen. Every other step is a chunk
with an empty delta and a ``citelock`` field naming the event (``citation.closed``, ``claim.checked``, ``claim.judged``,
``claim.withheld``, ``claim.retracted`` with its reasons and action, ``claim.diverged``): a retraction tells
the caller to take a shown claim down. The last chunk carries ``finish_reason`` and the verdict (the
:class:`~citelock.GuardedAnswer` record as ``citelock``), then ``data: [DONE]``. A blocked answer on an
``on_block="error"`` surface ends with one error chunk instead (OpenAI's envelope, ``type: citelock_blocked``,
plus the ``citelock`` record); on a ``refuse`` surface with the refusal text and ``finish_reason:
content_filter``. A failure mid-stream ends with an error chunk in the same envelope.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from citelock.gateway._envelope import blocked_error, failure, guarded_record
from citelock.gateway._settings import GatewaySurface
from citelock.pipeline import GuardedAnswer

__all__ = ["sse_chunks"]

_CONTENT_EVENTS = ("claim.delta", "claim.shown")
_QUIET = ("citation.opened", "citation.delta")  # a citation's raw tokens; ``citation.closed`` carries it whole


def _data(payload: Any) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


class _Chunks:
    """Builds the chunks of one stream (one id, one model, one creation time)."""

    def __init__(self, completion_id: str, model: str) -> None:
        self.id = completion_id
        self.model = model
        self.created = int(time.time())

    def chunk(self, delta: dict[str, Any], finish: str | None = None, citelock: Any = None) -> bytes:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if citelock is not None:
            payload["citelock"] = citelock
        return _data(payload)


def _content(event: Any, started: set[int]) -> str:
    """The text an event adds to what the caller shows (claims separated by one space)."""
    index = event.claim_index
    text = event.delta if event.type == "claim.delta" else event.claim.text
    if index in started:
        return str(text)
    started.add(index)
    return (" " if started - {index} else "") + str(text)


def _finish(answer: GuardedAnswer, surface: GatewaySurface, chunks: _Chunks) -> list[bytes]:
    if answer.served:
        return [chunks.chunk({}, "stop", guarded_record(answer)), b"data: [DONE]\n\n"]
    if surface.on_block == "refuse":
        retract = {"event": "answer.refused", "reasons": sorted({f.reason.value for f in answer.findings})}
        return [
            chunks.chunk({}, None, retract),
            chunks.chunk({"content": surface.refusal}, "content_filter", guarded_record(answer)),
            b"data: [DONE]\n\n",
        ]
    return [_data(blocked_error(answer, surface.name).body())]


async def sse_chunks(
    events: AsyncIterator[Any], surface: GatewaySurface, completion_id: str, model: str, request_id: str | None
) -> AsyncIterator[bytes]:
    """The SSE body of a guarded stream (``events``: citelock's stream events, the last ``done``)."""
    chunks = _Chunks(completion_id, model)
    started: set[int] = set()
    yield chunks.chunk({"role": "assistant", "content": ""})
    try:
        async for event in events:
            if event.type == "done":
                for piece in _finish(event.answer, surface, chunks):
                    yield piece
                return
            if event.type in _QUIET:
                continue
            if event.type in _CONTENT_EVENTS:
                yield chunks.chunk({"content": _content(event, started)})
            else:
                yield chunks.chunk({}, None, {"event": event.type, **event.model_dump(mode="json", exclude={"type"})})
    except Exception as exc:  # fail closed: the stream ends with an error chunk, never a traceback
        yield _data(failure(exc, request_id).body())
