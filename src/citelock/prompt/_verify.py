"""The derived check: a record that enters from outside has derived fields that its messages derive.

A record read from a file, a store row or a request (or made with ``model_copy(update=...)``) carries a sha256,
normalized copies, offset maps, statuses and placements that are claims about its messages.
:func:`derived_problem` recomputes them; :func:`verified_record` and :func:`load_record` refuse a record whose
fields disagree. A record this process built (:mod:`citelock.prompt._serialize`) is derived by construction and
not recomputed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from citelock.errors import CitelockError, InputError
from citelock.prompt._labels import mislabeled
from citelock.prompt._serialize import (
    _BUILT,
    _RECORD,
    _history_problem,
    _no_passage,
    _render,
    _within,
    messages_sha256,
)
from citelock.prompt._templates import PromptTemplate, load_template
from citelock.records import Message, PlacedChunk, Placement, PromptRecord, TemplateRef
from citelock.text import norm_offset, normalize, normalize_with_anchors, raw_offset

__all__ = ["derived_problem", "load_record", "verified_record"]


def derived_problem(record: PromptRecord) -> str | None:
    """What in ``record``'s derived fields disagrees with its messages as sent, or None when nothing does.

    The messages are the truth; everything else a check relies on is derived from them and recomputed here:
    ``sha256``, the ``normalized`` copy and the ``offset_maps`` of every message (compared exactly), and every
    placement (the chunk bodies' and the question's). A record edited anywhere but its messages (a
    ``normalized`` copy saying 1999 where the prompt said 1932) is refused instead of passing provenance for
    text never sent. The chunks' texts and ids are what the caller says was retrieved: input, not derived; but a
    placement counts only where the prompt as sent puts that chunk, which is decided two ways:

    - **A bundled template** (the record names a template of ``prompts/``, ``answer_structured.v2`` say): the
      prompt is rendered again from the record's question, chunks and history (the messages between the system
      prompt and the last user turn), as :func:`serialize` and :func:`with_history` render it, and the messages,
      normalized copies, offset maps, statuses and placements must be identical. A chunk renamed in ``chunks``
      (the prompt still says the old id), a chunk placed on the question, the system prompt, the template's own
      words or an earlier assistant turn, a record of some other prompt relabelled as the template's: each
      renders differently and is refused, naming the first difference. Nothing falls back to the structural
      checks; a template of the caller's own must carry a name of its own.
    - **Any other prompt** (``external``, a wrapped call's, an adapter's): its layout is the caller's, so the
      checks are structural. Each placement must be in range with raw and normalized offsets that map onto each
      other, the normalized text there equal to the chunk's text (``complete``) or a prefix of it (``truncated``);
      it must not be in an ``assistant`` turn (the model's own words are no retrieved passage), in a ``system``
      message that is a bundled template's system prompt (a record relabelled away from its template still shows
      it), nor inside the question's placement; and the ids the messages write nearest a body, if any of the
      record's ids are there, must include the chunk's own (:func:`~citelock.prompt._labels.mislabeled`: a renamed
      or swapped id is refused when another id of the record labels the body). What these cannot see: a chunk
      whose text is the caller's own system prompt or template words (or, in a bundled template's record
      relabelled as another, the template's words in the user turn: the template name is input), or a renamed
      chunk in a prompt that shows no header shape; another system message cannot be ruled out (a wrapped call
      adds its sources as one), nor can a missing id header (the framework adapters send passages without one).

    Cost: one normalization of every message (what building the record cost). A bundled template's record is
    rendered again instead of normalizing its chunk texts (about what :func:`serialize` costs); another record
    adds one search of the text between its bodies for its ids.
    """
    messages = record.messages
    if record.sha256 != messages_sha256(messages):
        return "sha256 is not the hash of the messages: the messages or the hash were edited"
    if len(record.normalized) != len(messages) or len(record.offset_maps) != len(messages):
        return (
            f"normalized and offset_maps must hold one entry per message ({len(messages)}), got "
            f"{len(record.normalized)} and {len(record.offset_maps)}"
        )
    seen: set[str] = set()
    for number, placed in enumerate(record.chunks):
        if placed.id in seen:
            return f"chunks[{number}]: chunk id {placed.id!r} appears twice"
        seen.add(placed.id)
    template = _bundled(record.template)
    if template is not None:
        return _rendered_problem(record, template)
    for index, message in enumerate(messages):
        text, anchors = normalize_with_anchors(message.content)
        problem = _normalized_problem(record, index, text, anchors)
        if problem is not None:
            return problem
    for number, placed in enumerate(record.chunks):
        problem = _chunk_problem(record, placed)
        if problem is not None:
            return f"chunks[{number}] ({placed.id!r}): {problem}"
    if record.question_placement is not None:
        problem = _placement_problem(record, record.question_placement)
        question = record.question
        if (
            problem is None
            and question is not None
            and _placed_text(record, record.question_placement) != normalize(question)
        ):
            problem = "the text there is not the question"
        if problem is not None:
            return f"question_placement: {problem}"
    labels = mislabeled(record)
    return None if not labels else labels[0]


def _normalized_problem(record: PromptRecord, index: int, text: str, anchors: Sequence[Any]) -> str | None:
    if record.normalized[index] != text:
        return f"normalized[{index}] is not the normalized text of messages[{index}]: it was edited"
    if tuple(map(tuple, record.offset_maps[index])) != tuple(map(tuple, anchors)):
        return f"offset_maps[{index}] is not the offset map of messages[{index}]: it was edited"
    return None


_TEMPLATE_NAME = re.compile(r"[A-Za-z0-9_]+")
_TEMPLATE_VERSION = re.compile(r"[0-9]+")


def _bundled(ref: TemplateRef) -> PromptTemplate | None:
    """The bundled template ``ref`` names, or None (``external``, ``wrap``, a caller's own)."""
    if not (_TEMPLATE_NAME.fullmatch(ref.name) and _TEMPLATE_VERSION.fullmatch(ref.version)):
        return None  # a name that is no file of prompts/ (and never a path to one)
    try:
        return load_template(ref.name, ref.version)
    except InputError:
        return None


def _rendered_problem(record: PromptRecord, template: PromptTemplate) -> str | None:
    """What differs between ``record`` and what ``template`` renders from its question, chunks and history."""
    name = f"{template.name}.v{template.version}"
    what = f"not what {name} renders from the record's chunks, question and history"
    messages = record.messages
    if record.question is None:
        return f"names template {name} but has no question to render it with"
    if len(messages) < 2:
        return f"names template {name} but has {len(messages)} message(s); it renders [system, *history, user]"
    history = messages[1:-1]
    problem = _history_problem(history)
    if problem is not None:
        return f"names template {name}, which renders [system, *history, user]: {problem}"
    try:
        chunks = [pc.chunk for pc in record.chunks]
        (system, user), norm, placements, question_at = _render(
            template, record.question, chunks, user_at=len(messages) - 1
        )
    except CitelockError as exc:
        return f"names template {name}, which cannot render it: {exc}"
    for index, (message, expected) in enumerate(zip(messages, (system, *history, user), strict=True)):
        if message != expected:
            return (
                f"messages[{index}] is {what} (chunk ids or texts, the question or the history were edited, or "
                f"another prompt was labelled {name}): {_difference(message, expected)}"
            )
    last = len(messages) - 1
    for index, message in enumerate(messages):
        if index in (0, last):
            text, anchors = norm.texts[min(index, 1)], norm.anchors[min(index, 1)]
        else:
            text, anchors = normalize_with_anchors(message.content)
        problem = _normalized_problem(record, index, text, anchors)
        if problem is not None:
            return problem
    for number, (placed, expected_at) in enumerate(zip(record.chunks, placements, strict=True)):
        if placed.status != "complete" or placed.placement != expected_at:
            return (
                f"chunks[{number}] ({placed.id!r}): {placed.status} at {_where(placed.placement)} is {what}: "
                f"expected complete at {_where(expected_at)}, its body in the sources"
            )
    if record.question_placement != question_at:
        return f"question_placement {_where(record.question_placement)} is {what}: expected {_where(question_at)}"
    return None


def _where(p: Placement | None) -> str:
    if p is None:
        return "no placement"
    return f"messages[{p.message}] {p.start}-{p.end} (normalized {p.norm_start}-{p.norm_end})"


def _difference(message: Message, expected: Message) -> str:
    """Where ``message`` first differs from ``expected``, with a few characters of each from there."""
    if message.role != expected.role:
        return f"role {message.role!r}, expected {expected.role!r}"
    got, want = message.content, expected.content
    at = next((k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    shown = max(0, at - 24)
    return f"at character {at} it says {got[shown : at + 48]!r}, expected {want[shown : at + 48]!r}"


def _chunk_problem(record: PromptRecord, placed: PlacedChunk) -> str | None:
    p = placed.placement
    if placed.status == "missing":
        return None  # not in the prompt: never evidence, whatever its placement says
    if p is None:
        return f"a {placed.status} chunk without a placement"
    problem = _placement_problem(record, p)
    if problem is not None:
        return problem
    what = _no_passage(record.messages[p.message])
    if what is not None:
        return f"it is placed on messages[{p.message}], {what} (expected a placement in the sources the prompt gave)"
    q = record.question_placement
    if q is not None and q.message == p.message and _within(p.norm_start, p.norm_end, q.norm_start, q.norm_end):
        return "it is placed on the question's text, which is no retrieved passage (expected its body in the sources)"
    there, full = _placed_text(record, p), normalize(placed.chunk.text)
    if placed.status == "complete" and there != full:
        return "the prompt text at its placement is not the chunk's text (placement or text edited)"
    if placed.status == "truncated" and (there == full or not full.startswith(there)):
        return (
            "the prompt text at its placement is not a cut-short prefix of the chunk's text "
            "(placement, status or text edited)"
        )
    return None


def _placement_problem(record: PromptRecord, p: Placement) -> str | None:
    if not 0 <= p.message < len(record.messages):
        return f"message {p.message} does not exist (the prompt has {len(record.messages)})"
    raw, norm = record.messages[p.message].content, record.normalized[p.message]
    if not (0 <= p.start <= p.end <= len(raw) and 0 <= p.norm_start <= p.norm_end <= len(norm)):
        return f"offsets {p.start}-{p.end} (normalized {p.norm_start}-{p.norm_end}) are outside message {p.message}"
    anchors = record.offset_maps[p.message]
    for raw_at, norm_at in ((p.start, p.norm_start), (p.end, p.norm_end)):
        if raw_offset(anchors, norm_at) != raw_at and norm_offset(anchors, len(norm), raw_at) != norm_at:
            return f"raw offset {raw_at} and normalized offset {norm_at} are not the same place in the message"
    return None


def _placed_text(record: PromptRecord, p: Placement) -> str:
    return normalize(record.normalized[p.message][p.norm_start : p.norm_end])


def verified_record(record: PromptRecord) -> PromptRecord:
    """``record`` itself once its derived fields agree with its messages (see :func:`derived_problem`).

    Raises:
        InputError: a derived field disagrees with the messages, naming which.
    """
    built = _BUILT.get(id(record))
    if built is not None and built() is record:
        return record  # built here from its messages: derived by construction
    problem = derived_problem(record)
    if problem is not None:
        raise InputError(f"prompt record {record.request_id!r}: {problem}")
    return record


def load_record(data: Mapping[str, Any] | str | bytes) -> PromptRecord:
    """A :class:`PromptRecord` from outside (a file, a database row, a message): validated, then verified.

    The one way a stored or received record enters: its shape is validated and its derived fields are
    checked against its messages (:func:`derived_problem`), so no command trusts a ``normalized`` copy, an
    offset map or a placement that the messages do not give.

    Args:
        data: The record as a JSON object (mapping) or JSON text.

    Raises:
        pydantic.ValidationError: not a prompt record.
        InputError: a derived field disagrees with the messages.
    """
    record = _RECORD.validate_json(data) if isinstance(data, str | bytes) else _RECORD.validate_python(data)
    return verified_record(record)
