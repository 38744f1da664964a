"""What a backend's constraint engine accepts: :class:`BackendLimits`, checked against a built schema before sending.

Every backend publishes its limits as data, not code; :func:`~citelock.constraint.fit_schema` downgrades a schema
that breaks one (:meth:`BackendLimits.violation` says which) before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from citelock.constraint._policy import GRAMMAR_DIALECTS, GRAMMAR_ONLY, POLICY_ORDER, GrammarDialect, SpanPolicy
from citelock.errors import UsageError

__all__ = ["BackendLimits", "SizedSchema"]


class _Stats(Protocol):
    @property
    def chunks(self) -> int: ...
    @property
    def enum_values(self) -> int: ...
    @property
    def enum_chars(self) -> int: ...
    @property
    def nesting(self) -> int: ...
    @property
    def properties(self) -> int: ...


class SizedSchema(Protocol):
    """What :meth:`BackendLimits.violation` reads of a schema (a :class:`~citelock.constraint.CitationSchema`)."""

    @property
    def policy(self) -> SpanPolicy: ...
    @property
    def stats(self) -> _Stats: ...
    @property
    def sentences(self) -> dict[str, tuple[str, ...]]: ...
    @property
    def json_schema(self) -> dict[str, Any]: ...
    def grammar_in(self, dialect: GrammarDialect) -> str: ...


@dataclass(frozen=True)
class BackendLimits:
    r"""What a backend's constraint engine accepts: data per backend, checked before a request is sent.

    ``None`` means "no limit". A backend that cannot constrain at all (the naive baseline) has ``policies=()``.

    Attributes:
        policies: Span policies the backend can enforce. ``quote`` and ``substring`` need a grammar engine;
            ``quote_sentence``, ``sentence`` and ``id`` need JSON Schema (``enum``, ``const``, ``anyOf``).
        max_enum_values: Most enum/const values in one schema.
        max_enum_chars: Most total characters across enum/const values.
        max_nesting: Deepest schema nesting.
        max_properties: Most object properties in one schema.
        max_grammar_chars: Largest grammar the engine compiles in reasonable time.
        max_substring_chunks: Most chunks a ``substring`` or ``quote`` grammar may offer: each chunk's quotes are one
            lexeme, and grammar engines pay per lexeme (llguidance's lexer budget runs out between 400 and 600).
        large_enum_values: A string enum with more than this many values is "large" ...
        large_enum_chars: ... and may total at most this many characters (OpenAI strict mode: 250 / 15,000).
        max_schema_chars: Most characters of property names, enum values and const values in one schema
            (OpenAI's "total string size").
        json_schema: The backend is sent :attr:`~citelock.constraint.CitationSchema.json_schema` (else the grammar).
        grammar_dialect: The dialect the grammar is sent in (``lark`` or ``gbnf``); ``max_grammar_chars`` bounds
            the grammar in that dialect.
        unsafe_literal_chars: A regex character class of characters the engine's own JSON-Schema-to-grammar
            converter mis-escapes in ``enum``/``const`` values (llama-cpp-python 0.3.x: a ``"`` breaks the
            grammar and the server exits; a ``\\`` changes the value). A JSON Schema whose values hold one is not
            sent: :func:`fit_schema` downgrades it with the reason.
    """

    policies: tuple[SpanPolicy, ...] = POLICY_ORDER
    max_enum_values: int | None = None
    max_enum_chars: int | None = None
    max_nesting: int | None = None
    max_properties: int | None = None
    max_grammar_chars: int | None = None
    max_substring_chunks: int | None = None
    large_enum_values: int | None = None
    large_enum_chars: int | None = None
    max_schema_chars: int | None = None
    json_schema: bool = False
    grammar_dialect: GrammarDialect = "lark"
    unsafe_literal_chars: str | None = None

    def __post_init__(self) -> None:
        unknown = [p for p in self.policies if p not in POLICY_ORDER]
        if unknown:
            raise UsageError(f"BackendLimits.policies: unknown span policies {unknown}; expected {POLICY_ORDER}")
        if self.grammar_dialect not in GRAMMAR_DIALECTS:
            raise UsageError(
                f"BackendLimits.grammar_dialect: unknown dialect {self.grammar_dialect!r}; expected {GRAMMAR_DIALECTS}"
            )
        if self.unsafe_literal_chars is not None:
            try:
                re.compile(self.unsafe_literal_chars)
            except re.error as exc:
                raise UsageError(f"BackendLimits.unsafe_literal_chars is not a regex: {exc}") from None

    @property
    def constrains(self) -> bool:
        """True when the backend can enforce at least one span policy."""
        return bool(self.policies)

    def violation(self, schema: SizedSchema) -> str | None:
        """Why ``schema`` exceeds these limits (the first limit broken), or None when it fits."""
        stats = schema.stats
        if schema.policy not in self.policies:
            return f"the backend cannot enforce the {schema.policy!r} policy (it enforces {list(self.policies)})"
        checks: list[tuple[str, int, int | None]] = [
            ("enum values", stats.enum_values, self.max_enum_values),
            ("total enum characters", stats.enum_chars, self.max_enum_chars),
            ("nesting levels", stats.nesting, self.max_nesting),
            ("object properties", stats.properties, self.max_properties),
        ]
        sends_grammar = not self.json_schema or schema.policy in GRAMMAR_ONLY
        if sends_grammar and self.max_grammar_chars is not None:
            checks.append(("grammar characters", len(schema.grammar_in(self.grammar_dialect)), self.max_grammar_chars))
        if schema.policy in GRAMMAR_ONLY:
            checks.append(("quotable chunks", stats.chunks, self.max_substring_chunks))
        for what, value, limit in checks:
            if limit is not None and value > limit:
                return f"{schema.policy} schema has {value:,} {what}, over the backend's limit of {limit:,}"
        if self.large_enum_values is not None and self.large_enum_chars is not None:
            for chunk_id, spans in schema.sentences.items():
                chars = sum(len(s) for s in spans)
                if len(spans) > self.large_enum_values and chars > self.large_enum_chars:
                    return (
                        f"chunk {chunk_id!r} has {len(spans)} sentences totalling {chars:,} characters; the "
                        f"backend allows at most {self.large_enum_chars:,} characters in an enum of more than "
                        f"{self.large_enum_values} values"
                    )
        if self.unsafe_literal_chars is not None and not sends_grammar:
            problem = _unsafe_literal(schema.json_schema, self.unsafe_literal_chars)
            if problem is not None:
                return f"{schema.policy} schema: {problem}, which this server's schema converter mis-escapes"
        if self.max_schema_chars is not None and schema.policy not in GRAMMAR_ONLY:
            chars = _schema_chars(schema.json_schema)
            if chars > self.max_schema_chars:
                return (
                    f"{schema.policy} schema has {chars:,} characters of names and enum/const values, over "
                    f"the backend's limit of {self.max_schema_chars:,}"
                )
        return None


def _unsafe_literal(node: Any, chars: str) -> str | None:
    """The first ``enum``/``const`` string holding a character of class ``chars``, described; None when none does."""
    pattern = re.compile(chars)

    def values(item: Any) -> list[Any]:
        out = list(item["enum"]) if isinstance(item.get("enum"), list) else []
        return out + ([item["const"]] if "const" in item else [])

    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for value in values(item):
                found = pattern.search(value) if isinstance(value, str) else None
                if found is not None:
                    return f"the value {value[:60]!r} holds {found.group()!r} (U+{ord(found.group()[0]):04X})"
            stack.extend(v for k, v in item.items() if k not in ("enum", "const"))
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _schema_chars(node: Any) -> int:
    """Characters of property names and enum/const values (OpenAI's "total string size")."""
    if isinstance(node, Mapping):
        total = 0
        props = node.get("properties")
        if isinstance(props, Mapping):
            total += sum(len(str(k)) for k in props)
        if isinstance(node.get("enum"), list):
            total += sum(len(str(v)) for v in node["enum"])
        if isinstance(node.get("const"), str):
            total += len(node["const"])
        return total + sum(_schema_chars(v) for v in node.values())
    if isinstance(node, list):
        return sum(_schema_chars(v) for v in node)
    return 0
