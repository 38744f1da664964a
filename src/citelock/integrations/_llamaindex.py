"""LlamaIndex: a guarded query engine, and an evaluator for the responses of any query engine.

- :class:`CitelockQueryEngine` retrieves nodes with the caller's retriever, numbers them as
  ``CitationQueryEngine`` does (``Source 1:`` ... in its own prompt), asks the LLM, and checks the reply in
  detect-only mode: the ``Response`` carries the guard's result in ``response.metadata["citelock"]`` and only the
  nodes cited by a citation that failed no check in ``source_nodes``. A reply that cannot be read (empty,
  malformed markers) or a retrieval that found nothing fails closed: ``passing`` False, no source nodes.
- :class:`CitelockEvaluator` is a ``BaseEvaluator``: ``evaluate(query=, response=, contexts=)`` reads ``[n]`` as
  the n-th context (as ``CitationQueryEngine`` numbers its sources; a leading ``Source n:`` line of a context is
  not evidence and is dropped), and ``passing`` is False on any finding that blocks. With no arguments it runs the
  free checks, which need no model.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from typing import Any

from citelock.errors import InputError, MissingExtraError

try:
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.response.schema import Response
    from llama_index.core.evaluation import BaseEvaluator, EvaluationResult
    from llama_index.core.llms import LLM
    from llama_index.core.query_engine.citation_query_engine import CITATION_QA_TEMPLATE
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("llamaindex", "llama-index-core") from exc

from citelock.guard import Guard
from citelock.integrations._detect import Detection, Detector, DetectSink, Source, jsonable, unreadable, verdict
from citelock.store import PromptLog

__all__ = ["CitelockEvaluator", "CitelockQueryEngine", "citelock_metadata"]

_SOURCE_HEADER = re.compile(r"\ASource \d+:\s*\n?")

citelock_metadata = verdict
"""What a response carries under ``metadata["citelock"]`` (:func:`citelock.integrations._detect.verdict`)."""


def _context_text(context: str) -> str:
    return _SOURCE_HEADER.sub("", context, count=1)


class CitelockEvaluator(BaseEvaluator):
    """Check a response's ``[n]`` markers and quotations against its contexts (detect-only mode).

    Example:
        >>> evaluator = CitelockEvaluator()
        >>> response = citation_engine.query("When is water wet?")  # doctest: +SKIP
        >>> evaluator.evaluate_response(query="When is water wet?", response=response).passing  # doctest: +SKIP

    Args:
        guard: The guard (None: the free checks; any finding blocks).
        first: The number of the first context (1, as ``CitationQueryEngine`` numbers its sources).
        log: Where each record is appended.
        sinks: Where every detection goes (see :data:`~citelock.integrations.DetectSink`).
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        first: int = 1,
        log: PromptLog | None = None,
        sinks: Iterable[DetectSink] = (),
    ) -> None:
        self.detector = Detector(guard, log=log, sinks=sinks, first=first)

    def _get_prompts(self) -> dict[str, Any]:
        return {}

    def _update_prompts(self, prompts_dict: dict[str, Any]) -> None:
        return None

    def detect(
        self, query: str | None = None, response: str | None = None, contexts: Sequence[str] | None = None
    ) -> Detection:
        """The :class:`~citelock.integrations.Detection` behind :meth:`evaluate`.

        Raises:
            InputError: no response or no contexts.
        """
        if response is None or not contexts:
            raise InputError("the citelock evaluator needs response= (the answer text) and contexts= (its sources)")
        sources = [Source(text=_context_text(c)) for c in contexts]
        return self.detector.run(response, sources, query)

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Check one response: ``passing`` is False on any finding that blocks; ``feedback`` lists the findings."""
        found = self.detect(query, response, contexts)
        return _evaluation(found, query, response, contexts)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """The async :meth:`evaluate` (the guard runs in a worker thread)."""
        return await asyncio.to_thread(self.evaluate, query, response, contexts)


def _evaluation(
    found: Detection, query: str | None, response: str | None, contexts: Sequence[str] | None
) -> EvaluationResult:
    checks = found.result.report.citations
    score = sum(c.passed for c in checks) / len(checks) if checks else None
    feedback = "; ".join(
        f"{f.reason.value} (claim {f.claim_index}{'' if f.chunk_id is None else ', source ' + f.chunk_id}): {f.detail}"
        for f in found.findings
    )
    return EvaluationResult(
        query=query,
        contexts=contexts,
        response=response,
        passing=found.passing,
        score=score,
        feedback=feedback or "every citation checked: no findings",
    )


class CitelockQueryEngine(BaseQueryEngine):
    """Retriever + LLM in, a ``Response`` out whose citations were checked and whose sources were verified.

    Example:
        >>> engine = CitelockQueryEngine(index.as_retriever(similarity_top_k=3), llm)  # doctest: +SKIP
        >>> response = engine.query("When did the bridge open?")  # doctest: +SKIP
        >>> verdict = response.metadata["citelock"]  # doctest: +SKIP
        >>> verdict.get("passing"), response.source_nodes  # doctest: +SKIP

    Args:
        retriever: The retriever.
        llm: The LLM (its ``complete`` / ``acomplete`` is called with the citation prompt).
        guard: The guard (None: the free checks).
        log: Where each record is appended.
        sinks: Where every detection goes.
        prompt: The prompt template (``context_str``, ``query_str``); default: ``CitationQueryEngine``'s.

    Raises:
        InputError: a retriever or LLM of the wrong type.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        llm: LLM,
        *,
        guard: Guard | None = None,
        log: PromptLog | None = None,
        sinks: Iterable[DetectSink] = (),
        prompt: Any = None,
    ) -> None:
        if not isinstance(retriever, BaseRetriever) or not isinstance(llm, LLM):
            raise InputError(
                f"expected a LlamaIndex BaseRetriever and LLM, got {type(retriever).__name__} and {type(llm).__name__}"
            )
        super().__init__(callback_manager=None)
        self.retriever = retriever
        self.llm = llm
        self.prompt = prompt if prompt is not None else CITATION_QA_TEMPLATE
        self.detector = Detector(guard, log=log, sinks=sinks, first=1)

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _prompt(self, query: QueryBundle, nodes: Sequence[NodeWithScore]) -> tuple[str, list[Source]]:
        sources = [
            Source(
                text=n.node.get_content(metadata_mode=MetadataMode.NONE),
                id=n.node.node_id,
                metadata=jsonable(n.node.metadata),
            )
            for n in nodes
        ]
        context = "\n".join(f"Source {i}:\n{s.text}\n" for i, s in enumerate(sources, start=1))
        return str(self.prompt.format(context_str=context, query_str=query.query_str)), sources

    def _response(self, query: QueryBundle, nodes: list[NodeWithScore], text: str) -> Response:
        if not nodes:
            verdict = unreadable(InputError("the retriever returned no nodes: there is nothing the answer can cite"))
            return Response(response=text, source_nodes=[], metadata={"citelock": verdict})
        found, reply_verdict = self.detector.checked(text, self._prompt(query, nodes)[1], query.query_str)
        kept = [nodes[i] for i in found.verified()] if found is not None else []  # unreadable: fails closed
        return Response(response=text, source_nodes=kept, metadata={"citelock": reply_verdict})

    def _query(self, query_bundle: QueryBundle) -> Response:
        nodes = self.retriever.retrieve(query_bundle)
        prompt, _sources = self._prompt(query_bundle, nodes)
        return self._response(query_bundle, nodes, self.llm.complete(prompt).text)

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        nodes = await self.retriever.aretrieve(query_bundle)
        prompt, _sources = self._prompt(query_bundle, nodes)
        text = (await self.llm.acomplete(prompt)).text
        return await asyncio.to_thread(self._response, query_bundle, nodes, text)
