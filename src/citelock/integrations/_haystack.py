"""Haystack: a component with ``AnswerBuilder``'s sockets that outputs the answers and the guard's verdicts.

:class:`CitelockAnswerBuilder` takes what ``AnswerBuilder`` takes (``query``, ``replies``, ``meta``,
``documents``) and returns ``answers`` (``GeneratedAnswer`` objects, built by Haystack's own ``AnswerBuilder``,
each with ``meta["citelock"]`` holding its verdict) and ``verdicts`` (one per reply: passing, decision, reasons,
request id and the guard's result as JSON). Each reply is checked in detect-only mode with ``[n]`` read as the
n-th document (from 1, as ``AnswerBuilder``'s ``reference_pattern`` counts); an out-of-range marker, which
``AnswerBuilder`` skips with a logged warning, is an ``ID_NOT_IN_PROMPT`` finding. A reply that cannot be read
(empty, malformed markers) fails closed: ``passing`` False, ``error`` says why. Place it after any generator.
"""

from __future__ import annotations

from typing import Any

from citelock.errors import InputError, MissingExtraError, UsageError

try:
    from haystack import Document, component, default_from_dict, default_to_dict
    from haystack.components.builders import AnswerBuilder
    from haystack.dataclasses import ChatMessage, GeneratedAnswer
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("haystack", "haystack-ai") from exc

from citelock.guard import Guard
from citelock.integrations._detect import Detector, Source, jsonable, verdict
from citelock.store import PromptLog

__all__ = ["CitelockAnswerBuilder", "verdict_of"]

_REFERENCE = r"\[(\d+)\]"

verdict_of = verdict
"""One reply's verdict as the component outputs it (:func:`citelock.integrations._detect.verdict`)."""


@component
class CitelockAnswerBuilder:
    """``AnswerBuilder``'s sockets in, the answers plus the guard's verdict per reply out.

    Example:
        >>> pipe.add_component("answers", CitelockAnswerBuilder())  # doctest: +SKIP
        >>> pipe.connect("llm.replies", "answers.replies")  # doctest: +SKIP
        >>> pipe.connect("retriever.documents", "answers.documents")  # doctest: +SKIP

    Args:
        guard: The guard (None: the free checks; any finding blocks).
        log: Where each record is appended (the queue and store sinks need a surface policy on the guard).
        sinks: Where every detection goes (see :data:`~citelock.integrations.DetectSink`).
        pattern: ``AnswerBuilder``'s answer-extraction pattern.
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        log: PromptLog | None = None,
        sinks: tuple[Any, ...] = (),
        pattern: str | None = None,
    ) -> None:
        self.detector = Detector(guard, log=log, sinks=sinks, first=1)
        self.pattern = pattern
        self.configured = guard is not None or log is not None or bool(sinks)
        self.builder = AnswerBuilder(pattern=pattern, reference_pattern=_REFERENCE, expand_reference_ranges=True)

    def to_dict(self) -> dict[str, Any]:
        """Haystack serialization: the ``pattern`` (a guard, log or sinks are objects, not data).

        Raises:
            UsageError: the component was built with a guard, a log or sinks (rebuild them after loading instead).
        """
        if self.configured:
            raise UsageError(
                "a CitelockAnswerBuilder with a guard, log or sinks cannot be serialized: build it with pattern= "
                "only, and add the guard, log and sinks in code after Pipeline.loads(...)"
            )
        return default_to_dict(self, pattern=self.pattern)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CitelockAnswerBuilder:
        """Haystack deserialization (``Pipeline.loads(..., allowed_modules=["citelock.integrations._haystack"])``)."""
        built: CitelockAnswerBuilder = default_from_dict(cls, data)
        return built

    @component.output_types(answers=list[GeneratedAnswer], verdicts=list[dict[str, Any]])
    def run(
        self,
        query: str,
        replies: list[str] | list[ChatMessage],
        meta: list[dict[str, Any]] | None = None,
        documents: list[Document] | None = None,
    ) -> dict[str, Any]:
        """Build the answers as ``AnswerBuilder`` does and check each reply against the documents.

        Raises:
            InputError: no documents (there is nothing to check the citations against).
        """
        if not documents:
            raise InputError("CitelockAnswerBuilder needs documents= (the documents the replies were written from)")
        sources = [Source(text=d.content or "", id=d.id, metadata=jsonable(d.meta)) for d in documents]
        built: list[GeneratedAnswer] = self.builder.run(query=query, replies=replies, meta=meta, documents=documents)[
            "answers"
        ]
        verdicts = []
        answers = []
        for reply, answer in zip(replies, built, strict=True):
            text = reply.text if isinstance(reply, ChatMessage) else str(reply)
            _found, reply_verdict = self.detector.checked(text or "", sources, query)  # unreadable: fails closed
            verdicts.append(reply_verdict)
            answers.append(
                GeneratedAnswer(
                    data=answer.data,
                    query=answer.query,
                    documents=answer.documents,
                    meta={**answer.meta, "citelock": reply_verdict},
                )
            )
        return {"answers": answers, "verdicts": verdicts}
