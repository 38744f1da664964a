"""The OpenAI-compatible backend: any ``base_url`` (OpenAI, vLLM, llama.cpp, llama-cpp-python), via ``openai``.

The per-request citation schema is sent the strongest way the server supports, chosen by its
:class:`~citelock.backends.ServerProfile` (data): ``response_format`` ``json_schema`` with ``strict: true``, a
forced tool call, or llama.cpp's ``json_object`` + ``schema``. Keywords the server cannot take are removed
before sending and recorded; limits are checked before sending (:meth:`OpenAIBackend.fit` downgrades the span
policy to fit).

Nothing the server says about enforcement is trusted: every output is verified after the fact against the
schema as sent *and* against the full citation constraint. A constraint that did not hold is reported on the
generation (``enforced=False`` and a ``constraint not enforced`` note) and the answer then goes through the
guard like any unconstrained answer; it is never passed off as enforced.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from citelock.backends._protocol import Generation
from citelock.constraint._schema import BackendLimits, CitationSchema, SchemaOptions, SpanPolicy
from citelock.errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendRefusalError,
    BackendTimeoutError,
    MissingExtraError,
    SchemaRejectedError,
    TruncatedOutputError,
    UsageError,
    retryable_status,
)
from citelock.records import Context, PromptRecord
from citelock.runtime._profiles import Delivery, ServerProfile, fit_for_profile, get_profile

__all__ = ["OpenAIBackend", "OpenAIGeneration", "chat_completion", "map_openai_error", "verify_output"]

SCHEMA_NAME = "cited_answer"
_SCHEMA_WORDS = ("response_format", "json_schema", "schema", "tool", "grammar", "strict")


@dataclass(frozen=True)
class OpenAIGeneration(Generation):
    """A :class:`Generation` with what was sent and what verification found.

    Attributes:
        server_kind: The profile's server kind.
        delivery: How the schema was sent (``json_schema_strict``, ``tool_call``, ``json_object_schema``...).
        request: The request payload exactly as passed to the client (messages, schema, parameters).
        response_id: The server's completion id.
        provider_request_id: The ``x-request-id`` header, when the server sends one.
        removed: Schema constraints not sent because the server cannot take them (checked after the fact).
        violations: What the output broke: of the schema as sent (the server did not enforce it) or of the
            removed constraints. Empty when the output conforms.
    """

    server_kind: str = ""
    delivery: str = ""
    request: Mapping[str, Any] = field(default_factory=dict)
    response_id: str | None = None
    provider_request_id: str | None = None
    removed: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()


def verify_output(
    text: str, sent_schema: Mapping[str, Any] | None, schema: CitationSchema
) -> tuple[list[str], list[str]]:
    """Check an output against the schema as sent and against the full citation constraint.

    Returns:
        ``(sent, full)``: violations of the schema as sent (the server did not enforce what it was given) and
        violations of the citation constraint (including constraints that were not sent). Both empty when the
        output conforms.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"the output is not JSON ({exc.msg} at character {exc.pos}): {text[:80]!r}"
        return [problem], [problem]
    sent: list[str] = []
    if sent_schema is not None:
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

        validator = Draft202012Validator(dict(sent_schema))
        for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))[:5]:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            sent.append(f"{where}: {error.message[:160]}")
    return sent, schema.violations(data)


def map_openai_error(exc: Exception, *, provider: str, citelock_request_id: str | None = None) -> BackendError:
    """Turn an ``openai`` SDK exception into a typed :class:`BackendError` (status, request id, retryable)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return BackendTimeoutError(
            f"the request timed out: {exc}",
            provider=provider,
            citelock_request_id=citelock_request_id,
            retryable=True,
        )
    if isinstance(exc, openai.APIConnectionError):
        return BackendConnectionError(
            f"could not reach the server: {exc}",
            provider=provider,
            citelock_request_id=citelock_request_id,
            retryable=True,
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _error_message(exc)
        kind: type[BackendHTTPError] = BackendHTTPError
        retryable = retryable_status(status)
        if status in (400, 422, 500) and any(word in message.lower() for word in _SCHEMA_WORDS):
            kind, retryable = SchemaRejectedError, False
        return kind(
            f"the server answered HTTP {status}: {message[:400]}",
            provider=provider,
            status=status,
            request_id=exc.request_id,
            citelock_request_id=citelock_request_id,
            retryable=retryable,
        )
    return BackendError(
        f"the openai client failed: {type(exc).__name__}: {exc}",
        provider=provider,
        citelock_request_id=citelock_request_id,
    )


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", exc))


class OpenAIBackend:
    """A backend for any OpenAI-compatible chat-completions server.

    Example:
        >>> backend = OpenAIBackend(base_url="http://127.0.0.1:8080/v1", server="llama-cpp-python")  # doctest: +SKIP
        >>> citelock.answer("When did it open?", chunks, backend=backend, policy="sentence")  # doctest: +SKIP

    Args:
        base_url: The server's base URL (``.../v1``); OpenAI's when None.
        api_key: API key; ``$OPENAI_API_KEY``, or a placeholder for a local ``base_url``.
        model: Model name; the server's first listed model when None.
        server: A server kind (``openai``, ``vllm``, ``llama.cpp``, ``llama-cpp-python``) or a
            :class:`ServerProfile`. Defaults to ``openai`` without ``base_url``, else ``llama-cpp-python``.
        delivery: Name of the profile's delivery to use (default: its strongest).
        adapt: Remove keywords the server cannot take before sending (recorded). False sends the schema as
            built, to test what a server does with a schema it cannot enforce.
        temperature: Sampling temperature.
        seed: Sampling seed, if the server takes one.
        timeout: Seconds before a request times out.
        max_retries: Retries inside the ``openai`` client (0: every failure surfaces as a typed error).
        client: A ready ``openai.OpenAI`` client (overrides ``base_url``, ``api_key``, ``timeout``).
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        server: str | ServerProfile | None = None,
        delivery: str | None = None,
        adapt: bool = True,
        temperature: float = 0.0,
        seed: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 0,
        client: Any = None,
    ) -> None:
        self.profile = get_profile(
            server if server is not None else ("openai" if base_url is None else "llama-cpp-python")
        )
        self._delivery = self.profile.delivery(delivery)
        self.adapt = adapt
        self.temperature = temperature
        self.seed = seed
        self._model = model
        if client is None:
            client = self._make_client(base_url, api_key, timeout, max_retries)
        self.client = client

    @staticmethod
    def _make_client(base_url: str | None, api_key: str | None, timeout: float, max_retries: int) -> Any:
        try:
            import openai
        except ImportError:
            raise MissingExtraError("openai", "openai") from None
        key = api_key or os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url else None)
        if key is None:
            raise UsageError("no API key: pass api_key=, set OPENAI_API_KEY, or give a local base_url")
        return openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)

    @property
    def limits(self) -> BackendLimits:
        """The server's limits (from its profile)."""
        return self.profile.limits

    @limits.setter
    def limits(self, value: BackendLimits) -> None:
        self.profile = replace(self.profile, limits=value)

    @property
    def delivery(self) -> Delivery:
        """How the schema is sent."""
        return self._delivery

    @property
    def model(self) -> str:
        """The model name (asked of the server once when not given)."""
        if self._model is None:
            try:
                listed = self.client.models.list()
            except Exception as exc:
                raise map_openai_error(exc, provider=self.profile.kind) from exc
            ids = [m.id for m in listed.data]
            if not ids:
                raise UsageError("the server lists no models; pass model=")
            self._model = ids[0]
        return self._model

    def fit(self, context: Context, policy: SpanPolicy, options: SchemaOptions | None = None) -> CitationSchema:
        """The strongest schema at or below ``policy`` this server takes (every profile rule applied)."""
        return fit_for_profile(context, policy, self.profile, options)

    def request_for(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> tuple[dict[str, Any], dict[str, Any] | None, tuple[str, ...]]:
        """The request payload for ``record``: ``(payload, schema as sent, constraints removed)``.

        Raises:
            UsageError: the schema breaks a limit of this server (fit it with :meth:`fit` first).
        """
        if max_tokens < 1:
            raise UsageError(f"max_tokens must be positive, got {max_tokens}")
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in record.messages],
            self.profile.max_tokens_field: max_tokens,
            "temperature": self.temperature,
        }
        if self.seed is not None:
            payload["seed"] = self.seed
        if schema is None:
            return payload, None, ()
        problem = self.profile.violation(schema)
        if problem is not None:
            raise UsageError(
                f"not sent: {problem}; fit the schema to this server first (OpenAIBackend.fit downgrades it)"
            )
        adapted, removed = self.profile.adapt(schema.json_schema)
        sent = adapted if self.adapt else dict(schema.json_schema)
        payload.update(self._delivery.render(sent, SCHEMA_NAME))
        return payload, sent, removed

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> OpenAIGeneration:
        """Send ``record`` (messages exactly as logged) with ``schema``; verify the output after the fact.

        Raises:
            BackendTimeoutError, BackendConnectionError, BackendHTTPError, SchemaRejectedError: the call failed.
            BackendRefusalError: the model refused.
            TruncatedOutputError: the output stopped at ``max_tokens`` before the JSON was complete.
        """
        payload, sent, removed = self.request_for(record, schema, max_tokens=max_tokens)
        kind = self.profile.kind
        started = time.perf_counter()
        response, choice = chat_completion(self.client, payload, provider=kind, citelock_request_id=record.request_id)
        latency = time.perf_counter() - started
        provider_request_id = getattr(response, "_request_id", None)
        message = choice.message
        notes: list[str] = []
        text, where = _output_text(message, self._delivery if schema is not None else None)
        if where:
            notes.append(where)
        usage = response.usage
        completion_tokens = usage.completion_tokens if usage is not None else None
        finish = choice.finish_reason
        if schema is not None and _truncated(text, finish, completion_tokens, max_tokens):
            raise TruncatedOutputError(
                f"the output stopped at max_tokens={max_tokens} before the JSON was complete "
                f"({completion_tokens} tokens; got {text[-60:]!r}); raise max_tokens or lower the SchemaOptions bounds",
                partial=text,
                max_tokens=max_tokens,
                provider=kind,
                request_id=provider_request_id or response.id,
                citelock_request_id=record.request_id,
            )
        enforced = False
        violations: tuple[str, ...] = ()
        if schema is not None:
            notes.append(f"delivery: {self._delivery.name} ({kind})")
            if removed:
                verb = "sent anyway (the server cannot enforce them)" if not self.adapt else "not sent"
                notes.append(f"{verb}, checked after: " + "; ".join(removed))
            sent_problems, full_problems = verify_output(text, sent, schema)
            if sent_problems:
                notes.append(
                    "constraint not enforced: the output breaks the schema as sent (the server did not enforce "
                    "it): " + "; ".join(sent_problems[:3])
                )
            elif full_problems:
                notes.append("constraint not enforced: the output breaks " + "; ".join(full_problems[:3]))
            violations = tuple(sent_problems or full_problems)
            enforced = not sent_problems and not full_problems
        return OpenAIGeneration(
            text=text,
            backend=self.name,
            model=str(payload["model"]),
            enforced=enforced,
            prompt_tokens=usage.prompt_tokens if usage is not None else None,
            completion_tokens=completion_tokens,
            latency_s=latency,
            finish_reason=finish,
            notes=tuple(notes),
            server_kind=kind,
            delivery=self._delivery.name if schema is not None else "none",
            request=payload,
            response_id=response.id,
            provider_request_id=provider_request_id,
            removed=removed,
            violations=violations,
        )


def chat_completion(
    client: Any, payload: Mapping[str, Any], *, provider: str, citelock_request_id: str | None = None
) -> tuple[Any, Any]:
    """Send one chat-completions request; return ``(response, first choice)``.

    Raises:
        BackendTimeoutError, BackendConnectionError, BackendHTTPError, SchemaRejectedError: the call failed.
        BackendError: the server returned no choices (retryable).
        BackendRefusalError: the model refused.
    """
    try:
        response = client.chat.completions.create(**_split_extra(payload))
    except Exception as exc:
        if isinstance(exc, BackendError):
            raise
        raise map_openai_error(exc, provider=provider, citelock_request_id=citelock_request_id) from exc
    request_id = getattr(response, "_request_id", None) or response.id
    if not response.choices:
        raise BackendError(
            "the server returned no choices",
            provider=provider,
            request_id=request_id,
            citelock_request_id=citelock_request_id,
            retryable=True,
        )
    choice = response.choices[0]
    refusal = getattr(choice.message, "refusal", None)
    if refusal:
        raise BackendRefusalError(
            f"the model refused: {refusal[:200]}",
            refusal=refusal,
            provider=provider,
            request_id=request_id,
            citelock_request_id=citelock_request_id,
        )
    return response, choice


_CREATE_FIELDS = frozenset(
    {
        "messages",
        "model",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "seed",
        "response_format",
        "tools",
        "tool_choice",
        "top_p",
        "stop",
    }
)


def _split_extra(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Standard fields as keyword arguments; anything else (server extensions) in ``extra_body``."""
    known = {k: v for k, v in payload.items() if k in _CREATE_FIELDS}
    extra = {k: v for k, v in payload.items() if k not in _CREATE_FIELDS}
    if extra:
        known["extra_body"] = extra
    return known


def _output_text(message: Any, delivery: Delivery | None) -> tuple[str, str | None]:
    """The output JSON (content or forced tool-call arguments) and a note when it came from the other place."""
    calls = getattr(message, "tool_calls", None) or []
    content = message.content or ""
    if delivery is not None and delivery.output == "tool_arguments":
        if calls:
            return calls[0].function.arguments or "", None
        return content, "no tool call came back: the message content was used"
    if not content and calls:
        return calls[0].function.arguments or "", "the output came back as a tool call"
    return content, None


def _truncated(text: str, finish: str | None, completion_tokens: int | None, max_tokens: int) -> bool:
    hit_limit = finish == "length" or (completion_tokens is not None and completion_tokens >= max_tokens)
    if not hit_limit:
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return True
    return False
