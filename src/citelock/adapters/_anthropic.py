"""Anthropic Citations: a Messages API response whose text blocks carry ``citations`` becomes an :class:`Answer`.

Each citation names a document by position (``document_index``; ``search_result_index`` or ``source`` for search
results; ``url`` for web search results) and quotes ``cited_text``, located by ``char_location`` (characters),
``page_location`` (PDF pages) or ``content_block_location`` (custom content blocks). The quote becomes the
citation's ``span`` and the document's id its ``chunk_id``, so guard ① checks the provider's quotes against the
documents exactly as it checks any answer. The text blocks are joined and split into sentences; a sentence
carries the citations of every block it overlaps.

:func:`anthropic_record` flattens the request's documents into messages of role ``document`` so the prompt can be
logged and guarded; base64 PDFs cannot be read here: pass their extracted text with ``document_texts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from citelock.adapters._claims import Mark, answer_from_marks, document_message
from citelock.errors import InputError
from citelock.prompt import record_from_messages
from citelock.records import Answer, Chunk, Citation, Message, PromptRecord

__all__ = ["anthropic_record", "from_anthropic"]

_SKIPPED_BLOCKS = frozenset(
    {"thinking", "redacted_thinking", "tool_use", "server_tool_use", "web_search_tool_result", "tool_result"}
)
_DOCUMENT_CITATIONS = frozenset({"char_location", "page_location", "content_block_location"})


def _document_id(index: int, document_ids: Sequence[str] | None) -> str:
    if document_ids is None:
        return f"doc-{index}"
    if not 0 <= index < len(document_ids):
        raise InputError(f"citation names document_index {index}, but only {len(document_ids)} document ids were given")
    return document_ids[index]


def _citation(raw: Mapping[str, Any], document_ids: Sequence[str] | None, where: str) -> Citation:
    kind = raw.get("type")
    quote = raw.get("cited_text")
    span = quote if isinstance(quote, str) and quote.strip() else None
    if kind in _DOCUMENT_CITATIONS:
        index = raw.get("document_index")
        if not isinstance(index, int):
            raise InputError(f"{where}: a {kind} citation without an integer document_index")
        return Citation(chunk_id=_document_id(index, document_ids), span=span)
    if kind == "search_result_location":
        source = raw.get("source")
        if not isinstance(source, str) or not source:
            raise InputError(f"{where}: a search_result_location citation without a source")
        return Citation(chunk_id=source, span=span)
    if kind == "web_search_result_location":
        url = raw.get("url")
        if not isinstance(url, str) or not url:
            raise InputError(f"{where}: a web_search_result_location citation without a url")
        return Citation(chunk_id=url, span=span)
    raise InputError(
        f"{where}: unknown citation type {kind!r}; expected one of "
        f"{sorted(_DOCUMENT_CITATIONS | {'search_result_location', 'web_search_result_location'})}"
    )


def from_anthropic(response: Mapping[str, Any], *, document_ids: Sequence[str] | None = None) -> Answer:
    """Convert a Messages API response (or its ``content`` list) with citations into an :class:`Answer`.

    Args:
        response: The response JSON (``{"content": [...]}``) or the content list itself.
        document_ids: The chunk id of each document, in request order (default ``doc-0``, ``doc-1``...).

    Raises:
        InputError: a block or citation of an unknown type, a document index out of range, no text.
    """
    content = response.get("content") if isinstance(response, Mapping) else response
    if not isinstance(content, list):
        raise InputError("expected an Anthropic response with a 'content' list of blocks")
    parts: list[str] = []
    marks: list[Mark] = []
    length = 0
    for number, block in enumerate(content):
        where = f"content[{number}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in _SKIPPED_BLOCKS:
            continue
        if kind != "text":
            raise InputError(f"{where}: unknown content block type {kind!r}; expected 'text'")
        text = block.get("text")
        if not isinstance(text, str):
            raise InputError(f"{where}: a text block without a 'text' string")
        for n, raw in enumerate(block.get("citations") or []):
            citation = _citation(raw, document_ids, f"{where}.citations[{n}]")
            marks.append(Mark(length, length + len(text), citation))
        parts.append(text)
        length += len(text)
    return answer_from_marks("".join(parts), marks)


def _document_text(block: Mapping[str, Any], where: str) -> str:
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise InputError(f"{where}: a document block without a source")
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return str(source["data"])
    if source.get("type") == "content" and isinstance(source.get("content"), list):
        texts = [b.get("text", "") for b in source["content"] if isinstance(b, Mapping) and b.get("type") == "text"]
        return "\n".join(texts)
    if source.get("type") == "content" and isinstance(source.get("content"), str):
        return str(source["content"])
    raise InputError(
        f"{where}: a {source.get('type')!r} document source cannot be read here; pass its extracted text in "
        "document_texts"
    )


def anthropic_record(
    request: Mapping[str, Any],
    *,
    document_ids: Sequence[str] | None = None,
    document_texts: Mapping[int, str] | None = None,
    request_id: str | None = None,
) -> PromptRecord:
    """A :class:`PromptRecord` for an Anthropic request with document blocks (flattened; see the module doc).

    Args:
        request: The request JSON (``system``, ``messages`` with ``document`` and ``text`` blocks).
        document_ids: The chunk id of each document, in request order (default ``doc-0``...).
        document_texts: Text for documents that cannot be read here (PDF), by document index.
        request_id: The record's request id.
    """
    messages: list[Message] = []
    chunks: list[Chunk] = []
    system = request.get("system")
    if isinstance(system, str) and system:
        messages.append(Message(role="system", content=system))
    elif isinstance(system, list):
        messages.extend(Message(role="system", content=b["text"]) for b in system if b.get("type") == "text")
    question: str | None = None
    for m, message in enumerate(request.get("messages") or []):
        role, content = message.get("role", "user"), message.get("content")
        if isinstance(content, str):
            messages.append(Message(role=role, content=content))
            question = content if role == "user" else question
            continue
        for b, block in enumerate(content or []):
            kind = block.get("type")
            if kind == "text":
                messages.append(Message(role=role, content=block["text"]))
                question = block["text"] if role == "user" else question
            elif kind == "document":
                index = len(chunks)
                text = (document_texts or {}).get(index)
                if text is None:
                    text = _document_text(block, f"messages[{m}].content[{b}]")
                messages.append(document_message(text))
                chunks.append(Chunk(id=_document_id(index, document_ids), text=text, source=block.get("title") or None))
    if not chunks:
        raise InputError("the request has no document blocks; nothing for citations to point at")
    return record_from_messages(messages, chunks, question=question, request_id=request_id)
