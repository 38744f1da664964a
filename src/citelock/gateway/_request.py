"""The gateway's request: a standard chat completion body plus a ``citelock`` object, checked and translated.

``{"model", "messages", ..., "stream", "citelock": {"chunks": [...], "surface": "NAME", "policy": "quote"}}``
(an OpenAI SDK sends the ``citelock`` object with ``extra_body``). :func:`read_request` checks the body against
the limits (size first, before it is parsed), resolves the surface, and returns a :class:`GatewayRequest`: the
caller's own arguments for the upstream call (messages exactly as given; fields the SDK has no keyword for
travel in ``extra_body``, as the caller sent them), this turn's chunks, the span policy and the stream flag.
Nothing here decides anything about the answer: the request is :func:`citelock.wrap`'s, or for the bundled
model :meth:`citelock.Citelock.aanswer`'s (question = the last user message, history = the turns before it, the
caller's leading system messages after the prompt template's own system prompt).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, get_args

from citelock.constraint import SpanPolicy
from citelock.gateway._envelope import GatewayError
from citelock.gateway._settings import GatewayLimits, GatewaySettings, GatewaySurface
from citelock.prompt import PromptTemplate
from citelock.runtime._transport import CREATE_FIELDS

__all__ = ["GatewayRequest", "local_turns", "read_request", "with_system"]

# Top-level keywords of the SDK's create that wrap checks itself (refused constraints of the caller's own, n).
_CHECKED = frozenset({"n", "stream_options", "functions", "function_call", "extra_body"})
_CITELOCK_FIELDS = ("chunks", "surface", "policy")


@dataclass(frozen=True)
class GatewayRequest:
    """One checked request.

    Attributes:
        surface: The surface it runs on.
        arguments: The caller's ``chat.completions.create`` keywords, minus ``stream`` and ``citelock``.
        chunks: This turn's chunks, as sent (None: a pass-through request on a surface that allows it).
        policy: The span policy requested.
        stream: Whether the caller asked for server-sent events.
    """

    surface: GatewaySurface
    arguments: dict[str, Any]
    chunks: list[dict[str, Any]] | None
    policy: SpanPolicy
    stream: bool

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """This turn's chunks (a guarded request always has them; a pass-through one has none)."""
        if self.chunks is None:
            raise GatewayError(400, "this request has no citelock.chunks to guard an answer with")
        return self.chunks

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The caller's messages, exactly as given."""
        messages: list[dict[str, Any]] = self.arguments["messages"]
        return messages


def _bad(message: str, param: str | None = None, code: str | None = None) -> GatewayError:
    return GatewayError(400, message, param=param, code=code)


def _parse(raw: bytes, limits: GatewayLimits) -> dict[str, Any]:
    if len(raw) > limits.max_body_bytes:
        raise GatewayError(
            413,
            f"the request body is {len(raw)} bytes; this gateway takes at most {limits.max_body_bytes}",
            code="body_too_large",
        )
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(f"the request body is not valid JSON ({exc}); expected a chat completion object") from None
    if not isinstance(body, dict):
        raise _bad(f"the request body is a JSON {type(body).__name__}; expected a chat completion object")
    return body


def _surface(given: Any, settings: GatewaySettings) -> GatewaySurface:
    name = given if given is not None else settings.default_surface
    if name is None:
        raise _bad(
            f"citelock.surface is missing and this gateway has no default surface; name one of "
            f"{sorted(settings.surfaces)}",
            "citelock.surface",
        )
    if not isinstance(name, str) or name not in settings.surfaces:
        raise _bad(
            f"citelock.surface {name!r} is not a surface of this gateway; expected one of {sorted(settings.surfaces)}",
            "citelock.surface",
            "surface_not_found",
        )
    return settings.surfaces[name]


def _chunks(given: Any, limits: GatewayLimits) -> list[dict[str, Any]]:
    if given is None:
        raise _bad(
            "citelock.chunks is missing: pass the passages retrieved for this turn, "
            '"citelock": {"chunks": [{"id": ..., "text": ...}]} (extra_body in an OpenAI SDK); this surface does '
            "not pass requests without chunks through",
            "citelock.chunks",
        )
    if not isinstance(given, list) or not given:
        raise _bad("citelock.chunks must be a non-empty list of {'id', 'text'} objects", "citelock.chunks")
    if len(given) > limits.max_chunks:
        raise _bad(
            f"citelock.chunks holds {len(given)} chunks; this gateway takes at most {limits.max_chunks}",
            "citelock.chunks",
            "too_many_chunks",
        )
    for index, chunk in enumerate(given):
        if (
            not isinstance(chunk, dict)
            or not isinstance(chunk.get("id"), str)
            or not isinstance(chunk.get("text"), str)
        ):
            raise _bad(
                f"citelock.chunks[{index}] must be an object with a string 'id' and a string 'text'",
                f"citelock.chunks[{index}]",
            )
        if len(chunk["text"]) > limits.max_chunk_chars:
            raise _bad(
                f"citelock.chunks[{index}] is {len(chunk['text'])} characters; this gateway takes chunks of at "
                f"most {limits.max_chunk_chars}",
                f"citelock.chunks[{index}].text",
                "chunk_too_large",
            )
    return given


def _policy(given: Any, surface: GatewaySurface) -> SpanPolicy:
    if given is None:
        return surface.span_policy
    allowed = get_args(SpanPolicy)
    if given not in allowed:
        raise _bad(f"citelock.policy must be one of {list(allowed)}, got {given!r}", "citelock.policy")
    policy: SpanPolicy = given
    return policy


def read_request(raw: bytes, settings: GatewaySettings) -> GatewayRequest:
    """Check a request body and translate it (nothing is sent or logged here).

    Raises:
        GatewayError: 413 for a body over the size limit; 400 for anything else malformed (not JSON, no
            messages, an unknown surface, no or too many chunks, a chunk too large, an unknown policy).
    """
    limits = settings.limits
    body = _parse(raw, limits)
    ours = body.pop("citelock", None)
    if ours is None:
        ours = {}
    if not isinstance(ours, dict):
        raise _bad(f"citelock must be an object {{chunks, surface, policy}}, got a {type(ours).__name__}", "citelock")
    unknown = sorted(set(ours) - set(_CITELOCK_FIELDS))
    if unknown:
        raise _bad(f"citelock has unknown field(s) {unknown}; expected some of {list(_CITELOCK_FIELDS)}", "citelock")
    surface = _surface(ours.get("surface"), settings)
    stream = body.pop("stream", False)
    if not isinstance(stream, bool):
        raise _bad(f"stream must be true or false, got {stream!r}", "stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages must be a non-empty list of {'role', 'content'} objects", "messages")
    given = ours.get("chunks")
    chunks = None if given is None and surface.passthrough else _chunks(given, limits)
    policy = _policy(ours.get("policy"), surface)
    arguments = {k: v for k, v in body.items() if k in CREATE_FIELDS or k in _CHECKED}
    extra = {k: v for k, v in body.items() if k not in arguments}
    if extra:
        own = arguments.get("extra_body")
        if own is not None and not isinstance(own, Mapping):
            raise _bad("extra_body must be an object", "extra_body")
        arguments["extra_body"] = {**(own or {}), **extra}
    return GatewayRequest(surface, arguments, chunks, policy, stream)


def local_turns(request: GatewayRequest) -> tuple[str, list[dict[str, str]], str | None]:
    """The question, the earlier turns and the caller's system prompt of a request for the bundled model.

    The caller's leading system messages are kept: joined (a blank line between), they are sent after the prompt
    template's own system prompt, in the same system message (see :func:`with_system`).

    Raises:
        GatewayError: 400 for a system message after the conversation began, a non-text message, or a last
            message that is not the user's.
    """
    turns: list[dict[str, str]] = []
    system: list[str] = []
    for index, message in enumerate(request.messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise _bad(f"messages[{index}] must be an object with a string 'content'", f"messages[{index}]")
        role = message.get("role")
        if role == "system":
            if turns:
                raise _bad(
                    f"messages[{index}] is a system message after the conversation began; with the bundled model "
                    "the system prompt comes first (run the gateway with --upstream to send messages exactly as "
                    "given)",
                    f"messages[{index}]",
                )
            system.append(message["content"])
            continue
        if role not in ("user", "assistant"):
            raise _bad(
                f"messages[{index}] has role {role!r}; expected 'system', 'user' or 'assistant'", f"messages[{index}]"
            )
        turns.append({"role": role, "content": message["content"]})
    if not turns or turns[-1]["role"] != "user":
        raise _bad("the last message must be the user's question", f"messages[{len(request.messages) - 1}]")
    return turns[-1]["content"], turns[:-1], "\n\n".join(system) if system else None


def with_system(template: PromptTemplate, system: str) -> PromptTemplate:
    """``template`` with the caller's system prompt after its own (recorded as version ``V+caller-system``)."""
    return replace(template, system=f"{template.system}\n\n{system}", version=f"{template.version}+caller-system")
