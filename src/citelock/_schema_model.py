"""The citation schema as a pydantic model (for engines and SDKs that take a model class, such as instructor).

``chunk_id`` is a ``Literal`` of this prompt's ids; for the ``sentence`` policy the citation is a union of one
model per chunk, discriminated by ``chunk_id``, whose ``span`` is a ``Literal`` of that chunk's sentences; for
``substring`` a validator checks that the span is verbatim in the chosen chunk.
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, model_validator

from citelock._normalize import normalize

if TYPE_CHECKING:
    from citelock._schema import CitationSchema

__all__ = ["build_model"]

_CONFIG = ConfigDict(extra="forbid", frozen=True)


def _literal(values: tuple[str, ...]) -> Any:
    return Literal.__getitem__(values)


def _model(name: str, **fields: Any) -> Any:
    return create_model(name, __config__=_CONFIG, **fields)


def build_model(schema: CitationSchema) -> type[BaseModel]:
    """Build the answer model for ``schema`` (``CitedAnswer`` with ``claims[].citations[]``)."""
    opts = schema.options
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
    return cast(
        "type[BaseModel]",
        _model(
            "CitedAnswer",
            claims=(Annotated[list[claim], Field(min_length=1, max_length=opts.max_claims)], ...),  # type: ignore[valid-type]
        ),
    )
