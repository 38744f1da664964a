"""LangChain: two Runnables, one that answers under citelock's constraint and one that guards a chain's answer.

- :class:`CitedAnswerRunnable` takes ``{"question": ..., "context": [Document, ...]}`` and a chat model, and
  returns a :class:`~citelock.GuardedAnswer`. The constraint is this request's answer model
  (:func:`citelock.answer_model`: ``chunk_id`` a ``Literal`` of this request's document numbers, spans the
  documents' sentences) delivered through the model's own ``with_structured_output`` (or, for servers that take
  a ``response_format`` and no tools, bound as one). The prompt is citelock's template over the documents, and
  the answer is guarded against it, whatever the model returned: output that broke the constraint is read as it
  is and its fabricated ids are findings, never verified citations.
- :class:`GuardRunnable` takes a chain's output, the quoted-answer how-to's ``{"question", "context", "answer"}``
  (``answer`` a ``QuotedAnswer``-style object: ``answer`` text and ``citations`` of ``source_id`` + ``quote``),
  or a free-text reply with ``[n]`` markers, and returns the :class:`~citelock.integrations.Detection`.

Both are sync and async (``invoke``/``ainvoke``, ``batch``/``abatch``, ``stream``/``astream`` yield the one
result). Documents are numbered in order: from 1 for :class:`CitedAnswerRunnable`, from ``first`` (0, as the
how-to's ``Source ID: {i}``) for :class:`GuardRunnable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from time import perf_counter
from typing import Any, Literal

from citelock.errors import InputError, MissingExtraError, UsageError

try:
    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.runnables import Runnable, RunnableConfig
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("langchain", "langchain-core") from exc

from citelock._guarded import GenerationStats, GuardedAnswer
from citelock._wrap import answer_model
from citelock.constraint import SpanPolicy
from citelock.guard import Guard, GuardResult
from citelock.integrations._detect import Detection, Detector, DetectSink, Source, jsonable, numbered_chunks
from citelock.prompt import serialize
from citelock.records import Answer, Context, PromptRecord
from citelock.render import RenderStyle, render_answer, require_style
from citelock.store import PromptLog, ResultStore, ReviewQueue

__all__ = ["CitedAnswerRunnable", "GuardRunnable", "sources_of"]

Delivery = Literal["structured_output", "response_format"]
_DOC_KEYS = ("context", "documents", "docs")


def sources_of(documents: Any) -> list[Source]:
    """LangChain ``Document``s (or plain strings) as sources, in order.

    Raises:
        InputError: not a list of Documents or strings.
    """
    if isinstance(documents, str | Document) or not isinstance(documents, Sequence):
        raise InputError(f"documents must be a list of LangChain Documents, got {type(documents).__name__}")
    out = []
    for i, doc in enumerate(documents):
        if isinstance(doc, Document):
            out.append(Source(text=doc.page_content, id=doc.id, metadata=jsonable(doc.metadata)))
        elif isinstance(doc, str):
            out.append(Source(text=doc))
        else:
            raise InputError(f"document {i} is a {type(doc).__name__}; expected a LangChain Document")
    return out


def _documents(given: Mapping[str, Any]) -> Any:
    for key in _DOC_KEYS:
        if key in given:
            return given[key]
    raise InputError(
        f"the input has no documents: expected one of the keys {', '.join(_DOC_KEYS)} (got {sorted(given)})"
    )


def _mapping(given: Any) -> Mapping[str, Any]:
    if not isinstance(given, Mapping):
        raise InputError(
            f"the input must be a dict with 'question' and 'context' (Documents), got {type(given).__name__}"
        )
    return given


def _question(given: Mapping[str, Any], *, required: bool) -> str | None:
    question = given.get("question")
    if question is None and not required:
        return None
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"'question' must be non-empty text, got {question!r:.60}")
    return question


def _lc_messages(record: PromptRecord) -> list[BaseMessage]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds.get(m.role, HumanMessage)(content=m.content) for m in record.messages]


class CitedAnswerRunnable(Runnable[dict[str, Any], GuardedAnswer]):
    """Answer from LangChain documents with citations constrained to them, and guard the answer.

    Example:
        >>> chain = CitedAnswerRunnable(ChatOpenAI(model="gpt-4o-mini"))  # doctest: +SKIP
        >>> result = chain.invoke({"question": "When did the bridge open?", "context": docs})  # doctest: +SKIP
        >>> result.ok, result.rendered  # doctest: +SKIP

    Args:
        llm: The chat model.
        guard: The guard (None: the free checks).
        policy: Requested span policy (``sentence`` or ``id``: what a JSON Schema enforces).
        server: The server kind the schema is fitted to (its limits and keywords; see :func:`citelock.answer_model`).
        delivery: ``structured_output`` calls ``llm.with_structured_output(model, include_raw=True, **kwargs)``;
            ``response_format`` binds the answer model's ``response_format`` (servers such as llama-cpp-python
            that take a schema there and no tools) and reads the reply's content.
        structured_output: Extra keyword arguments for ``with_structured_output`` (e.g. ``method="json_schema"``).
        log: Where each prompt record is appended before the model is called.
        sinks: Where every result goes (a review queue, a result store, or a callable ``(answer, result)``).
        render: How ``rendered`` shows citations.

    Raises:
        UsageError: an llm that is not a chat model, an unknown delivery or render style.
    """

    def __init__(
        self,
        llm: BaseChatModel,
        *,
        guard: Guard | None = None,
        policy: SpanPolicy = "sentence",
        server: str = "openai",
        delivery: Delivery = "structured_output",
        structured_output: Mapping[str, Any] | None = None,
        log: PromptLog | None = None,
        sinks: Iterable[ReviewQueue | ResultStore | Any] = (),
        render: RenderStyle = "footnotes",
    ) -> None:
        if not isinstance(llm, BaseChatModel):
            raise UsageError(f"llm must be a LangChain chat model (BaseChatModel), got {type(llm).__name__}")
        if delivery not in ("structured_output", "response_format"):
            raise UsageError(f"delivery must be structured_output or response_format, got {delivery!r}")
        require_style(render)
        given = list(sinks)
        self.callables = [s for s in given if not isinstance(s, ReviewQueue | ResultStore)]
        for sink in self.callables:
            if not callable(sink):
                raise UsageError(
                    f"a sink must be a ReviewQueue, a ResultStore or a callable, got {type(sink).__name__}"
                )
        self.llm = llm
        self.detector = Detector(guard, log=log, sinks=[s for s in given if isinstance(s, ReviewQueue | ResultStore)])
        self.policy: SpanPolicy = policy
        self.server = server
        self.delivery: Delivery = delivery
        self.structured_output = dict(structured_output or {})
        self.render: RenderStyle = render

    def _prepare(self, given: Any) -> tuple[str, Context, Any, PromptRecord, Any]:
        data = _mapping(given)
        question = _question(data, required=True)
        assert question is not None
        chunks = numbered_chunks(sources_of(_documents(data)), first=1)
        shape = answer_model(chunks, policy=self.policy, server=self.server)
        context = Context(question=question, chunks=chunks)
        meta = {"door": "langchain", "span_policy": shape.schema.policy}
        record = serialize(context, template="answer_structured", metadata=meta)
        if self.detector.log is not None:
            self.detector.log.append(record)
        runnable: Runnable[Any, Any]
        if self.delivery == "response_format":
            runnable = self.llm.bind(response_format=shape.response_format)
        else:
            runnable = self.llm.with_structured_output(shape.model, include_raw=True, **self.structured_output)
        return question, context, shape, record, runnable

    def _finish(self, context: Context, shape: Any, record: PromptRecord, output: Any, started: float) -> GuardedAnswer:
        parsed, notes = _read_output(shape, output)
        result = self.detector.guard.run(record, parsed)
        latency = perf_counter() - started
        guarded = _guarded_answer(self, context, shape, record, parsed, result, latency, notes)
        self.detector.deliver_result(result)
        for sink in self.callables:
            sink(guarded, result)
        return guarded

    def invoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> GuardedAnswer:
        """Answer one question from its documents (``{"question", "context"}``) and guard the answer."""
        started = perf_counter()
        _question_text, context, shape, record, runnable = self._prepare(input)
        output = runnable.invoke(_lc_messages(record), config)
        return self._finish(context, shape, record, output, started)

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> GuardedAnswer:
        """The async :meth:`invoke`: the model is awaited, the guard runs in a worker thread."""
        started = perf_counter()
        _question_text, context, shape, record, runnable = await asyncio.to_thread(self._prepare, input)
        output = await runnable.ainvoke(_lc_messages(record), config)
        return await asyncio.to_thread(self._finish, context, shape, record, output, started)


def _read_output(shape: Any, output: Any) -> tuple[Answer, tuple[str, ...]]:
    """The answer the model returned, parsed by the answer model, else read as returned (never trusted).

    Read as returned is still under the constraint the call declared: the schema's JSON (a tool call's arguments
    or the content), never prose read as free text (a :class:`~citelock.ParseError` otherwise).
    """
    if isinstance(output, Mapping) and "raw" in output:  # with_structured_output(include_raw=True)
        if output.get("parsed") is not None:
            return shape.answer(output["parsed"]), ("parsed by the answer model",)
        raw = output["raw"]
        calls = getattr(raw, "tool_calls", None) or []
        payload = calls[0].get("args") if calls else getattr(raw, "content", "")
        note = f"outside the answer model ({type(output.get('parsing_error')).__name__}): read as returned"
        return shape.answer(payload), (note,)
    if isinstance(output, BaseMessage):
        text = output.content if isinstance(output.content, str) else str(output.content)
        return shape.answer(text), ("response_format content",)
    return shape.answer(output), ()


def _guarded_answer(
    door: CitedAnswerRunnable,
    context: Context,
    shape: Any,
    record: PromptRecord,
    parsed: Answer,
    result: GuardResult,
    latency: float,
    notes: tuple[str, ...],
) -> GuardedAnswer:
    llm = door.llm
    model = str(getattr(llm, "model_name", None) or getattr(llm, "model", None) or type(llm).__name__)
    outcomes = result.claims if result.decision != "block" else None
    return GuardedAnswer(
        request_id=record.request_id,
        question=context.question,
        answer=parsed,
        result=result,
        span_policy=shape.schema.policy,
        requested_policy=door.policy,
        downgrade_reason=shape.schema.downgrade_reason,
        backend="langchain",
        model=model,
        template=f"{record.template.name}.v{record.template.version}",
        prompt_sha256=record.sha256,
        generation=GenerationStats(
            enforced=False,  # the framework's call: whether the server enforced the schema is not known here
            latency_s=latency,
            max_tokens=shape.schema.max_output_chars(),
            notes=(f"delivery: {door.delivery}", *notes),
        ),
        render_style=door.render,
        rendered=render_answer(parsed, result.report, context, style=door.render, outcomes=outcomes),
    )


class GuardRunnable(Runnable[dict[str, Any], Detection]):
    """Guard an existing chain's answer against its documents: detect-only mode, verdict out.

    Example:
        >>> chain = (RunnablePassthrough.assign(context=retriever).assign(answer=rag_chain) | GuardRunnable())
        >>> chain.invoke("How fast are cheetahs?").passing  # doctest: +SKIP

    Args:
        guard: The guard (None: the free checks; any finding blocks).
        first: The number of the first document (0, as the quoted-answer how-to numbers ``Source ID``).
        log: Where each record is appended.
        sinks: Where every detection goes (see :data:`~citelock.integrations.DetectSink`).
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        first: int = 0,
        log: PromptLog | None = None,
        sinks: Iterable[DetectSink] = (),
    ) -> None:
        self.detector = Detector(guard, log=log, sinks=sinks, first=first)

    def invoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> Detection:
        """Check ``{"answer", "context", "question"?}``; ``answer`` quoted (``citations``) or free text."""
        data = _mapping(input)
        sources = sources_of(_documents(data))
        if "answer" not in data:
            raise InputError(f"the input has no 'answer' (got keys {sorted(data)}); expected the chain's answer")
        answer = self._answer(data["answer"])
        return self.detector.run(
            answer if answer is not None else _text(data["answer"]), sources, _question(data, required=False)
        )

    async def ainvoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> Detection:
        """The async :meth:`invoke` (the guard runs in a worker thread)."""
        return await asyncio.to_thread(self.invoke, input, config)

    def _answer(self, given: Any) -> Answer | None:
        """A quoted answer (``answer`` + ``citations``) read as one claim; None for free text."""
        data = given.model_dump() if hasattr(given, "model_dump") else given
        if not isinstance(data, Mapping) or "citations" not in data:
            return None
        text = data.get("answer")
        if not isinstance(text, str):
            raise InputError(f"a quoted answer needs 'answer' text, got {type(text).__name__}")
        pairs = []
        for i, cite in enumerate(data["citations"] or ()):
            if not isinstance(cite, Mapping) or "source_id" not in cite:
                raise InputError(f"citation {i} must have a 'source_id' (and a 'quote'), got {cite!r:.80}")
            pairs.append((cite["source_id"], cite.get("quote")))
        return self.detector.quoted(text, pairs)


def _text(given: Any) -> str:
    if isinstance(given, BaseMessage):
        return given.content if isinstance(given.content, str) else str(given.content)
    if isinstance(given, str):
        return given
    raise InputError(
        f"'answer' is a {type(given).__name__}; expected free text, a message, or a quoted answer "
        "(answer + citations of source_id and quote)"
    )
