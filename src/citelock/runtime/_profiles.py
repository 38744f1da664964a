"""Server capability profiles, as data: how each kind of OpenAI-compatible server takes a schema, and its limits.

A :class:`ServerProfile` says, per server kind, the ways a citation schema can travel in a chat-completions
request (:class:`Delivery`, strongest first), which schema keywords the server rejects or cannot enforce (they
are removed before sending and checked after the fact), and the limits its constraint engine has. Adding a
server is adding a profile, not a code path.

Sources of the numbers:

- ``openai``: the Structured Outputs guide, "Supported schemas": at most 5,000 object properties, 10 levels of
  nesting, 1,000 enum values, 120,000 characters of property names + definition names + enum and const values,
  and a string enum with more than 250 values may total at most 15,000 characters. ``minLength``/``maxLength``
  are not in the supported subset.
- ``llama-cpp-python``: measured on ``llama-cpp-python[server]`` 0.3.x: ``response_format`` ``json_schema`` is
  rejected with HTTP 500; ``json_object`` + ``schema`` and a forced tool call are enforced by a grammar; a schema
  its converter cannot translate (an unanchored ``pattern``, ``not``, ``if``...) silently becomes "any JSON".
  The enum limits here are our choice (grammar size), not a documented number.
- ``llama.cpp``: the C++ ``llama-server`` takes ``json_schema`` and ``json_object`` + ``schema`` through the
  same converter, with the same pattern rule.
- ``vllm``: guided decoding takes ``json_schema`` (``strict`` accepted) and named tool calls.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from citelock.constraint._schema import BackendLimits
from citelock.errors import UsageError

__all__ = [
    "PROFILES",
    "Delivery",
    "Output",
    "ServerProfile",
    "get_profile",
]

SCHEMA_SLOT = "$citelock_schema"
"""Placeholder in a delivery's request template, replaced by the schema as sent."""
NAME_SLOT = "$citelock_name"
"""Placeholder replaced by the schema's name (a function or response-format name)."""

Output = Literal["content", "tool_arguments"]


@dataclass(frozen=True)
class Delivery:
    """One way a schema travels in a chat-completions request.

    Attributes:
        name: A label recorded on every generation (``json_schema_strict``, ``tool_call``, ``json_object_schema``).
        request: Request fields to merge into the call, with :data:`SCHEMA_SLOT` and :data:`NAME_SLOT` where the
            schema and its name go.
        output: Where the constrained JSON comes back: the message ``content`` or the forced tool call's
            ``arguments``.
    """

    name: str
    request: Mapping[str, Any]
    output: Output

    def render(self, schema: Mapping[str, Any], name: str) -> dict[str, Any]:
        """The request fields with the schema and name filled in (a fresh deep copy)."""

        def fill(node: Any) -> Any:
            if node == SCHEMA_SLOT:
                return copy.deepcopy(dict(schema))
            if node == NAME_SLOT:
                return name
            if isinstance(node, Mapping):
                return {key: fill(value) for key, value in node.items()}
            if isinstance(node, list | tuple):
                return [fill(value) for value in node]
            return node

        out = fill(self.request)
        assert isinstance(out, dict)
        return out


JSON_SCHEMA_STRICT = Delivery(
    name="json_schema_strict",
    request={
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": NAME_SLOT, "strict": True, "schema": SCHEMA_SLOT},
        }
    },
    output="content",
)
TOOL_CALL = Delivery(
    name="tool_call",
    request={
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": NAME_SLOT,
                    "description": "Give the answer as claims, each citing the sources that support it.",
                    "parameters": SCHEMA_SLOT,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": NAME_SLOT}},
    },
    output="tool_arguments",
)
TOOL_CALL_STRICT = Delivery(
    name="tool_call_strict",
    request={
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": NAME_SLOT,
                    "description": "Give the answer as claims, each citing the sources that support it.",
                    "strict": True,
                    "parameters": SCHEMA_SLOT,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": NAME_SLOT}},
    },
    output="tool_arguments",
)
JSON_OBJECT_SCHEMA = Delivery(
    name="json_object_schema",
    request={"response_format": {"type": "json_object", "schema": SCHEMA_SLOT}},
    output="content",
)


@dataclass(frozen=True)
class ServerProfile:
    """What one kind of OpenAI-compatible server can enforce, and how to ask for it.

    Attributes:
        kind: The server kind (``openai``, ``vllm``, ``llama-cpp-python``, ``llama.cpp``).
        deliveries: Ways to send the schema, strongest first; the backend uses the first unless told otherwise.
        limits: The constraint engine's limits (checked before sending; the span policy is downgraded to fit).
        drop_keywords: Schema keywords the server rejects or cannot enforce: removed before sending, recorded as
            unenforced, and checked after the fact.
        anchored_patterns_only: The server's converter needs ``pattern`` anchored with ``^...$`` (otherwise the
            whole schema silently becomes "any JSON"): unanchored patterns are removed and recorded.
        max_tokens_field: The request field that bounds generation (OpenAI: ``max_completion_tokens``).
        string_chars: A regex character class the server's grammar should allow in free strings. When set, each
            free string's ``minLength``/``maxLength``/``pattern`` is sent as one anchored pattern
            ``^CLASS{min,max}$`` (llama.cpp's plain string rule admits raw control characters, which makes
            invalid JSON; its converter honours anchored patterns). Recorded as a rewrite.
        notes: What was measured or documented about this server, for humans.
    """

    kind: str
    deliveries: tuple[Delivery, ...]
    limits: BackendLimits
    drop_keywords: frozenset[str] = frozenset()
    anchored_patterns_only: bool = False
    max_tokens_field: str = "max_tokens"
    string_chars: str | None = None
    notes: str = ""

    def delivery(self, name: str | None = None) -> Delivery:
        """The delivery called ``name`` (the strongest one when None).

        Raises:
            UsageError: this profile has no delivery of that name.
        """
        if name is None:
            return self.deliveries[0]
        for delivery in self.deliveries:
            if delivery.name == name:
                return delivery
        raise UsageError(
            f"server kind {self.kind!r} has no delivery {name!r}; it has {[d.name for d in self.deliveries]}"
        )

    def with_limits(self, **changes: Any) -> ServerProfile:
        """A copy with some :class:`BackendLimits` fields changed (e.g. a smaller ``max_enum_values``)."""
        return replace(self, limits=replace(self.limits, **changes))

    def adapt(self, schema: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The schema as this server can take it, and what was removed (``path: keyword=value`` each).

        Removed constraints are not enforced by the server; the backend checks them after the fact.
        """
        removed: list[str] = []

        def walk(node: Any, path: str) -> Any:
            if isinstance(node, Mapping):
                node = self._rewrite_string(node, path, removed)
                out: dict[str, Any] = {}
                for key, value in node.items():
                    if key in self.drop_keywords:
                        removed.append(f"{path or '/'}: {key}={json.dumps(value, ensure_ascii=False)}")
                        continue
                    if key == "pattern" and self.anchored_patterns_only and not _anchored(value):
                        removed.append(f"{path or '/'}: pattern={json.dumps(value)} (not anchored)")
                        continue
                    out[key] = walk(value, f"{path}/{key}")
                return out
            if isinstance(node, list):
                return [walk(value, f"{path}/{n}") for n, value in enumerate(node)]
            return node

        adapted = walk(schema, "")
        assert isinstance(adapted, dict)
        return adapted, tuple(removed)

    def _rewrite_string(self, node: Mapping[str, Any], path: str, removed: list[str]) -> Mapping[str, Any]:
        if self.string_chars is None or node.get("type") != "string" or "enum" in node or "const" in node:
            return node
        bounds = {k: node[k] for k in ("minLength", "maxLength", "pattern") if k in node}
        low = int(node.get("minLength", 0))
        high = node.get("maxLength")
        pattern = f"^{self.string_chars}{{{low},{'' if high is None else int(high)}}}$"
        rest = {k: v for k, v in node.items() if k not in bounds}
        described = ", ".join(f"{k}={json.dumps(v)}" for k, v in bounds.items()) or "no bounds"
        removed.append(f"{path or '/'}: {described} sent as pattern={json.dumps(pattern)}")
        return {**rest, "pattern": pattern}


def _anchored(pattern: Any) -> bool:
    return isinstance(pattern, str) and pattern.startswith("^") and pattern.endswith("$")


_JSON_SAFE_CHARS = r'[^\x00-\x1f"\\]'
"""No control characters, quotes or backslashes: every string the grammar allows is valid JSON as written."""

_GRAMMAR_LIMITS = BackendLimits(
    policies=("quote_sentence", "sentence", "id"),
    max_enum_values=1_000,
    max_enum_chars=60_000,
    max_nesting=10,
    json_schema=True,
)

PROFILES: dict[str, ServerProfile] = {
    "openai": ServerProfile(
        kind="openai",
        deliveries=(JSON_SCHEMA_STRICT, TOOL_CALL_STRICT),
        limits=BackendLimits(
            policies=("quote_sentence", "sentence", "id"),
            max_enum_values=1_000,
            max_enum_chars=120_000,
            max_nesting=10,
            max_properties=5_000,
            large_enum_values=250,
            large_enum_chars=15_000,
            max_schema_chars=120_000,
            json_schema=True,
        ),
        drop_keywords=frozenset({"minLength", "maxLength", "$schema"}),
        max_tokens_field="max_completion_tokens",
        notes="Structured Outputs strict mode; limits from OpenAI's 'Supported schemas' section.",
    ),
    "vllm": ServerProfile(
        kind="vllm",
        deliveries=(JSON_SCHEMA_STRICT, TOOL_CALL),
        limits=_GRAMMAR_LIMITS,
        notes="Guided decoding (xgrammar/guidance) for json_schema and named tool calls.",
    ),
    "llama.cpp": ServerProfile(
        kind="llama.cpp",
        deliveries=(JSON_SCHEMA_STRICT, JSON_OBJECT_SCHEMA, TOOL_CALL),
        limits=_GRAMMAR_LIMITS,
        anchored_patterns_only=True,
        string_chars=_JSON_SAFE_CHARS,
        notes="llama-server: JSON Schema converted to a GBNF grammar; patterns must be anchored.",
    ),
    "llama-cpp-python": ServerProfile(
        kind="llama-cpp-python",
        deliveries=(JSON_OBJECT_SCHEMA, TOOL_CALL),
        limits=_GRAMMAR_LIMITS,
        anchored_patterns_only=True,
        string_chars=_JSON_SAFE_CHARS,
        notes=(
            "Measured: json_schema rejected with HTTP 500; json_object+schema and forced tool calls are "
            "enforced; an unconvertible schema silently becomes any JSON."
        ),
    ),
}


def get_profile(kind: str | ServerProfile) -> ServerProfile:
    """The profile for a server kind (or ``kind`` itself when it already is a profile).

    Raises:
        UsageError: an unknown kind (the message lists the known ones).
    """
    if isinstance(kind, ServerProfile):
        return kind
    try:
        return PROFILES[kind]
    except KeyError:
        raise UsageError(f"unknown server kind {kind!r}; expected one of {sorted(PROFILES)}") from None
