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

__all__ = ["HEADER_GAP", "mislabeled", "mislabels"]

_ID_CHARS = r"[\w-]"


def mislabeled(record: PromptRecord) -> list[str]:
    """The chunks whose body the messages put under another chunk's id, one sentence each (:func:`mislabels`)."""
    return [
        f"chunk {chunk_id!r}: the messages put its text under id {label!r}" for chunk_id, label in mislabels(record)
    ]


def mislabels(record: PromptRecord) -> list[tuple[str, str]]:
    """The chunks whose body the record's messages put under another chunk's id, as (chunk id, that id) pairs.

    A body whose nearest id before it (a header: ``[c-1] ...``, ``<source id="c-1">``) and nearest id after it
    (a trailer: ``... (c-1)``), looking no further than the neighbouring bodies and only for the ids the record
    names, are both other chunks' ids is labeled as another chunk. Where the message's bodies mostly follow a
    header of their own id (at most a few characters before the body), the header is decisive: the id right
    before a body is its label (an id right after it is the next body's header); likewise a trailer where they
    mostly precede one. Bodies that overlap (two chunks of equal
    text located together, one chunk's text inside another's) are one body: it is labeled right when any of
    their ids is beside it. A body with no id of the record beside it (a prompt that writes no ids, a passage
    in a message of its own) is judged only by the shape of the message's headers: when its other bodies follow
    a header of their own id (``[c-1] ``), a body after a header of that shape with an id the record does not
    name (the chunk renamed in the record) is labeled as that id. An id of digits only is an id only where it
    reads as a header.
    Empty placements (a chunk of which only the id header survived) are not bodies, and their ids label no other
    body.

    Cost: one search of the text between bodies for the record's ids. A prompt of a single body with no other
    id beside it can still be renamed unseen: nothing in it shows how it writes a header.
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
    problems: list[tuple[str, str]] = []
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
        judged = []
        shapes: set[tuple[str, str]] = set()  # (the character before an own id header, what follows it)
        headers = trailers = 0  # bodies right after / right before an id of their own
        for k, (start, end, members) in enumerate(clusters):
            gap = clusters[k - 1][1] if k else 0
            before = _labels(pattern, text, gap, start)
            after = _labels(pattern, text, end, clusters[k + 1][0] if k + 1 < len(clusters) else len(text))
            own = {pc.id for pc in members}
            header = before[-1] if before and start - before[-1][2] <= _MAX_SUFFIX else None
            trailer = after[0] if after and after[0][1] - end <= _MAX_SUFFIX else None
            if header is not None and header[0] in own:
                headers += 1
                if header[1] > 0:
                    shapes.add((text[header[1] - 1], text[header[2] : start]))
            trailers += trailer is not None and trailer[0] in own
            near = [found for found, _, _ in [*before[-1:], *after[:1]]]
            judged.append((gap, start, members, near, header, trailer))
        for gap, start, members, near, header, trailer in judged:
            label: list[str] = []
            if headers > trailers:  # the message writes headers: the one right before a body is its label
                label = [header[0]] if header is not None else _unknown_header(text, gap, start, shapes)
            elif trailers > headers and trailer is not None:
                label = [trailer[0]]
            label = label or near or _unknown_header(text, gap, start, shapes)
            if label and not {pc.id for pc in members}.intersection(label):
                problems += [(pc.id, label[0]) for pc in members]
    return problems


HEADER_GAP = 8
"""At most this many characters between an id header and its body (``] ``, ``">``) count as the header's shape."""
_MAX_SUFFIX = HEADER_GAP
_TOKEN = re.compile(rf"{_ID_CHARS}+")


def _unknown_header(text: str, gap: int, start: int, shapes: set[tuple[str, str]]) -> list[str]:
    """The id a header of the message's own shape writes right before a body, if that id is no chunk's.

    The other bodies of the message show how it writes a header (``[c-1] `` before a body: ``[`` then the id,
    then ``] ``); a body right after a header of that shape whose id names no chunk of the record (a chunk
    renamed in the record, the prompt still saying the old id) is labeled as that id.
    """
    head = text[gap:start]
    for opener, suffix in shapes:
        if not head.endswith(suffix):
            continue
        token_end = len(head) - len(suffix)
        token_start = head.rfind(opener, 0, token_end) + 1
        if token_start > 0 and _TOKEN.fullmatch(head, token_start, token_end):
            return [head[token_start:token_end]]
    return []


def _labels(pattern: re.Pattern[str], text: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """The record's ids written in ``text[start:end]``, in order, with where each is.

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
        out.append((found, match.start(), match.end()))
    return out
