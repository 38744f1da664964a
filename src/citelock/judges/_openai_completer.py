"""The LLM judge over any OpenAI-compatible server (OpenAI, vLLM, SGLang, llama.cpp, llama-cpp-python).

The three-word answer is constrained the strongest way the server takes a schema, chosen by the same
:class:`~citelock.backends.ServerProfile` the citation backend uses, over the same
:class:`~citelock.runtime._transport.OpenAITransport`: ``{"verdict": "yes" | "partial" | "no"}``
as a strict ``json_schema``, a forced tool call, or llama.cpp's ``json_object`` + ``schema``. Nothing is taken
on trust: an output that is not exactly that object comes back unchanged, and :class:`~citelock.judges.LLMJudge`
then raises :class:`~citelock.judges.JudgeOutputError` with it.
"""

from __future__ import annotations

import json
from typing import Any

from citelock.errors import UsageError
from citelock.runtime import OpenAITransport, ServerProfile, TransportUser, output_text

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


class OpenAICompleter(TransportUser):
    """A :class:`~citelock.judges.TextCompleter` over an OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: The server's ``/v1`` URL; None means OpenAI itself (needs ``OPENAI_API_KEY``).
        model: Model name; None asks the server for its first listed model.
        api_key: API key; a local ``base_url`` needs none.
        server: Server kind (``openai``, ``llama-cpp-python``, ``llama.cpp``, ``vllm``, ``sglang``) or a
            ServerProfile; None picks ``openai`` without a base_url, else builds requests as for
            ``llama-cpp-python`` and labels the server (errors, :attr:`provider`) as
            :attr:`~citelock.backends.OpenAIBackend.provider` says.
        delivery: How the verdict schema travels (a delivery name of the profile); None: its strongest.
        timeout: Seconds per request.

    Raises:
        MissingExtraError: the ``openai`` extra is not installed.
        UsageError: no API key for OpenAI itself, an unknown server kind or delivery.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        server: str | ServerProfile | None = None,
        delivery: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        transport = OpenAITransport.connect(
            base_url=base_url, api_key=api_key, model=model, server=server, timeout=timeout
        )
        self._setup(transport, delivery)

    def _setup(self, transport: OpenAITransport, delivery: str | None) -> None:
        if transport.is_async:
            raise UsageError("the judge is synchronous: pass an openai.OpenAI client, not AsyncOpenAI")
        self.transport = transport
        self.delivery = transport.profile.delivery(delivery)
        self.last_request: dict[str, Any] = {}

    @classmethod
    def from_client(
        cls,
        client: Any,
        *,
        server: str | ServerProfile | None = None,
        model: str | None = None,
        delivery: str | None = None,
    ) -> OpenAICompleter:
        """A completer over your own ``openai.OpenAI`` client, used as is.

        Args:
            client: The client (its base URL, key, timeout, retries and HTTP client are kept).
            server: A server kind or :class:`~citelock.backends.ServerProfile`; None as
                :meth:`~citelock.backends.OpenAIBackend.from_client`.
            model: Model name; None asks the server for its first listed model.
            delivery: How the verdict schema travels; None: the profile's strongest.

        Raises:
            UsageError: not an ``openai.OpenAI`` client, an unknown server kind or delivery.
        """
        return cls._over_client(client, server=server, model=model, delivery=delivery)

    @property
    def model_id(self) -> str:
        """``<profile kind>:<model>``, part of the judge's version (a cached verdict never crosses models).

        The profile the verdict requests are built from, not the server's label (:attr:`provider`): the label
        of an unnamed server depends on whether its model listing was read, and a version must not, or the
        same judge would stop matching the calibrations and cached verdicts pinned to it.
        """
        return f"{self.profile.kind}:{self.model}"

    def request_for(
        self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int
    ) -> dict[str, Any]:
        """The chat-completions payload for one judge call (the messages exactly as given)."""
        extra = _JSON_OVERHEAD_TOKENS if choices and max_tokens >= 1 else 0
        payload = self.transport.payload(messages, max_tokens=max_tokens + extra, temperature=0.0)
        if choices:
            payload.update(self.delivery.render(verdict_schema(choices), _FIELD))
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
        _, choice = self.transport.complete(payload)
        text, _ = output_text(choice.message, self.delivery.output if choices else None)
        if not choices:
            return text
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(parsed, dict) and set(parsed) == {_FIELD} and parsed[_FIELD] in choices:
            return str(parsed[_FIELD])
        return text
