"""The LangChain Runnables against langchain-core itself, with its own fake chat models."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason='the langchain extra is not installed: pip install "citelock[langchain]"')

from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import BaseModel, Field

from citelock import GuardedAnswer, InputError, UsageError
from citelock.integrations import CitedAnswerRunnable, Detection, GuardRunnable

DOCS = [
    Document(page_content="Revenue grew 12% in 2023. Margins were flat.", id="doc-a", metadata={"title": "Q4"}),
    Document(page_content="The freight clause applies to shipments over 20 kg.", id="doc-b"),
]
QUESTION = "Did revenue grow in 2023?"


class ToolCallingFake(GenericFakeChatModel):
    """langchain-core's GenericFakeChatModel, with tools bound as a tool-calling model binds them."""

    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound.extend(tools)
        return self


def tool_reply(claims: list[dict[str, Any]], name: str = "CitedAnswer") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": {"claims": claims}, "id": "call-1"}])


GOOD = [{"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "1", "span": "Revenue grew 12% in 2023."}]}]


def test_a_conforming_answer_is_parsed_by_the_request_answer_model_and_passes() -> None:
    llm = ToolCallingFake(messages=iter([tool_reply(GOOD)]))
    result = CitedAnswerRunnable(llm).invoke({"question": QUESTION, "context": DOCS})
    assert isinstance(result, GuardedAnswer)
    assert result.decision == "pass" and result.backend == "langchain"
    assert "parsed by the answer model" in result.generation.notes
    # the constraint: the bound schema names this request's two documents and no other id
    schema = llm.bound[-1].model_json_schema()
    ids = {d["properties"]["chunk_id"]["const"] for name, d in schema["$defs"].items() if name.startswith("Citation")}
    assert ids == {"1", "2"}


@pytest.mark.parametrize(
    ("citation", "reason"),
    [
        ({"chunk_id": "c-999", "span": "Revenue grew 12% in 2023."}, "ID_NOT_IN_PROMPT"),
        ({"chunk_id": "3", "span": "Revenue grew 12% in 2023."}, "ID_NOT_IN_PROMPT"),
        ({"chunk_id": "1", "span": "Revenue soared 40% in 2023."}, "SPAN_NOT_IN_CHUNK"),
        ({"chunk_id": "2", "span": "Revenue grew 12% in 2023."}, "SPAN_IN_OTHER_CHUNK"),
    ],
)
def test_a_fabricated_id_or_quote_from_the_fake_model_is_never_verified(citation: dict[str, str], reason: str) -> None:
    claims = [{"text": "Revenue grew 12% in 2023.", "citations": [citation]}]
    llm = ToolCallingFake(messages=iter([tool_reply(claims)]))
    result = CitedAnswerRunnable(llm).invoke({"question": QUESTION, "context": DOCS})
    assert reason in [f.reason.value for f in result.findings]
    assert result.decision == "block" and not result.ok
    assert not any(c.passed for c in result.report.citations)
    assert any(n.startswith("outside the answer model") for n in result.generation.notes)


def test_ainvoke_and_the_response_format_delivery() -> None:
    llm = FakeListChatModel(responses=[json.dumps({"claims": GOOD})])
    runnable = CitedAnswerRunnable(llm, delivery="response_format")
    result = asyncio.run(runnable.ainvoke({"question": QUESTION, "context": DOCS}))
    assert result.decision == "pass" and "response_format content" in result.generation.notes


def test_the_constrained_runnable_refuses_bad_input() -> None:
    with pytest.raises(UsageError, match="chat model"):
        CitedAnswerRunnable("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="sink"):
        CitedAnswerRunnable(FakeListChatModel(responses=["{}"]), sinks=["queue.db"])
    with pytest.raises(UsageError, match="delivery"):
        CitedAnswerRunnable(FakeListChatModel(responses=["{}"]), delivery="grammar")  # type: ignore[arg-type]
    runnable = CitedAnswerRunnable(FakeListChatModel(responses=["{}"]))
    with pytest.raises(InputError, match="documents"):
        runnable.invoke({"question": QUESTION})
    with pytest.raises(InputError, match="question"):
        runnable.invoke({"question": " ", "context": DOCS})
    with pytest.raises(InputError, match="Document"):
        runnable.invoke({"question": QUESTION, "context": [42]})


class Citation(BaseModel):
    source_id: int
    quote: str


class QuotedAnswer(BaseModel):
    answer: str
    citations: list[Citation]


def how_to_chain(answer: QuotedAnswer) -> Any:
    """The quoted-answer how-to's shape: retrieve, then answer with a QuotedAnswer, then guard."""
    return (
        RunnablePassthrough.assign(context=RunnableLambda(lambda _x: DOCS))
        .assign(answer=RunnableLambda(lambda _x: answer))
        .pipe(GuardRunnable())
    )


def test_guard_runnable_checks_a_quoted_answer_numbered_from_zero() -> None:
    good = QuotedAnswer(answer="Revenue grew.", citations=[Citation(source_id=0, quote="Revenue grew 12% in 2023")])
    found = how_to_chain(good).invoke({"question": QUESTION})
    assert isinstance(found, Detection) and found.passing and found.verified() == (0,)
    injected = QuotedAnswer(
        answer="Revenue grew.",
        citations=[Citation(source_id=0, quote="Revenue tripled in 2023"), Citation(source_id=4, quote="x y z")],
    )
    found = how_to_chain(injected).invoke({"question": QUESTION})
    assert [f.reason.value for f in found.findings] == ["SPAN_NOT_IN_CHUNK", "ID_NOT_IN_PROMPT"]
    assert not found.passing and found.verified() == ()


def test_guard_runnable_reads_a_free_text_chain_and_streams() -> None:
    prompt = ChatPromptTemplate.from_messages([("human", "{question}")])
    llm = FakeListChatModel(responses=['It says "Revenue grew 12% in 2023" [0]. Freight [5].'] * 3)
    chain = (
        RunnablePassthrough.assign(context=RunnableLambda(lambda _x: DOCS)).assign(
            answer=prompt | llm | StrOutputParser()
        )
        | GuardRunnable()
    )
    streamed = list(chain.stream({"question": QUESTION}))
    assert len(streamed) == 1 and [f.reason.value for f in streamed[0].findings] == ["ID_NOT_IN_PROMPT"]

    async def both() -> list[Detection]:
        out = [d async for d in chain.astream({"question": QUESTION})]
        return [*out, await chain.ainvoke({"question": QUESTION})]

    found = asyncio.run(both())
    assert all(f.findings[0].chunk_id == "5" and f.verified() == (0,) for f in found)


def test_guard_runnable_refuses_input_without_an_answer() -> None:
    with pytest.raises(InputError, match="'answer'"):
        GuardRunnable().invoke({"context": DOCS})
    with pytest.raises(InputError, match="source_id"):
        GuardRunnable().invoke({"context": DOCS, "answer": {"answer": "x", "citations": [{"quote": "y"}]}})


def test_the_constrained_runnable_logs_queues_stores_and_streams(tmp_path: Any) -> None:
    from citelock import Guard, SurfacePolicy
    from citelock.store import PromptLog, ResultStore, ReviewQueue

    db = str(tmp_path / "c.db")
    seen: list[tuple[GuardedAnswer, Any]] = []
    bad = [{"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "9", "span": "Revenue grew 12% in 2023."}]}]
    llm = ToolCallingFake(messages=iter([tool_reply(bad)]))
    guard = Guard(SurfacePolicy(name="docs", stakes="low", sample_rate=0.0, relevance="off"))
    runnable = CitedAnswerRunnable(
        llm, guard=guard, log=PromptLog(db), sinks=[ReviewQueue(db), ResultStore(db), lambda a, r: seen.append((a, r))]
    )
    (result,) = list(runnable.stream({"question": QUESTION, "context": DOCS}))
    assert result.surface == "docs" and not result.served
    assert [entry.reason.value for entry, _ in ReviewQueue(db).items()] == ["ID_NOT_IN_PROMPT"]
    assert ResultStore(db).for_request(result.request_id, surface="docs") is not None
    assert PromptLog(db).get(result.request_id).sha256 == result.prompt_sha256
    assert seen and seen[0][0] is result


@pytest.mark.parametrize("prose", ["Revenue grew 12% in 2023 [1].", "Revenue never grew", '{"text": "It grew [1]."}'])
def test_prose_from_the_constrained_call_is_never_read_as_free_text(prose: str) -> None:
    """Outside the answer model, the reply is still the constrained call's output: its schema's JSON or nothing."""
    from citelock import ParseError

    tool_llm = ToolCallingFake(messages=iter([AIMessage(content=prose)]))  # no tool call: prose content
    with pytest.raises(ParseError, match="citation constraint"):
        CitedAnswerRunnable(tool_llm).invoke({"question": QUESTION, "context": DOCS})
    content_llm = FakeListChatModel(responses=[prose])
    with pytest.raises(ParseError, match="citation constraint"):
        CitedAnswerRunnable(content_llm, delivery="response_format").invoke({"question": QUESTION, "context": DOCS})
