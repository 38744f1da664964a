"""What each framework adapter adds over calling the framework without it (free checks only), in one run.

Every path runs the framework's own components with its own fake model (LangChain's GenericFakeChatModel,
LlamaIndex's MockLLM, Haystack's MockChatGenerator), so the figures are the adapter's work: numbering the
sources, building the record (and, for the constrained LangChain path, the per-request answer model), reading
markers and quotations, the free checks. The answers are the seeded framework-style answers
(citelock.evals._framework_answers: five sources, one to three quoted and marked sentences). Paths without and
with the adapter alternate call by call, so both see the same machine load; the table gives medians and their ratio.
CitationQueryEngine re-splits every node into citation chunks (a text splitter), which CitelockQueryEngine does not:
that row compares two engines, the evaluator row is the added cost of checking CitationQueryEngine's responses.

    python benchmarks/bench_integrations.py --calls 200 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

from citelock.evals._framework_answers import FrameworkAnswer, framework_answers


def _langchain(answers: list[FrameworkAnswer]) -> dict[str, tuple[Callable[[int], Any], Callable[[int], Any]]]:
    from langchain_core.documents import Document
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough
    from pydantic import BaseModel

    from citelock.integrations import CitedAnswerRunnable, GuardRunnable

    class Citation(BaseModel):
        source_id: int
        quote: str

    class QuotedAnswer(BaseModel):
        answer: str
        citations: list[Citation]

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    def docs(i: int) -> list[Document]:
        return [Document(page_content=t) for t in answers[i % len(answers)].sources]

    def quoted(i: int) -> QuotedAnswer:
        a = answers[i % len(answers)]
        return QuotedAnswer(answer=a.text, citations=[Citation(source_id=0, quote=a.sources[0][:40])])

    state = {"i": 0}
    chain = RunnablePassthrough.assign(context=RunnableLambda(lambda _x: docs(state["i"]))).assign(
        answer=RunnableLambda(lambda _x: quoted(state["i"]))
    )
    guarded = chain | GuardRunnable()

    def plain_chain(i: int) -> Any:
        state["i"] = i
        return chain.invoke({"question": "q"})

    def guarded_chain(i: int) -> Any:
        state["i"] = i
        return guarded.invoke({"question": "q"})

    def reply(i: int, name: str) -> AIMessage:
        first = answers[i % len(answers)].sources[0].split(". ")[0].rstrip(".") + "."
        claims = [{"text": first, "citations": [{"chunk_id": "1", "span": first}]}]
        return AIMessage(content="", tool_calls=[{"name": name, "args": {"claims": claims}, "id": "c1"}])

    class Claim(BaseModel):
        text: str
        citations: list[dict[str, str]]

    class Answer(BaseModel):
        claims: list[Claim]

    def structured(i: int) -> Any:
        llm = Fake(messages=iter([reply(i, "Answer")]))
        text = "\n".join(answers[i % len(answers)].sources)
        return llm.with_structured_output(Answer).invoke([HumanMessage(content=f"{text}\nQuestion: q")])

    def constrained(i: int) -> Any:
        llm = Fake(messages=iter([reply(i, "CitedAnswer")]))
        return CitedAnswerRunnable(llm).invoke({"question": "q", "context": docs(i)})

    return {
        "langchain: quoted-answer chain + GuardRunnable": (plain_chain, guarded_chain),
        "langchain: with_structured_output vs CitedAnswerRunnable": (structured, constrained),
    }


def _llamaindex(answers: list[FrameworkAnswer]) -> dict[str, tuple[Callable[[int], Any], Callable[[int], Any]]]:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.llms import CompletionResponse, MockLLM
    from llama_index.core.query_engine import CitationQueryEngine
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from citelock.integrations import CitelockEvaluator, CitelockQueryEngine

    state = {"i": 0}

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            a = answers[state["i"] % len(answers)]
            return [NodeWithScore(node=TextNode(text=t), score=1.0) for t in a.sources]

    class Scripted(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return CompletionResponse(text=answers[state["i"] % len(answers)].text)

    retriever, llm = Fixed(), Scripted()
    engine = CitationQueryEngine(retriever=retriever, llm=llm, citation_chunk_size=4096)
    ours = CitelockQueryEngine(retriever, llm)
    evaluator = CitelockEvaluator()

    def plain(i: int) -> Any:
        state["i"] = i
        return engine.query("q")

    def evaluated(i: int) -> Any:
        state["i"] = i
        response = engine.query("q")
        return evaluator.evaluate_response(query="q", response=response)

    def guarded(i: int) -> Any:
        state["i"] = i
        return ours.query("q")

    return {
        "llamaindex: CitationQueryEngine + CitelockEvaluator": (plain, evaluated),
        "llamaindex: CitationQueryEngine vs CitelockQueryEngine": (plain, guarded),
    }


def _haystack(answers: list[FrameworkAnswer]) -> dict[str, tuple[Callable[[int], Any], Callable[[int], Any]]]:
    from haystack import Document
    from haystack.components.builders import AnswerBuilder
    from haystack.components.generators.chat import MockChatGenerator
    from haystack.dataclasses import ChatMessage

    from citelock.integrations import CitelockAnswerBuilder

    generator = MockChatGenerator(response_fn=lambda messages: messages[-1].text or "")
    builder, ours = AnswerBuilder(reference_pattern=r"\[(\d+)\]"), CitelockAnswerBuilder()

    def run(component: Any, i: int) -> Any:
        a = answers[i % len(answers)]
        replies = generator.run(messages=[ChatMessage.from_user(a.text)])["replies"]
        return component.run(query="q", replies=replies, documents=[Document(content=t) for t in a.sources])

    return {
        "haystack: MockChatGenerator + AnswerBuilder vs CitelockAnswerBuilder": (
            lambda i: run(builder, i),
            lambda i: run(ours, i),
        )
    }


def _medians_ms(
    without: Callable[[int], Any], with_: Callable[[int], Any], calls: int, offset: int
) -> tuple[float, float]:
    """Median ms per call of each path, the two called alternately on the same answers."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(calls):
        for fn, out in ((without, times[0]), (with_, times[1])):
            started = time.perf_counter()
            fn(offset + i)
            out.append((time.perf_counter() - started) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per path per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each alternates without/with)")
    parser.add_argument("--seed", type=int, default=303)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("haystack").setLevel(logging.ERROR)  # AnswerBuilder warns on every out-of-range marker
    answers = framework_answers(seed=args.seed, per_class=20)
    paths: dict[str, tuple[Callable[[int], Any], Callable[[int], Any]]] = {}
    for build in (_langchain, _llamaindex, _haystack):
        try:
            paths.update(build(answers))
        except ImportError as exc:
            print(f"skipped {build.__name__[1:]}: {exc}")
    rows = []
    for name, (without, with_) in paths.items():
        without(0), with_(0)  # warm: imports, templates, compiled patterns
        rounds = [_medians_ms(without, with_, args.calls, r * args.calls) for r in range(args.rounds)]
        a, b = statistics.median(x for x, _ in rounds), statistics.median(y for _, y in rounds)
        rows.append({"path": name, "without_ms": a, "with_ms": b, "added_ms": b - a, "ratio": b / a})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| path | without (ms) | with (ms) | added (ms) | ratio |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['path']} | {row['without_ms']:.3f} | {row['with_ms']:.3f} | {row['added_ms']:.3f} "
            f"| {row['ratio']:.2f}x |"
        )


if __name__ == "__main__":
    main()
