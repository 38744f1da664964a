"""Cohere chat citations: answer spans (``start``/``end`` in the answer text) with the documents they rest on.

API v2 (``message.content`` + ``message.citations[].sources[]``) and v1 (``text`` + ``citations[].document_ids``)
are both read. Cohere cites *answer* spans, not document quotes, so each :class:`Citation` carries the document
id and no ``span``: guard ① then checks the id against the prompt, and the support judge checks the claim
against the cited document. Offsets are checked against the text: a citation whose ``text`` does not match
``answer[start:end]`` is an error, never silently re-anchored. Citations of ``THINKING_CONTENT`` and ``PLAN``
refer to text that is not the answer and are not claims' citations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from citelock.adapters._claims import Mark, answer_from_marks, document_message
from citelock.errors import InputError
from citelock.prompt import record_from_messages
from citelock.records import Answer, Chunk, Citation, Message, PromptRecord

__all__ = ["cohere_record", "from_cohere"]

_NOT_ANSWER = frozenset({"THINKING_CONTENT", "PLAN"})


def _ids_v2(citation: Mapping[str, Any], where: str) -> list[str]:
    out = []
    for n, source in enumerate(citation.get("sources") or []):
        source_id = source.get("id") if isinstance(source, Mapping) else None
        if not isinstance(source_id, str) or not source_id:
            raise InputError(f"{where}.sources[{n}]: a source without an id")
        out.append(source_id)
    return out


def from_cohere(response: Mapping[str, Any], *, document_ids: Mapping[str, str] | None = None) -> Answer:
    """Convert a Cohere chat response (v2 or v1) into an :class:`Answer`.

    Args:
        response: The response JSON.
        document_ids: Map Cohere's document ids (e.g. the ``doc:0`` it assigns) to your chunk ids.

    Raises:
        InputError: no answer text, offsets outside or disagreeing with the text, sources without ids.
    """
    rename = dict(document_ids or {})
    if isinstance(response.get("message"), Mapping):
        message = response["message"]
        items = [c for c in message.get("content") or [] if isinstance(c, Mapping) and c.get("type") == "text"]
        texts = [str(c.get("text", "")) for c in items]
        offsets = [sum(len(t) for t in texts[:i]) for i in range(len(texts))]
        text = "".join(texts)
        raw_citations = message.get("citations") or []
        version = "v2"
    elif isinstance(response.get("text"), str):
        text, offsets, raw_citations, version = response["text"], [0], response.get("citations") or [], "v1"
    else:
        raise InputError("expected a Cohere chat response: {'message': {'content', 'citations'}} or {'text'}")
    marks: list[Mark] = []
    for n, raw in enumerate(raw_citations):
        where = f"citations[{n}]"
        if raw.get("type") in _NOT_ANSWER:
            continue
        start, end = raw.get("start"), raw.get("end")
        if not isinstance(start, int) or not isinstance(end, int):
            raise InputError(f"{where}: start and end must be integers, got {start!r} and {end!r}")
        if version == "v2":
            index = raw.get("content_index") or 0
            if not 0 <= index < len(offsets):
                raise InputError(f"{where}: content_index {index} but the message has {len(offsets)} text items")
            start, end = start + offsets[index], end + offsets[index]
            ids = _ids_v2(raw, where)
        else:
            ids = [str(i) for i in raw.get("document_ids") or []]
        quoted = raw.get("text")
        if isinstance(quoted, str) and text[start:end] != quoted:
            raise InputError(
                f"{where}: text {quoted!r} does not match the answer at {start}..{end} ({text[start:end]!r})"
            )
        if not ids:
            raise InputError(f"{where}: a citation with no source documents")
        for doc_id in ids:
            marks.append(Mark(start, end, Citation(chunk_id=rename.get(doc_id, doc_id))))
    return answer_from_marks(text, marks)


def _document(raw: Any, index: int, where: str) -> Chunk:
    if isinstance(raw, str):
        return Chunk(id=f"doc:{index}", text=raw)
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: a document must be a string or an object")
    data = raw.get("data", raw)
    text = data.get("text") if isinstance(data, Mapping) else None
    if not isinstance(text, str):
        text = data.get("snippet") if isinstance(data, Mapping) else None
    if not isinstance(text, str):
        raise InputError(f"{where}: a document without a 'text' or 'snippet' field")
    title = data.get("title") if isinstance(data, Mapping) else None
    return Chunk(id=str(raw.get("id") or f"doc:{index}"), text=text, source=title if isinstance(title, str) else None)


def cohere_record(request: Mapping[str, Any], *, request_id: str | None = None) -> PromptRecord:
    """A :class:`PromptRecord` for a Cohere v2 chat request with ``documents`` (one ``document`` message each).

    Documents without an id get Cohere's own ``doc:N``.
    """
    chunks = [_document(d, n, f"documents[{n}]") for n, d in enumerate(request.get("documents") or [])]
    if not chunks:
        raise InputError("the request has no documents; nothing for citations to point at")
    messages: list[Message] = []
    question: str | None = None
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(c.get("text", "") for c in content if isinstance(c, Mapping))
        messages.append(Message(role=message.get("role", "user"), content=str(content or "")))
        if message.get("role") == "user":
            question = str(content or "")
    messages.extend(document_message(c.text) for c in chunks)
    return record_from_messages(messages, chunks, question=question, request_id=request_id)
