"""The LLM judge over any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, llama-cpp-python).

The three-word answer is constrained the strongest way the server takes a schema, chosen by the same
:class:`~citelock.backends.ServerProfile` the citation backend uses: ``{"verdict": "yes" | "partial" | "no"}``
as a strict ``json_schema``, a forced tool call, or llama.cpp's ``json_object`` + ``schema``. Nothing is taken
on trust: an output that is not exactly that object comes back unchanged, and :class:`~citelock.judges.LLMJudge`
then raises :class:`~citelock.judges.JudgeOutputError` with it.
"""

from __future__ import annotations

import json
from typing import Any

from citelock.backends._openai import OpenAIBackend, _output_text, chat_completion
from citelock.errors import UsageError

__all__ = ["OpenAICompleter"]

_FIELD = "verdict"
_JSON_OVERHEAD_TOKENS = 12  # {"verdict": "partial"} and its whitespace, on common tokenizers


def verdict_schema(choices: list[str]) -> dict[str, Any]:
    """The JSON Schema of the constrained answer: one required string property, one of ``choices``."""
    return {
        "type": "object",
        "properties": {_FIELD: {"type": "string", "enum": list(choices)}},
        "required": [_FIELD],
        "additionalProperties": False,
    }


class OpenAICompleter:
    """A :class:`~citelock.judges.TextCompleter` over an OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: The server's ``/v1`` URL; None means OpenAI itself (needs ``OPENAI_API_KEY``).
        model: Model name; None asks the server for its first listed model.
        api_key: API key; a local ``base_url`` needs none.
        server: Profile kind (``openai``, ``llama-cpp-python``, ``llama.cpp``, ``vllm``) or a ServerProfile;
            None picks ``openai`` without a base_url, else ``llama-cpp-python``.
        delivery: How the verdict schema travels (a delivery name of the profile); None: its strongest.
        timeout: Seconds per request.
        client: An ``openai.OpenAI``-like client to use instead of building one.

    Raises:
        MissingExtraError: the ``openai`` extra is not installed.
        UsageError: no API key for OpenAI itself.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        server: Any = None,
        delivery: str | None = None,
        timeout: float = 60.0,
        client: Any = None,
    ) -> None:
        self._backend = OpenAIBackend(
            base_url=base_url,
            model=model,
            api_key=api_key,
            server=server,
            delivery=delivery,
            temperature=0.0,
            timeout=timeout,
            client=client,
        )
        self.last_request: dict[str, Any] = {}

    @property
    def model_id(self) -> str:
        """``<server kind>:<model>``, part of the judge's version (a cached verdict never crosses models)."""
        return f"{self._backend.profile.kind}:{self._backend.model}"

    def request_for(
        self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int
    ) -> dict[str, Any]:
        """The chat-completions payload for one judge call (the messages exactly as given)."""
        if max_tokens < 1:
            raise UsageError(f"max_tokens must be positive, got {max_tokens}")
        profile = self._backend.profile
        payload: dict[str, Any] = {
            "model": self._backend.model,
            "messages": [dict(m) for m in messages],
            "temperature": 0.0,
            profile.max_tokens_field: max_tokens,
        }
        if choices:
            payload[profile.max_tokens_field] = max_tokens + _JSON_OVERHEAD_TOKENS
            payload.update(self._backend.delivery.render(verdict_schema(choices), _FIELD))
        return payload

    def complete(self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int) -> str:
        """One greedy completion; with ``choices``, the verdict word read off the constrained JSON.

        Returns the raw output unchanged when it is not ``{"verdict": <one of choices>}`` (the server did not
        enforce the schema), so the judge reports it instead of guessing.

        Raises:
            BackendTimeoutError, BackendConnectionError, BackendHTTPError, SchemaRejectedError: the call failed.
            BackendRefusalError: the model refused.
        """
        payload = self.request_for(messages, choices=choices, max_tokens=max_tokens)
        self.last_request = payload
        _, choice = chat_completion(self._backend.client, payload, provider=self._backend.profile.kind)
        text, _ = _output_text(choice.message, self._backend.delivery if choices else None)
        if not choices:
            return text
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(parsed, dict) and set(parsed) == {_FIELD} and parsed[_FIELD] in choices:
            return str(parsed[_FIELD])
        return text
