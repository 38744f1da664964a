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
- ``sglang``: ``response_format`` ``json_schema`` and forced tool calls (xgrammar by default).

Grammar deliveries send the citation grammar itself instead of a JSON Schema, so the ``substring`` and ``quote``
policies (spans by construction) work on servers too, and no server-side converter touches the chunk text:

- ``llama.cpp`` / ``llama-cpp-python``: the ``grammar`` field (GBNF). llama-cpp-python 0.3.x hands it to
  ``llama_sampler_init_grammar`` unchecked: a grammar that does not parse makes it add a null sampler and the
  process exits, so citelock only sends GBNF it built and escaped itself, and ``citelock serve`` refuses such a
  request instead of dying (see :mod:`citelock.runtime._server`).
- ``vllm``: ``structured_outputs: {"grammar": ...}`` (vLLM 0.10.2 and later; ``guided_grammar`` before 0.12).
  Under the default ``auto`` backend a GBNF/EBNF grammar is compiled by xgrammar (``Grammar.from_ebnf``), and the
  ``guidance`` backend converts it (llguidance ``grammar_from("grammar", ...)``). The ``lark`` delivery sends
  llguidance's own Lark (with its substring primitive: a far smaller grammar) and needs a server started with
  ``--structured-outputs-config.backend guidance``.
- ``sglang``: the ``ebnf`` field (xgrammar's EBNF, the same GBNF text; its ``llguidance`` backend reads it too).
  An invalid grammar is refused with HTTP 400 ``Invalid grammar request``.

The grammar limits are our bounds, not engine documentation: llama.cpp's were measured (``benchmarks``); the
xgrammar bound is a conservative compile-time budget. A grammar over them is downgraded before sending by
:func:`~citelock.constraint._schema.fit_schema`, with the reason.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from citelock.constraint import BackendLimits, GrammarDialect
from citelock.errors import UsageError

__all__ = [
    "GRAMMAR_SLOT",
    "PROFILES",
    "SELF_NAMES",
    "UNNAMED_KIND",
    "Delivery",
    "Output",
    "ServerProfile",
    "get_profile",
    "said_kind",
]

SCHEMA_SLOT = "$citelock_schema"
"""Placeholder in a delivery's request template, replaced by the schema as sent."""
NAME_SLOT = "$citelock_name"
"""Placeholder replaced by the schema's name (a function or response-format name)."""
GRAMMAR_SLOT = "$citelock_grammar"
"""Placeholder in a grammar delivery's request template, replaced by the grammar text."""

Output = Literal["content", "tool_arguments"]


@dataclass(frozen=True)
class Delivery:
    """One way a schema travels in a chat-completions request.

    Attributes:
        name: A label recorded on every generation (``json_schema_strict``, ``tool_call``, ``json_object_schema``,
            ``grammar``, ``ebnf``...).
        request: Request fields to merge into the call, with :data:`SCHEMA_SLOT` and :data:`NAME_SLOT` where the
            schema and its name go, or :data:`GRAMMAR_SLOT` where the grammar goes.
        output: Where the constrained JSON comes back: the message ``content`` or the forced tool call's
            ``arguments``.
        grammar: The grammar dialect sent (``gbnf`` or ``lark``); None for a JSON Schema delivery.
        limits: What the server enforces through this delivery; None: the profile's (JSON Schema) limits.
    """

    name: str
    request: Mapping[str, Any]
    output: Output
    grammar: GrammarDialect | None = None
    limits: BackendLimits | None = None

    def render(
        self, schema: Mapping[str, Any] | None = None, name: str = "", *, grammar: str | None = None
    ) -> dict[str, Any]:
        """The request fields with the schema, its name or the grammar filled in (a fresh deep copy).

        Raises:
            UsageError: a grammar delivery without ``grammar``, or a schema delivery without ``schema``.
        """
        if self.grammar is not None and grammar is None:
            raise UsageError(f"delivery {self.name!r} sends a {self.grammar} grammar; pass grammar=")
        if self.grammar is None and schema is None:
            raise UsageError(f"delivery {self.name!r} sends a JSON Schema; pass schema=")

        def fill(node: Any) -> Any:
            if node == SCHEMA_SLOT:
                return copy.deepcopy(dict(schema or {}))
            if node == NAME_SLOT:
                return name
            if node == GRAMMAR_SLOT:
                return grammar
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


def _tool_call(name: str, *, strict: bool) -> Delivery:
    """A forced call of one function whose parameters are the schema (``strict`` marks it for strict mode)."""
    function: dict[str, Any] = {
        "name": NAME_SLOT,
        "description": "Give the answer as claims, each citing the sources that support it.",
    }
    if strict:
        function["strict"] = True
    function["parameters"] = SCHEMA_SLOT
    return Delivery(
        name=name,
        request={
            "tools": [{"type": "function", "function": function}],
            "tool_choice": {"type": "function", "function": {"name": NAME_SLOT}},
        },
        output="tool_arguments",
    )


TOOL_CALL = _tool_call("tool_call", strict=False)
TOOL_CALL_STRICT = _tool_call("tool_call_strict", strict=True)
JSON_OBJECT_SCHEMA = Delivery(
    name="json_object_schema",
    request={"response_format": {"type": "json_object", "schema": SCHEMA_SLOT}},
    output="content",
)

_LLAMA_GRAMMAR_LIMITS = BackendLimits(
    policies=("quote", "quote_sentence", "substring", "sentence", "id"),
    max_grammar_chars=600_000,
    grammar_dialect="gbnf",
)
"""llama.cpp's grammar sampler on GBNF. Measured with ``benchmarks/bench_server_grammar.py`` on the bundled model
(substring tries of 27 KB to 1.5 MB): decoding costs 1.4-1.8x an unconstrained request per token throughout, and
a grammar parses in well under a second; the bound keeps the request body and the parse small. Ours, not a
documented engine limit. The GBNF trie is far bigger than llguidance's substring primitive (about 50x the
chunk's length at ``max_span_chars=60``, 200x at 160), so long contexts downgrade to ``sentence`` sooner here."""

_XGRAMMAR_LIMITS = BackendLimits(
    policies=("quote", "quote_sentence", "substring", "sentence", "id"),
    max_grammar_chars=200_000,
    grammar_dialect="gbnf",
)
"""xgrammar (SGLang's and vLLM's default engine) on the same GBNF text. A conservative compile-time budget of
ours (xgrammar compiles a grammar per request, before the first token), not a documented limit."""

_GUIDANCE_LIMITS = BackendLimits(
    policies=("quote", "quote_sentence", "substring", "sentence", "id"),
    max_grammar_chars=600_000,
    max_substring_chunks=1_000,
    grammar_dialect="lark",
)
"""llguidance, as in the local backend (``LOCAL_LIMITS``): its lexer budget runs out between 400 and 600
quotable chunks and past ~730 KB of substring grammar."""


def _grammar(name: str, request: Mapping[str, Any], dialect: GrammarDialect, limits: BackendLimits) -> Delivery:
    """A delivery that sends the citation grammar itself (in ``dialect``) where ``request`` puts it."""
    return Delivery(name=name, request=request, output="content", grammar=dialect, limits=limits)


_STRUCTURED_OUTPUTS_GRAMMAR = {"structured_outputs": {"grammar": GRAMMAR_SLOT}}
LLAMA_GRAMMAR = _grammar("grammar", {"grammar": GRAMMAR_SLOT}, "gbnf", _LLAMA_GRAMMAR_LIMITS)
VLLM_GRAMMAR = _grammar("structured_outputs_grammar", _STRUCTURED_OUTPUTS_GRAMMAR, "gbnf", _XGRAMMAR_LIMITS)
VLLM_LARK = _grammar("structured_outputs_lark", _STRUCTURED_OUTPUTS_GRAMMAR, "lark", _GUIDANCE_LIMITS)
VLLM_GUIDED_GRAMMAR = _grammar("guided_grammar", {"guided_grammar": GRAMMAR_SLOT}, "gbnf", _XGRAMMAR_LIMITS)
SGLANG_EBNF = _grammar("ebnf", {"ebnf": GRAMMAR_SLOT}, "gbnf", _XGRAMMAR_LIMITS)


@dataclass(frozen=True)
class ServerProfile:
    """What one kind of OpenAI-compatible server can enforce, and how to ask for it.

    Attributes:
        kind: The server kind (``openai``, ``vllm``, ``sglang``, ``llama-cpp-python``, ``llama.cpp``).
        deliveries: Ways to send the constraint, strongest first: grammar deliveries (where the server takes a
            grammar) before JSON Schema ones. The citation backend uses the first unless told otherwise
            (:meth:`citation_delivery`); callers that send a JSON Schema use the first schema one (:meth:`delivery`).
        limits: The JSON Schema engine's limits (checked before sending; the span policy is downgraded to fit). A
            grammar delivery has its own (:attr:`Delivery.limits`).
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
        """The delivery called ``name``; when None, the strongest one that carries a JSON Schema.

        Raises:
            UsageError: this profile has no delivery of that name.
        """
        if name is None:
            return next(d for d in self.deliveries if d.grammar is None)
        for delivery in self.deliveries:
            if delivery.name == name:
                return delivery
        raise UsageError(
            f"server kind {self.kind!r} has no delivery {name!r}; it has {[d.name for d in self.deliveries]}"
        )

    def citation_delivery(self, name: str | None = None) -> Delivery:
        """The delivery called ``name``; when None, the strongest of all (a grammar one where the server takes it).

        Raises:
            UsageError: this profile has no delivery of that name.
        """
        return self.deliveries[0] if name is None else self.delivery(name)

    def limits_for(self, delivery: Delivery) -> BackendLimits:
        """What the server enforces through ``delivery``: its own limits, else the profile's."""
        return delivery.limits if delivery.limits is not None else self.limits

    def with_limits(self, **changes: Any) -> ServerProfile:
        """A copy with some :class:`BackendLimits` fields changed, in the profile's and every delivery's limits."""
        deliveries = tuple(
            replace(d, limits=replace(d.limits, **changes)) if d.limits is not None else d for d in self.deliveries
        )
        return replace(self, limits=replace(self.limits, **changes), deliveries=deliveries)

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

_UNSAFE_FOR_OLD_CONVERTERS = r'["\\\x00-\x1f\x7f\U00010000-\U0010ffff]'
"""Characters llama.cpp's JSON-Schema-to-GBNF converters mis-escape in ``enum``/``const`` values. Measured on
llama-cpp-python 0.3.x (its Python converter escapes ``"`` but not ``\\``): a ``"`` ends the GBNF literal early,
``failed to parse grammar``, and the server process exits; a ``\\`` turns into a JSON escape (``\\n`` a newline);
a control character comes out raw (invalid JSON); an astral character is written as a surrogate pair no output
can match. llama.cpp builds before the converter escaped backslashes behave the same."""

_GRAMMAR_LIMITS = BackendLimits(
    policies=("quote_sentence", "sentence", "id"),
    max_enum_values=1_000,
    max_enum_chars=60_000,
    max_nesting=10,
    json_schema=True,
)

_LLAMA_SCHEMA_LIMITS = BackendLimits(
    policies=("quote_sentence", "sentence", "id"),
    max_enum_values=1_000,
    max_enum_chars=60_000,
    max_nesting=10,
    json_schema=True,
    unsafe_literal_chars=_UNSAFE_FOR_OLD_CONVERTERS,
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
        deliveries=(VLLM_GRAMMAR, VLLM_LARK, VLLM_GUIDED_GRAMMAR, JSON_SCHEMA_STRICT, TOOL_CALL),
        limits=_GRAMMAR_LIMITS,
        notes=(
            "structured_outputs.grammar (GBNF/EBNF: xgrammar, or guidance by conversion; Lark with the guidance "
            "backend); guided_grammar before 0.12; json_schema and named tool calls."
        ),
    ),
    "sglang": ServerProfile(
        kind="sglang",
        deliveries=(SGLANG_EBNF, JSON_SCHEMA_STRICT, TOOL_CALL),
        limits=_GRAMMAR_LIMITS,
        notes="ebnf (xgrammar's EBNF, GBNF syntax); json_schema and named tool calls; an invalid grammar is a 400.",
    ),
    "llama.cpp": ServerProfile(
        kind="llama.cpp",
        deliveries=(LLAMA_GRAMMAR, JSON_SCHEMA_STRICT, JSON_OBJECT_SCHEMA, TOOL_CALL),
        limits=_LLAMA_SCHEMA_LIMITS,
        anchored_patterns_only=True,
        string_chars=_JSON_SAFE_CHARS,
        notes="llama-server: GBNF grammar; JSON Schema converted to a GBNF grammar; patterns must be anchored.",
    ),
    "llama-cpp-python": ServerProfile(
        kind="llama-cpp-python",
        deliveries=(LLAMA_GRAMMAR, JSON_OBJECT_SCHEMA, TOOL_CALL),
        limits=_LLAMA_SCHEMA_LIMITS,
        anchored_patterns_only=True,
        string_chars=_JSON_SAFE_CHARS,
        notes=(
            "Measured: GBNF grammar enforced (an unparsable one kills an unguarded server); json_schema rejected "
            "with HTTP 500; json_object+schema and forced tool calls are enforced, but its converter mis-escapes "
            "quotes and backslashes in enum values, and an unconvertible schema silently becomes any JSON."
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


UNNAMED_KIND = "openai-compatible"
"""The label of a server whose kind was neither configured (``server=``) nor named by the server itself."""

SELF_NAMES: Mapping[str, str] = MappingProxyType({"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"})
"""``owned_by`` values a server writes on every model it lists on ``/v1/models`` when the value names the server
itself, mapped to its kind. From the servers' source: vLLM's and SGLang's ``ModelCard`` default ``owned_by`` to
``"vllm"`` and ``"sglang"``, llama.cpp's ``llama-server`` writes ``"llamacpp"``. Other values name no server:
llama-cpp-python answers ``"me"`` (as many hand-written servers do), OpenAI ``"openai"``, ``"system"`` or an
organization."""


def said_kind(owned_by: Any) -> str | None:
    """The server kind an ``owned_by`` value of a ``/v1/models`` listing names, or None when it names none."""
    return SELF_NAMES.get(owned_by) if isinstance(owned_by, str) else None
