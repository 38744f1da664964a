"""The one answer-model builder: the schema's shape as pydantic, with the hooks a sending backend needs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError

import citelock
from citelock.constraint import SchemaOptions, build_model, build_schema

CHUNKS = [
    {"id": "s1", "text": "The plant opened in 1998. It makes glass bottles."},
    {"id": "s2", "text": "The plant employs 40 people."},
]
OPTS = SchemaOptions(max_claims=2, max_citations=1, max_text_chars=40, max_span_chars=30)


def _cited(span: str, chunk_id: str = "s1") -> dict[str, Any]:
    return {"claims": [{"text": "It opened then.", "citations": [{"chunk_id": chunk_id, "span": span}]}]}


def test_without_hooks_it_is_the_schemas_own_model() -> None:
    schema = build_schema(citelock.assemble("When?", CHUNKS), "id", OPTS)
    assert json.dumps(build_model(schema).model_json_schema()) == json.dumps(schema.model.model_json_schema())


def test_string_schema_rewrites_what_is_shown_and_validation_keeps_the_bounds() -> None:
    schema = build_schema(citelock.assemble("When?", CHUNKS), "id", OPTS)
    shown: list[dict[str, Any]] = []

    def rewrite(string: dict[str, Any]) -> dict[str, Any]:
        shown.append(dict(string))
        return {"type": "string", "description": "rewritten"}

    model = build_model(schema, string_schema=rewrite)
    text = json.dumps(model.model_json_schema())
    assert "rewritten" in text and "maxLength" not in text
    assert {"type": "string", "minLength": 1, "maxLength": 30, "pattern": r"\S"} in shown  # the span
    assert {"type": "string", "minLength": 1, "maxLength": 40} in shown  # the claim text
    model.model_validate(_cited("The plant opened in 1998."))
    with pytest.raises(ValidationError, match="at most 30 characters"):
        model.model_validate(_cited("The plant opened in 1998. It makes glass bottles."))
    with pytest.raises(ValidationError, match="should match pattern"):
        model.model_validate(_cited("   "))


def test_validator_runs_on_every_parsed_answer_and_its_reason_is_the_error() -> None:
    schema = build_schema(citelock.assemble("When?", CHUNKS), "sentence", OPTS)
    seen: list[Any] = []

    def only_s2(answer: Any) -> None:
        seen.append(answer)
        if any(c.chunk_id != "s2" for claim in answer.claims for c in claim.citations):
            raise ValueError("cite s2 only")

    model = build_model(schema, validator=only_s2)
    model.model_validate(_cited("The plant employs 40 people.", "s2"))
    with pytest.raises(ValidationError, match="cite s2 only"):
        model.model_validate(_cited("The plant opened in 1998."))
    with pytest.raises(ValidationError):  # the model's own checks run first: the validator never sees this one
        model.model_validate(_cited("Not a sentence of s1."))
    assert len(seen) == 2 and model.model_validate({"claims": []}).claims == []  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Shape:
    """Any object with the shape's fields will do: the builder knows no CitationSchema."""

    policy: str
    ids: tuple[str, ...]
    options: SchemaOptions = OPTS
    sentences: dict[str, tuple[str, ...]] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)


def test_the_builder_reads_a_shape_not_a_citation_schema() -> None:
    model = build_model(Shape("quote", ("a",), bodies={"a": "the sky is blue today"}))
    model.model_validate({"claims": [{"text": "the sky is blue", "citations": [{"chunk_id": "a"}]}]})
    with pytest.raises(ValidationError, match="not verbatim in chunk 'a'"):
        model.model_validate({"claims": [{"text": "the sky is green", "citations": [{"chunk_id": "a"}]}]})
