"""The Haystack component in a real Haystack pipeline, after a fake generator component."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("haystack", reason='the haystack extra is not installed: pip install "citelock[haystack]"')

from haystack import Document, Pipeline, component
from haystack.components.builders import PromptBuilder
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from citelock import InputError
from citelock.integrations import CitelockAnswerBuilder

DOCS = [
    Document(content="Revenue grew 12% in 2023. Margins were flat in the first half."),
    Document(content="The freight clause applies to all shipments over 20 kg."),
]


@component
class FakeGenerator:
    """A generator component that replies with scripted text (the shape of every Haystack generator)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies

    @component.output_types(replies=list[str], meta=list[dict[str, Any]])
    def run(self, prompt: str) -> dict[str, Any]:
        return {"replies": list(self.replies), "meta": [{"model": "fake"} for _ in self.replies]}


def pipeline(replies: list[str]) -> Pipeline:
    pipe = Pipeline()
    template = "{% for d in documents %}[{{ loop.index }}] {{ d.content }}\n{% endfor %}Question: {{ query }}"
    pipe.add_component("prompt", PromptBuilder(template=template, required_variables=["query", "documents"]))
    pipe.add_component("llm", FakeGenerator(replies))
    pipe.add_component("answers", CitelockAnswerBuilder())
    pipe.connect("prompt.prompt", "llm.prompt")
    pipe.connect("llm.replies", "answers.replies")
    pipe.connect("llm.meta", "answers.meta")
    return pipe


def run(replies: list[str]) -> dict[str, Any]:
    query = "Did revenue grow?"
    out = pipeline(replies).run(
        {"prompt": {"query": query, "documents": DOCS}, "answers": {"query": query, "documents": DOCS}}
    )
    return dict(out["answers"])


def test_answers_and_verdicts_come_out_of_a_pipeline() -> None:
    out = run(['Revenue grew 12% [1]. It says "all shipments over 20 kg" [2].'])
    (answer,) = out["answers"]
    (verdict,) = out["verdicts"]
    assert isinstance(answer, GeneratedAnswer) and answer.meta["citelock"] == verdict
    assert verdict["passing"] is True and verdict["reasons"] == [] and verdict["verified_documents"] == [0, 1]
    assert [d.content for d in answer.documents or []] == [d.content for d in DOCS]  # AnswerBuilder's own work


def test_a_fabricated_marker_or_quote_from_the_generator_is_never_verified() -> None:
    out = run(
        [
            "Revenue grew 12% [3].",  # AnswerBuilder skips [3] with a warning; citelock reports it
            'It says "Revenue soared 40% in 2023" [1].',
            'It says "The freight clause applies to all shipments over 20 kg" [1].',
            'It says "Revenue grew 12% ... all shipments" [1].',
        ]
    )
    reasons = [v["reasons"] for v in out["verdicts"]]
    assert reasons == [
        ["ID_NOT_IN_PROMPT"],
        ["SPAN_NOT_IN_CHUNK"],
        ["SPAN_IN_OTHER_CHUNK", "OFF_QUESTION"],  # freight does not answer the question
        ["SPAN_STITCHED"],
    ]
    assert all(v["passing"] is False and v["verified_documents"] == [] for v in out["verdicts"][1:])


def test_chat_message_replies_and_missing_documents() -> None:
    builder = CitelockAnswerBuilder()
    out = builder.run(query="q", replies=[ChatMessage.from_assistant("Margins were flat [1].")], documents=DOCS)
    assert out["verdicts"][0]["passing"] is True
    with pytest.raises(InputError, match="documents"):
        builder.run(query="q", replies=["Revenue grew [1]."])
