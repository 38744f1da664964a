"""The citation schema as a pydantic model (for engines and SDKs that take a model class, such as instructor).

``chunk_id`` is a ``Literal`` of this prompt's ids; for the ``sentence`` policy the citation is a union of one
model per chunk, discriminated by ``chunk_id``, whose ``span`` is a ``Literal`` of that chunk's sentences; for
``substring`` a validator checks that the span is verbatim in the chosen chunk. For ``quote`` a claim has one
citation (a ``chunk_id``, no span) and a validator checks that the claim text, without its lead-in, is verbatim
in that chunk; for ``quote_sentence`` a claim is a union of one model per chunk whose ``text`` is a ``Literal``
of that chunk's sentences. ``claims`` may be empty: the abstention.
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, model_validator

from citelock.constraint._grammar import quote_body
from citelock.text._normalize import normalize

if TYPE_CHECKING:
    from citelock.constraint._schema import CitationSchema

__all__ = ["build_model"]

_CONFIG = ConfigDict(extra="forbid", frozen=True)


def _literal(values: tuple[str, ...]) -> Any:
    return Literal.__getitem__(values)


def _model(name: str, **fields: Any) -> Any:
    return create_model(name, __config__=_CONFIG, **fields)


def build_model(schema: CitationSchema) -> type[BaseModel]:
    """Build the answer model for ``schema`` (``CitedAnswer`` with ``claims[].citations[]``)."""
    opts = schema.options
    if schema.policy in ("quote", "quote_sentence"):
        return _answer_model(_quote_claim(schema), opts.max_claims)
    span_type: Any = Annotated[str, StringConstraints(min_length=1, max_length=opts.max_span_chars, pattern=r"\S")]
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

        def _verbatim(model: Any) -> Any:
            body = bodies.get(model.chunk_id, "")
            if model.span not in body or normalize(model.span) not in body:
                raise ValueError(f"span {model.span[:60]!r} is not verbatim in chunk {model.chunk_id!r}")
            return model

        citation = _model(
            "Citation",
            __validators__=cast(Any, {"verbatim": model_validator(mode="after")(_verbatim)}),
            chunk_id=(_literal(tuple(bodies)), ...),
            span=(span_type, ...),
        )
    else:
        citation = _model("Citation", chunk_id=(_literal(schema.ids), ...), span=(span_type, ...))
    claim = _model(
        "Claim",
        text=(Annotated[str, StringConstraints(min_length=1, max_length=opts.max_text_chars)], ...),
        citations=(Annotated[list[citation], Field(min_length=1, max_length=opts.max_citations)], ...),
    )
    return _answer_model(claim, opts.max_claims)


def _answer_model(claim: Any, most: int) -> type[BaseModel]:
    return cast(
        "type[BaseModel]",
        _model("CitedAnswer", claims=(Annotated[list[claim], Field(min_length=0, max_length=most)], ...)),
    )


def _source(name: str, ids: tuple[str, ...]) -> Any:
    source = _model(name, chunk_id=(_literal(ids), ...))
    return Annotated[list[source], Field(min_length=1, max_length=1)]  # type: ignore[valid-type]


def _quote_claim(schema: CitationSchema) -> Any:
    """``quote_sentence``: a union of per-chunk claim models; ``quote``: one claim model with a verbatim check."""
    if schema.policy == "quote_sentence":
        members = [
            _model(f"Claim_{n}", text=(_literal(spans), ...), citations=(_source(f"Source_{n}", (chunk_id,)), ...))
            for n, (chunk_id, spans) in enumerate(schema.sentences.items())
        ]
        return reduce(operator.or_, members)
    bodies = schema.bodies
    most = schema.options.max_text_chars

    def _verbatim(model: Any) -> Any:
        quoted = quote_body(model.text)
        body = bodies.get(model.citations[0].chunk_id, "")
        if len(quoted) > most:
            raise ValueError(f"a {len(quoted)}-character quote, over max_text_chars={most}")
        if quoted not in body or normalize(quoted) not in body:
            raise ValueError(f"claim text {quoted[:60]!r} is not verbatim in chunk {model.citations[0].chunk_id!r}")
        return model

    return _model(
        "Claim",
        __validators__=cast(Any, {"verbatim": model_validator(mode="after")(_verbatim)}),
        text=(Annotated[str, StringConstraints(min_length=1, pattern=r"\S")], ...),
        citations=(_source("Source", tuple(bodies)), ...),
    )
