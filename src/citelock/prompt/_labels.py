"""Labels: whether the id the prompt writes beside a chunk's body is that chunk's own.

A prompt assembled elsewhere labels its passages its own way (``[c-1] ...``, ``<source id="c-1">...``,
``... (c-1)``); the record says which chunk each located body is. When the ids written nearest a body are all
other chunks' ids, the prompt and the record disagree about what the body is: a wrapped call refuses such
messages before sending, and a record read back with such a placement (a chunk renamed in its ``chunks`` list,
two ids swapped) is refused by the derived check.
"""

from __future__ import annotations

import re

from citelock.records import PlacedChunk, PromptRecord

__all__ = ["mislabeled"]

_ID_CHARS = r"[\w-]"


def mislabeled(record: PromptRecord) -> list[str]:
    """The chunks whose body the record's messages put under another chunk's id, one sentence each.

    A body whose nearest id before it (a header: ``[c-1] ...``, ``<source id="c-1">``) and nearest id after it
    (a trailer: ``... (c-1)``), looking no further than the neighbouring bodies and only for the ids the record
    names, are both other chunks' ids is labeled as another chunk. Bodies that overlap (two chunks of equal
    text located together, one chunk's text inside another's) are one body: it is labeled right when any of
    their ids is beside it. A body with no id of the record beside it (a prompt that writes no ids, a passage
    in a message of its own) is not judged; an id of digits only is an id only where it reads as a header.
    Empty placements (a chunk of which only the id header survived) are not bodies, and their ids label no other
    body.

    Cost: one search of the text between bodies for the record's ids.
    """
    header_only = {pc.id for pc in record.chunks if pc.placement is not None and pc.placement.start == pc.placement.end}
    ids = [pc.id for pc in record.chunks if pc.id not in header_only]  # a cut chunk's header labels its own body
    if not ids:
        return []
    pattern = re.compile(rf"(?<!{_ID_CHARS})(?:{'|'.join(map(re.escape, ids))})(?!{_ID_CHARS})")
    per_message: dict[int, list[tuple[int, int, PlacedChunk]]] = {}
    for pc in record.chunks:
        p = pc.placement
        if pc.status == "missing" or p is None or p.start == p.end:
            continue
        per_message.setdefault(p.message, []).append((p.start, p.end, pc))
    problems = []
    for message, placed in per_message.items():
        if not 0 <= message < len(record.messages):
            continue
        text = record.messages[message].content
        placed.sort(key=lambda item: item[0])
        clusters: list[tuple[int, int, list[PlacedChunk]]] = []  # overlapping bodies: one body, judged once
        for start, end, pc in placed:
            if clusters and start < clusters[-1][1]:
                first, last, members = clusters[-1]
                clusters[-1] = (first, max(last, end), [*members, pc])
            else:
                clusters.append((start, end, [pc]))
        for k, (start, end, members) in enumerate(clusters):
            before = _labels(pattern, text, clusters[k - 1][1] if k else 0, start)
            after = _labels(pattern, text, end, clusters[k + 1][0] if k + 1 < len(clusters) else len(text))
            near = [*before[-1:], *after[:1]]
            if near and not {pc.id for pc in members}.intersection(near):
                problems += [f"chunk {pc.id!r}: the messages put its text under id {near[0]!r}" for pc in members]
    return problems


def _labels(pattern: re.Pattern[str], text: str, start: int, end: int) -> list[str]:
    """The record's ids written in ``text[start:end]``, in order.

    An id of digits only counts where it touches a bracket, quote, ``#``, ``:`` or ``=`` (``[3]``, ``id="3"``),
    as a header does, not as a number in the prose.
    """
    out = []
    # One character past ``end`` is searched so the id's right edge is judged on the text (``7body`` is no id).
    for match in pattern.finditer(text, start, end + 1):
        if match.end() > end:
            break
        found = match.group()
        if found.isdigit():
            around = text[max(0, match.start() - 1) : match.start()] + text[match.end() : match.end() + 1]
            if not any(ch in "[]()\"'#:=" for ch in around):
                continue
        out.append(found)
    return out
