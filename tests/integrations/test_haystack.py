"""The Haystack component in a real Haystack pipeline, after Haystack's own MockChatGenerator."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("haystack", reason='the haystack extra is not installed: pip install "citelock[haystack]"')

from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from citelock import Guard, InputError, UsageError
from citelock.integrations import CitelockAnswerBuilder

DOCS = [
    Document(content="Revenue grew 12% in 2023. Margins were flat in the first half."),
    Document(content="The freight clause applies to all shipments over 20 kg."),
]


def pipeline(replies: list[str]) -> Pipeline:
    """Prompt builder -> Haystack's own MockChatGenerator (one scripted reply per run, cycling) -> the component."""
    pipe = Pipeline()
    template = [
        ChatMessage.from_user(
            "{% for d in documents %}[{{ loop.index }}] {{ d.content }}\n{% endfor %}Question: {{ query }}"
        )
    ]
    pipe.add_component("prompt", ChatPromptBuilder(template=template, required_variables=["query", "documents"]))
    pipe.add_component("llm", MockChatGenerator(responses=list(replies)))
    pipe.add_component("answers", CitelockAnswerBuilder())
    pipe.connect("prompt.prompt", "llm.messages")
    pipe.connect("llm.replies", "answers.replies")
    return pipe


def run_all(replies: list[str]) -> dict[str, list[Any]]:
    """Each reply through the pipeline once; the answers and verdicts of every run, in order."""
    query = "Did revenue grow?"
    pipe = pipeline(replies)
    out: dict[str, list[Any]] = {"answers": [], "verdicts": []}
    for _ in replies:
        got = pipe.run({"prompt": {"query": query, "documents": DOCS}, "answers": {"query": query, "documents": DOCS}})
        out["answers"] += got["answers"]["answers"]
        out["verdicts"] += got["answers"]["verdicts"]
    return out


def test_answers_and_verdicts_come_out_of_a_pipeline() -> None:
    out = run_all(['Revenue grew 12% [1]. It says "all shipments over 20 kg" [2].'])
    (answer,) = out["answers"]
    (verdict,) = out["verdicts"]
    assert isinstance(answer, GeneratedAnswer) and answer.meta["citelock"] == verdict
    assert verdict["passing"] is True and verdict["reasons"] == [] and verdict["verified_documents"] == [0, 1]
    assert [d.content for d in answer.documents or []] == [d.content for d in DOCS]  # AnswerBuilder's own work


def test_a_fabricated_marker_or_quote_from_the_generator_is_never_verified() -> None:
    out = run_all(
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
    (empty,) = builder.run(query="q", replies=["  "], documents=DOCS)["verdicts"]
    assert empty["passing"] is False and empty["result"] is None and "ParseError" in empty["error"]


def test_the_component_round_trips_through_pipeline_serialization() -> None:
    pipe = Pipeline()
    pipe.add_component("answers", CitelockAnswerBuilder(pattern="Answer: (.*)"))
    loaded = Pipeline.loads(pipe.dumps(), allowed_modules=["citelock.integrations._haystack"])
    component = loaded.get_component("answers")
    assert isinstance(component, CitelockAnswerBuilder) and component.pattern == "Answer: (.*)"
    configured = Pipeline()
    configured.add_component("answers", CitelockAnswerBuilder(guard=Guard()))
    with pytest.raises(UsageError, match="cannot be serialized"):
        configured.dumps()
