"""The per-request citation model for a call the caller makes itself (instructor, ``beta.chat.completions.parse``).

:func:`answer_model` builds, from this turn's chunks, the pydantic model and the JSON Schema of a cited answer:
``chunk_id`` is a ``Literal`` of these chunks' ids; under ``sentence`` each citation's ``span`` is a ``Literal``
of its chunk's sentences. The schema is fitted to the server's limits (downgrade recorded), its free strings
shown the way the server enforces them. After the call, :meth:`AnswerModel.checkable` turns the parsed object and
the messages as sent into the ``(record, answer)`` that :func:`citelock.check` and :meth:`citelock.Guard.run`
take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from citelock.constraint._model import build_model
from citelock.constraint._policy import SpanPolicy
from citelock.constraint._schema import CitationSchema, SchemaOptions, fit_schema
from citelock.errors import InputError
from citelock.prompt._assemble import coerce_chunks
from citelock.prompt._parse import parse_answer
from citelock.prompt._serialize import record_from_messages
from citelock.records import Answer, Chunk, Context, Message, PromptRecord, TemplateRef
from citelock.runtime._profiles import ServerProfile, get_profile

__all__ = ["AnswerModel", "answer_model"]

SCHEMA_NAME = "cited_answer"


@dataclass(frozen=True)
class AnswerModel:
    """A cited answer's shape for one turn's chunks, for a structured-output call of the caller's own.

    Attributes:
        model: The pydantic model: instructor's ``response_model=`` or ``beta.chat.completions.parse``'s
            ``response_format=``.
        json_schema: Its JSON Schema as the server takes it (for ``response_format`` by hand).
        schema: The citation schema it was built from (policy, downgrade reason, ids).
        chunks: This turn's chunks (the evidence the guard checks against).
        server: The server profile the model and schema were fitted to.
    """

    model: type[BaseModel]
    json_schema: dict[str, Any]
    schema: CitationSchema
    chunks: tuple[Chunk, ...]
    server: ServerProfile
    _template: TemplateRef = field(default=TemplateRef(name="external", version="0"), repr=False)

    @property
    def context(self) -> Context:
        """This turn's chunks as a :class:`~citelock.Context` (what :func:`citelock.render_answer` takes)."""
        return Context(question="", chunks=self.chunks)

    @property
    def response_format(self) -> dict[str, Any]:
        """``response_format`` carrying :attr:`json_schema` the way the server takes one.

        Strict ``json_schema`` (OpenAI Structured Outputs, vLLM, SGLang); ``json_object`` with a ``schema`` on
        llama-cpp-python, which refuses ``json_schema`` (so ``beta.chat.completions.parse``, which always sends
        ``json_schema``, does not work there: send this with ``chat.completions.create`` and validate the content
        with :attr:`model`).
        """
        rendered = self.server.delivery().render(self.json_schema, SCHEMA_NAME).get("response_format")
        if isinstance(rendered, dict):
            return rendered
        return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": self.json_schema}}

    def record(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> PromptRecord:
        """The prompt record of ``messages`` exactly as sent, this turn's chunks located in them (log it).

        Raises:
            InputError: no messages or a malformed one.
        """
        meta = {"span_policy": self.schema.policy, **dict(metadata or {})}
        return record_from_messages(
            messages, self.chunks, request_id=request_id, template=self._template, metadata=meta
        )

    def answer(self, parsed: BaseModel | Mapping[str, Any] | str) -> Answer:
        """The :class:`~citelock.Answer` a parsed object (an instance of :attr:`model`), a dict or JSON holds.

        Raises:
            InputError: ``parsed`` is not a cited answer (a :class:`~citelock.ParseError`).
        """
        if isinstance(parsed, BaseModel):
            if not isinstance(parsed, self.model):
                raise InputError(
                    f"parsed is a {type(parsed).__name__}; expected an instance of this AnswerModel's model "
                    "(the object instructor or parse() returned for response_model=/response_format=model)"
                )
            parsed = parsed.model_dump(mode="json")
        return parse_answer(parsed)

    def checkable(
        self,
        parsed: BaseModel | Mapping[str, Any] | str,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[PromptRecord, Answer]:
        """``(record, answer)`` for :func:`citelock.check` / :meth:`citelock.Guard.run` after your own call.

        Example:
            >>> record, answer = shape.checkable(completion.choices[0].message.parsed, messages)  # doctest: +SKIP
            >>> citelock.check(record, answer).ok  # doctest: +SKIP

        Raises:
            InputError: malformed messages, or ``parsed`` is not a cited answer.
        """
        return self.record(messages, request_id=request_id, metadata=metadata), self.answer(parsed)


def answer_model(
    chunks: Iterable[Chunk | Mapping[str, Any]],
    *,
    policy: SpanPolicy = "sentence",
    server: str | ServerProfile = "openai",
    options: SchemaOptions | None = None,
) -> AnswerModel:
    """The per-request citation model for this turn's chunks, for instructor or ``beta.chat.completions.parse``.

    Example:
        >>> shape = citelock.answer_model(chunks, policy="sentence")  # doctest: +SKIP
        >>> completion = client.beta.chat.completions.parse(
        ...     model="gpt-4o-mini", messages=messages, response_format=shape.model
        ... )  # doctest: +SKIP
        >>> citelock.check(*shape.checkable(completion.choices[0].message.parsed, messages))  # doctest: +SKIP

    Args:
        chunks: The passages retrieved for this turn (records or dicts with ``id`` and ``text``).
        policy: Requested span policy. A JSON Schema enforces ``sentence`` and ``id`` exactly; ``substring``
            (the library's default elsewhere) and ``quote`` need a grammar, so they are downgraded
            (``schema.downgrade_reason`` says why); the default is therefore ``sentence``, what ``substring``
            becomes on a JSON-Schema call, without a downgrade notice on every request.
        server: The server kind the model is sent to (its JSON Schema limits and keywords), or a profile.
        options: Bounds of the answer shape.

    Raises:
        InputError: no chunks, malformed chunks, duplicate ids.
        UsageError: an unknown server kind or policy, or no policy fits the server's limits.
    """
    given = coerce_chunks(chunks)
    if not given:
        raise InputError("chunks is empty; expected the passages retrieved for this turn")
    profile = get_profile(server)
    context = Context(question="", chunks=given)
    schema = fit_schema(context, policy, profile.limits, options)
    model = build_model(schema, string_schema=lambda shown: profile.adapt(shown)[0])
    json_schema, _ = profile.adapt(schema.json_schema)
    return AnswerModel(model=model, json_schema=json_schema, schema=schema, chunks=given, server=profile)
