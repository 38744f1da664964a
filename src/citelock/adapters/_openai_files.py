"""OpenAI file-search annotations: ``file_citation`` annotations on ``output_text`` become citations.

Read from a Responses API response (``output[].content[].annotations``) or an Assistants message
(``content[].text.annotations`` with marker text such as ``【4:0†source】`` that is removed from the claim text).
A file citation names a file (``file_id``), not a passage, and carries no quote, so each :class:`Citation` has the
file's id (or the chunk id you map it to) and no ``span``; it belongs to the sentence its marker follows.
``url_citation`` annotations (web search) cite their URL over ``start_index..end_index``. ``file_path``
annotations point at generated files, not sources, and are not citations.

:func:`openai_file_search_record` rebuilds the prompt from the input messages and the ``file_search_call``
results (requested with ``include=["file_search_call.results"]``): one ``document`` message per file, holding
that file's retrieved passages in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from citelock.adapters._claims import Mark, answer_from_marks, document_message
from citelock.errors import InputError
from citelock.prompt import record_from_messages
from citelock.records import Answer, Chunk, Citation, Message, PromptRecord

__all__ = ["from_openai_file_search", "openai_file_search_record"]

_NOT_CITATIONS = frozenset({"file_path", "container_file_citation"})


def _texts(response: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """(text, annotations) of every output text part, in order."""
    out: list[tuple[str, list[Mapping[str, Any]]]] = []
    if isinstance(response.get("output"), list):  # Responses API
        for item in response["output"]:
            if item.get("type") != "message":
                continue
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    out.append((str(part.get("text", "")), list(part.get("annotations") or [])))
        return out
    if isinstance(response.get("content"), list):  # Assistants message
        for part in response["content"]:
            if part.get("type") == "text" and isinstance(part.get("text"), Mapping):
                out.append((str(part["text"].get("value", "")), list(part["text"].get("annotations") or [])))
        return out
    raise InputError("expected a Responses API response ('output') or an Assistants message ('content')")


def from_openai_file_search(response: Mapping[str, Any], *, file_ids: Mapping[str, str] | None = None) -> Answer:
    """Convert a response with file-search annotations into an :class:`Answer`.

    Args:
        response: A Responses API response or an Assistants API message (JSON).
        file_ids: Map OpenAI file ids to your chunk ids (default: the file id itself).

    Raises:
        InputError: an annotation of unknown type, without a file id, or with an index outside the text.
    """
    rename = dict(file_ids or {})
    plain: list[str] = []
    marks: list[Mark] = []
    length = 0
    for part, (text, notes) in enumerate(_texts(response)):
        cuts: list[tuple[int, int, str, bool]] = []  # (start, end, cited id, is a point marker)
        for n, note in enumerate(notes):
            where = f"text[{part}].annotations[{n}]"
            kind = str(note.get("type"))
            if kind in _NOT_CITATIONS:
                continue
            nested = note.get(kind) if isinstance(note.get(kind), Mapping) else note
            assert isinstance(nested, Mapping)
            if kind == "file_citation":
                file_id = nested.get("file_id")
                if not isinstance(file_id, str) or not file_id:
                    raise InputError(f"{where}: a file_citation without a file_id")
                if "start_index" in note:  # Assistants: the marker text occupies start..end and is removed
                    cuts.append((int(note["start_index"]), int(note["end_index"]), file_id, True))
                elif isinstance(note.get("index"), int):
                    cuts.append((note["index"], note["index"], file_id, True))
                else:
                    raise InputError(f"{where}: a file_citation without an integer index")
            elif kind == "url_citation":
                cuts.append((int(nested["start_index"]), int(nested["end_index"]), str(nested["url"]), False))
            else:
                raise InputError(f"{where}: unknown annotation type {kind!r}")
        pieces: list[str] = []
        removed = cursor = 0
        for start, end, cited, point in sorted(cuts, key=lambda c: (c[0], c[1])):
            if not 0 <= start <= end <= len(text):
                raise InputError(f"text[{part}]: annotation range {start}..{end} outside the text ({len(text)})")
            citation = Citation(chunk_id=rename.get(cited, cited))
            if point:
                if start < cursor:
                    raise InputError(f"text[{part}]: overlapping citation markers at {start}")
                pieces.append(text[cursor:start])
                at = length + start - removed
                marks.append(Mark(at, at, citation))
                removed += end - start
                cursor = end
            else:
                marks.append(Mark(length + start - removed, length + end - removed, citation))
        pieces.append(text[cursor:])
        kept = "".join(pieces)
        plain.append(kept)
        length += len(kept)
    return answer_from_marks("".join(plain), marks)


def openai_file_search_record(
    input_messages: Sequence[Mapping[str, Any]] | str,
    response: Mapping[str, Any],
    *,
    file_ids: Mapping[str, str] | None = None,
    request_id: str | None = None,
) -> PromptRecord:
    """A :class:`PromptRecord` from the input and the ``file_search_call`` results the model saw.

    Raises:
        InputError: the response has no file-search results (request them with
            ``include=["file_search_call.results"]``).
    """
    rename = dict(file_ids or {})
    passages: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for item in response.get("output") or []:
        if item.get("type") != "file_search_call":
            continue
        for result in item.get("results") or []:
            file_id = str(result["file_id"])
            passages.setdefault(file_id, []).append(str(result.get("text", "")))
            names.setdefault(file_id, str(result.get("filename") or ""))
    if not passages:
        raise InputError(
            'the response has no file_search_call results; request them with include=["file_search_call.results"]'
        )
    messages: list[Message] = []
    question: str | None = None
    if isinstance(input_messages, str):
        messages.append(Message(role="user", content=input_messages))
        question = input_messages
    else:
        for message in input_messages:
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
            messages.append(Message(role=str(message.get("role", "user")), content=str(content or "")))
            if message.get("role") == "user":
                question = str(content or "")
    chunks = []
    for file_id, texts in passages.items():
        body = "\n\n".join(texts)
        messages.append(document_message(body))
        chunks.append(Chunk(id=rename.get(file_id, file_id), text=body, source=names[file_id] or None))
    return record_from_messages(messages, chunks, question=question, request_id=request_id)
