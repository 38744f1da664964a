"""The citation schema as a pydantic model (for engines and SDKs that take a model class, such as instructor).

``chunk_id`` is a ``Literal`` of this prompt's ids; for the ``sentence`` policy the citation is a union of one
model per chunk, discriminated by ``chunk_id``, whose ``span`` is a ``Literal`` of that chunk's sentences; for
``substring`` a validator checks that the span is verbatim in the chosen chunk. For ``quote`` a claim has one
citation (a ``chunk_id``, no span) and a validator checks that the claim text, without its lead-in, is verbatim
in that chunk; for ``quote_sentence`` a claim is a union of one model per chunk whose ``text`` is a ``Literal``
of that chunk's sentences. ``claims`` may be empty (the abstention) unless ``min_claims`` is 1 or more.

This is the one model builder. A caller that sends the model's JSON Schema to a server adapts the free strings
(``string_schema``: e.g. the server profile's rewrite of a bounded string into an anchored pattern) and may add
a validator over the whole answer (``validator``: e.g. the instructor backend's check of every citation against
the logged prompt, which then makes instructor reask).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from functools import reduce
from typing import Annotated, Any, Literal, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, create_model, model_validator

from citelock.constraint._grammar import quote_body
from citelock.text import normalize

__all__ = ["AnswerShape", "AnswerValidator", "ShapeBounds", "StringSchema", "build_model"]

_CONFIG = ConfigDict(extra="forbid", frozen=True)

StringSchema = Callable[[dict[str, Any]], Mapping[str, Any]]
"""Rewrites the JSON Schema of a free string (``{"type": "string", "minLength": ...}``) into what is sent."""
AnswerValidator = Callable[[Any], None]
"""Checks a parsed answer model; raises ``ValueError`` (with the reason the model is shown) to reject it."""


class ShapeBounds(Protocol):
    """The size bounds the builder reads (:class:`~citelock.SchemaOptions` has them)."""

    @property
    def max_claims(self) -> int:
        """Most claims."""
        ...

    @property
    def min_claims(self) -> int:
        """Fewest claims (0 allows the abstention)."""
        ...

    @property
    def max_citations(self) -> int:
        """Most citations per claim."""
        ...

    @property
    def max_text_chars(self) -> int:
        """Longest claim text."""
        ...

    @property
    def max_span_chars(self) -> int:
        """Longest free span."""
        ...


class AnswerShape(Protocol):
    """What the builder reads from a citation schema (:class:`~citelock.CitationSchema` is one)."""

    @property
    def policy(self) -> str:
        """The span policy."""
        ...

    @property
    def ids(self) -> tuple[str, ...]:
        """The chunk ids a citation may name."""
        ...

    @property
    def sentences(self) -> Mapping[str, tuple[str, ...]]:
        """Per chunk id, its citable sentences (``sentence`` and ``quote_sentence``)."""
        ...

    @property
    def bodies(self) -> Mapping[str, str]:
        """Per chunk id, the text a quote or substring is verbatim in (``substring`` and ``quote``)."""
        ...

    @property
    def options(self) -> ShapeBounds:
        """The size bounds."""
        ...


def _literal(values: tuple[str, ...]) -> Any:
    return Literal.__getitem__(values)


def _model(name: str, **fields: Any) -> Any:
    return create_model(name, __config__=_CONFIG, **fields)


def _validated(name: str, check: Callable[[Any], None], **fields: Any) -> Any:
    def run(model: Any) -> Any:
        check(model)
        return model

    return _model(name, __validators__=cast(Any, {"check": model_validator(mode="after")(run)}), **fields)


def build_model(
    schema: AnswerShape,
    *,
    string_schema: StringSchema | None = None,
    validator: AnswerValidator | None = None,
) -> type[BaseModel]:
    """Build the answer model for ``schema`` (``CitedAnswer`` with ``claims[].citations[]``).

    Args:
        schema: The citation schema (its policy, ids, sentences, bodies and bounds).
        string_schema: Rewrites the JSON Schema of every free string (claim texts, free spans) into what the
            receiving server can enforce; validation keeps the full bounds. None: pydantic's own schema.
        validator: Runs on every parsed answer after the model's own checks; raises ``ValueError`` to reject.

    Returns:
        A frozen pydantic model class that rejects any answer the schema does not allow.
    """

    def text(*, most: int | None, pattern: str | None = None) -> Any:
        constraints = StringConstraints(min_length=1, max_length=most, pattern=pattern)
        if string_schema is None:
            return Annotated[str, constraints]
        shown: dict[str, Any] = {"type": "string", "minLength": 1}
        if most is not None:
            shown["maxLength"] = most
        if pattern is not None:
            shown["pattern"] = pattern
        return Annotated[str, constraints, WithJsonSchema(dict(string_schema(shown)))]

    opts = schema.options
    if schema.policy in ("quote", "quote_sentence"):
        return _answer_model(_quote_claim(schema, text), opts, validator)
    span_type = text(most=opts.max_span_chars, pattern=r"\S")
    citation: Any
    if schema.policy == "sentence":
        members = [
            _model(
                f"Citation_{n}",
                chunk_id=(_literal((chunk_id,)), ...),
                span=(_literal(spans), ...),
            )
            for n, (chunk_id, spans) in enumerate(schema.sentences.items())
        ]
        union = reduce(operator.or_, members)
        citation = members[0] if len(members) == 1 else Annotated[union, Field(discriminator="chunk_id")]
    elif schema.policy == "substring":
        bodies = schema.bodies

        def _verbatim(model: Any) -> None:
            body = bodies.get(model.chunk_id, "")
            if model.span not in body or normalize(model.span) not in body:
                raise ValueError(f"span {model.span[:60]!r} is not verbatim in chunk {model.chunk_id!r}")

        citation = _validated("Citation", _verbatim, chunk_id=(_literal(tuple(bodies)), ...), span=(span_type, ...))
    else:
        citation = _model("Citation", chunk_id=(_literal(schema.ids), ...), span=(span_type, ...))
    claim = _model(
        "Claim",
        text=(text(most=opts.max_text_chars), ...),
        citations=(Annotated[list[citation], Field(min_length=1, max_length=opts.max_citations)], ...),
    )
    return _answer_model(claim, opts, validator)


def _answer_model(claim: Any, bounds: ShapeBounds, validator: AnswerValidator | None) -> type[BaseModel]:
    claims = (Annotated[list[claim], Field(min_length=bounds.min_claims, max_length=bounds.max_claims)], ...)
    model = (
        _model("CitedAnswer", claims=claims)
        if validator is None
        else _validated("CitedAnswer", validator, claims=claims)
    )
    return cast("type[BaseModel]", model)


def _source(name: str, ids: tuple[str, ...]) -> Any:
    source = _model(name, chunk_id=(_literal(ids), ...))
    return Annotated[list[source], Field(min_length=1, max_length=1)]  # type: ignore[valid-type]


def _quote_claim(schema: AnswerShape, text: Callable[..., Any]) -> Any:
    """``quote_sentence``: a union of per-chunk claim models; ``quote``: one claim model with a verbatim check."""
    if schema.policy == "quote_sentence":
        members = [
            _model(f"Claim_{n}", text=(_literal(spans), ...), citations=(_source(f"Source_{n}", (chunk_id,)), ...))
            for n, (chunk_id, spans) in enumerate(schema.sentences.items())
        ]
        return reduce(operator.or_, members)
    bodies = schema.bodies
    most = schema.options.max_text_chars

    def _verbatim(model: Any) -> None:
        quoted = quote_body(model.text)
        body = bodies.get(model.citations[0].chunk_id, "")
        if len(quoted) > most:
            raise ValueError(f"a {len(quoted)}-character quote, over max_text_chars={most}")
        if quoted not in body or normalize(quoted) not in body:
            raise ValueError(f"claim text {quoted[:60]!r} is not verbatim in chunk {model.citations[0].chunk_id!r}")

    return _validated(
        "Claim",
        _verbatim,
        text=(text(most=None, pattern=r"\S"), ...),
        citations=(_source("Source", tuple(bodies)), ...),
    )
