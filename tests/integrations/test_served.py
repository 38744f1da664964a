"""Each adapter once against the bundled model served as ``citelock serve`` serves it (llama.cpp on 127.0.0.1).

The assertions are what the constraint and the guard guarantee, never what the model chose: greedy output
differs between CPUs.
"""

from __future__ import annotations

from typing import Any

import pytest

from citelock.runtime import ManagedServer

pytestmark = [pytest.mark.server, pytest.mark.local_model]

TEXTS = [
    "The Tamar bridge opened in 1961. It spans 335 meters across the river.",
    "The city library holds 2 million books and opened a new wing in 2015.",
]
QUESTION = "When did the Tamar bridge open?"


def test_langchain_chat_openai_under_the_request_answer_model(llama_server: ManagedServer) -> None:
    pytest.importorskip("langchain_openai", reason="langchain-openai is not installed (the dev extra has it)")
    from langchain_core.documents import Document
    from langchain_openai import ChatOpenAI

    from citelock.integrations import CitedAnswerRunnable

    llm = ChatOpenAI(
        base_url=llama_server.base_url, api_key="local", model=llama_server.model_name, temperature=0, max_retries=0
    )
    runnable = CitedAnswerRunnable(llm, delivery="response_format", server="llama-cpp-python")
    result = runnable.invoke({"question": QUESTION, "context": [Document(page_content=t) for t in TEXTS]})
    cited = [c.chunk_id for claim in result.answer.claims for c in claim.citations]
    assert set(cited) <= {"1", "2"}  # the constraint: only this request's documents can be named
    assert result.span_policy == "sentence" and "response_format content" in result.generation.notes
    passed = {(c.claim_index, c.citation_index) for c in result.report.citations if c.passed}
    flagged = {(f.claim_index, f.citation_index) for f in result.findings if f.citation_index is not None}
    assert not passed & flagged  # a citation is verified or flagged, never both


def _served_llm(server: ManagedServer) -> Any:
    """A LlamaIndex CustomLLM that completes through the served model's OpenAI-compatible chat endpoint."""
    import openai
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata

    client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=300)

    class Served(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name=server.model_name)

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            reply = client.chat.completions.create(
                model=server.model_name, messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=96
            )
            return CompletionResponse(text=reply.choices[0].message.content or "")

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            yield self.complete(prompt)

    return Served()


def test_llamaindex_query_engine_on_the_served_model(llama_server: ManagedServer) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.schema import TextNode

    from citelock.integrations import CitelockQueryEngine

    nodes = [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(TEXTS)]
    retriever = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8)).as_retriever(similarity_top_k=2)
    response = CitelockQueryEngine(retriever, _served_llm(llama_server)).query(QUESTION)
    assert response.metadata is not None
    record = response.metadata["citelock"]
    kept = {s.node.node_id for s in response.source_nodes}
    assert kept <= {"n0", "n1"}
    assert record["passing"] == (record["decision"] != "block")
    if record["result"] is None:  # a reply that cannot be read fails closed: nothing verified
        assert not record["passing"] and not kept and record["error"]
    else:
        passed = {c["chunk_id"] for c in record["result"]["report"]["citations"] if c["passed"]}
        verified = record["verified_documents"]
        assert len(response.source_nodes) == len(verified)  # a kept node is a verified one, and only those
        assert {str(position + 1) for position in verified} <= passed


def test_haystack_component_after_the_served_model(llama_server: ManagedServer) -> None:
    pytest.importorskip("haystack")
    from haystack import Document, Pipeline
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.utils import Secret

    from citelock.integrations import CitelockAnswerBuilder

    docs = [Document(content=t) for t in TEXTS]
    template = [
        ChatMessage.from_user(
            "Answer from the sources and cite them as [1] or [2].\n"
            "{% for d in documents %}[{{ loop.index }}] {{ d.content }}\n{% endfor %}Question: {{ query }}"
        )
    ]
    pipe = Pipeline()
    pipe.add_component("prompt", ChatPromptBuilder(template=template, required_variables=["query", "documents"]))
    pipe.add_component(
        "llm",
        OpenAIChatGenerator(
            api_key=Secret.from_token("local"),
            model=llama_server.model_name,
            api_base_url=llama_server.base_url,
            generation_kwargs={"temperature": 0, "max_tokens": 96},
            max_retries=0,
        ),
    )
    pipe.add_component("answers", CitelockAnswerBuilder())
    pipe.connect("prompt.prompt", "llm.messages")
    pipe.connect("llm.replies", "answers.replies")
    out = pipe.run(
        {"prompt": {"query": QUESTION, "documents": docs}, "answers": {"query": QUESTION, "documents": docs}}
    )
    (verdict,) = out["answers"]["verdicts"]
    checks = verdict["result"]["report"]["citations"] if verdict["result"] else []
    numbers = {c["chunk_id"] for c in checks}
    out_of_range = numbers - {"1", "2"}
    findings = verdict["result"]["report"]["findings"] if verdict["result"] else []
    flagged = {f["chunk_id"] for f in findings if f["reason"] == "ID_NOT_IN_PROMPT"}
    assert flagged >= out_of_range  # a marker past the last document is never verified
    assert set(verdict["verified_documents"]) <= {0, 1}
    assert verdict["passing"] == (verdict["decision"] != "block")
