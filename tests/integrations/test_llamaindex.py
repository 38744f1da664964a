"""The LlamaIndex query engine and evaluator against llama-index-core itself, with its MockLLM and MockEmbedding."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "llama_index.core", reason='the llamaindex extra is not installed: pip install "citelock[llamaindex]"'
)

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.evaluation import BaseEvaluator
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.schema import TextNode
from pydantic import Field

from citelock import InputError
from citelock.integrations import CitelockEvaluator, CitelockQueryEngine

TEXTS = [
    "Revenue grew 12% in 2023. Margins were flat in the first half.",
    "The freight clause applies to all shipments over 20 kg.",
]


class ScriptedLLM(MockLLM):
    """llama-index-core's MockLLM, answering with a scripted reply (and keeping the prompts it was sent)."""

    reply: str = ""
    prompts: list[str] = Field(default_factory=list)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.reply)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.complete(prompt)


def index() -> VectorStoreIndex:
    nodes = [TextNode(text=t, id_=f"node-{i}") for i, t in enumerate(TEXTS)]
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))


def llm(reply: str) -> ScriptedLLM:
    scripted = ScriptedLLM()
    scripted.reply = reply
    return scripted


def source_of(response: Any, text: str) -> int:
    """The 1-based source number CitationQueryEngine gave the node holding ``text`` (retrieval order varies)."""
    return next(i for i, n in enumerate(response.source_nodes, start=1) if text in n.node.get_content())


def test_the_evaluator_needs_no_arguments_and_reads_citation_query_engine_sources() -> None:
    evaluator = CitelockEvaluator()
    assert isinstance(evaluator, BaseEvaluator)
    probe = CitationQueryEngine.from_args(index(), llm=llm("x [1]."), similarity_top_k=2).query("Revenue?")
    n, m = source_of(probe, "Revenue grew"), source_of(probe, "freight")
    good = f'Revenue grew 12% [{n}]. The clause covers "all shipments over 20 kg" [{m}].'
    engine = CitationQueryEngine.from_args(index(), llm=llm(good), similarity_top_k=2)
    response = engine.query("Did revenue grow?")
    assert response.source_nodes[0].node.get_content().startswith("Source 1:")
    result = evaluator.evaluate_response(query="Did revenue grow?", response=response)
    assert result.passing is True and result.score == 1.0, result.feedback


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Revenue grew 12% [3].", "ID_NOT_IN_PROMPT"),
        ('It says "Revenue soared 40% in 2023" [{n}].', "SPAN_NOT_IN_CHUNK"),
        ('It says "Revenue grew 12% in 2023" [{m}].', "SPAN_IN_OTHER_CHUNK"),
    ],
)
def test_a_fabricated_marker_or_quote_from_the_mock_llm_fails_the_evaluation(reply: str, reason: str) -> None:
    probe = CitationQueryEngine.from_args(index(), llm=llm("x [1]."), similarity_top_k=2).query("Revenue?")
    n, m = source_of(probe, "Revenue grew"), source_of(probe, "freight")
    engine = CitationQueryEngine.from_args(index(), llm=llm(reply.format(n=n, m=m)), similarity_top_k=2)
    response = engine.query("Did revenue grow?")
    result = CitelockEvaluator().evaluate_response(query="Did revenue grow?", response=response)
    assert result.passing is False and reason in result.feedback
    assert asyncio.run(CitelockEvaluator().aevaluate_response(query="q", response=response)).passing is False


def test_the_evaluator_refuses_a_call_without_contexts() -> None:
    with pytest.raises(InputError, match="contexts"):
        CitelockEvaluator().evaluate(query="q", response="Revenue grew [1].")


def test_the_query_engine_keeps_only_cited_verified_nodes() -> None:
    scripted = llm("The sources do not contain the answer.")
    engine = CitelockQueryEngine(index().as_retriever(similarity_top_k=2), scripted)
    first = engine.query("Did revenue grow?")  # learn which number each node got in this retrieval
    prompt = scripted.prompts[-1]
    assert "Source 1:" in prompt and "Source 2:" in prompt and "Did revenue grow?" in prompt
    n = 1 if prompt.index("Revenue grew") < prompt.index("freight") else 2
    assert first.metadata is not None and first.metadata["citelock"]["passing"] is True  # an abstention
    assert first.source_nodes == []
    scripted.reply = f'It says "Revenue grew 12% in 2023" [{n}]. Also [7].'
    response = engine.query("Did revenue grow?")
    record = response.metadata["citelock"]
    assert record["reasons"] == ["ID_NOT_IN_PROMPT"] and record["passing"] is False
    assert [s.node.node_id for s in response.source_nodes] == ["node-0"]
    assert record["result"]["report"]["findings"][0]["chunk_id"] == "7"
    again = asyncio.run(engine.aquery("Did revenue grow?"))
    assert [s.node.node_id for s in again.source_nodes] == ["node-0"]
