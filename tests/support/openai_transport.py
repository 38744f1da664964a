"""A scripted OpenAI-compatible HTTP transport for unit tests (no server): canned completions, recorded requests."""

from __future__ import annotations

import json
from typing import Any

import openai

try:
    import httpx2 as httpx
except ImportError:  # older openai releases use httpx
    import httpx  # type: ignore[no-redef]

__all__ = ["Server", "completion", "httpx", "scripted_async_client", "scripted_client"]


def completion(
    content: str | None = None,
    *,
    tool_args: str | None = None,
    tool_name: str = "cited_answer",
    finish: str = "stop",
    completion_tokens: int = 20,
    refusal: str | None = None,
) -> dict[str, Any]:
    """A chat.completion response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_args is not None:
        message["tool_calls"] = [
            {"id": "call_1", "type": "function", "function": {"name": tool_name, "arguments": tool_args}}
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": completion_tokens, "total_tokens": 50 + completion_tokens},
    }


class Server:
    """A scripted HTTP server: records each request body, answers with the next scripted response.

    A response is a body, a ``(status, body, headers)`` tuple, or an exception to raise. A request without a body
    (``GET /models``) is recorded as ``{"get": path}``.
    """

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.content) if request.content else {"get": request.url.path})
        item = self.responses.pop(0)
        if isinstance(item, Exception):
            raise item
        status, body, headers = item if isinstance(item, tuple) else (200, item, {})
        return httpx.Response(status, json=body, headers=headers)


def scripted_client(server: Server) -> Any:
    """An ``openai.OpenAI`` client whose every request goes to ``server``."""
    return openai.OpenAI(
        base_url="http://test/v1",
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=httpx.MockTransport(server)),
    )


def scripted_async_client(server: Server) -> Any:
    """An ``openai.AsyncOpenAI`` client whose every request goes to ``server``."""
    return openai.AsyncOpenAI(
        base_url="http://test/v1",
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(transport=httpx.MockTransport(server)),
    )
