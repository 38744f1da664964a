"""``wrap``'s prepare locates the chunks once when the caller's messages hold none of them.

The usual gateway call sends the question and ``chunks=``: every chunk goes into citelock's own message. Then
only the sent messages are located (one record build), and what comes out (the messages sent, their record, the
index of citelock's message, the ranking and its order) is what the two-step path (locate in the caller's
messages, rank, add citelock's message, locate again) gives. Messages that hold a chunk's id or a prefix of its
body take the two-step path.
"""

from __future__ import annotations

from typing import Any

import pytest

from citelock._request import rank
from citelock._wrap import _request
from citelock.errors import InputError
from citelock.records import Chunk

CHUNKS = (
    Chunk(id="p-2", text="The league was founded in 1920. It has thirty-two member clubs across the country."),
    Chunk(
        id="p-1",
        text="The final was played on February 7, 2016, at Harbor Stadium in Santa Clara, California. "
        "The home side defeated the visitors 24 to 10 to earn their third title.",
    ),
)
QUESTION = "When was the final played?"


def _ranker(context: Any) -> Any:
    return rank(context, "quote", None, "high")


def _summary(placed: tuple[Any, ...]) -> tuple[Any, ...]:
    sent, record, ours, ranked, order = placed
    chunks = [(pc.id, pc.status, pc.placement) for pc in record.chunks]
    admitted = ranked.admitted if ranked is not None else None
    return [dict(m) for m in sent], record.messages, chunks, ours, admitted, order


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": QUESTION}],
        [{"role": "system", "content": "Answer from the sources."}, {"role": "user", "content": QUESTION}],
    ],
)
def test_one_build_gives_what_two_give(messages: list[dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    assert _request._hold_none(messages, CHUNKS)
    once = _summary(_request._placed(messages, CHUNKS, QUESTION, _ranker))
    assert once[3] is not None and once[5] == ["p-1", "p-2"]  # citelock's message, the answer's chunk first
    monkeypatch.setattr(_request, "_hold_none", lambda _m, _c: False)
    assert _summary(_request._placed(messages, CHUNKS, QUESTION, _ranker)) == once


def test_messages_that_hold_a_prefix_are_located_first() -> None:
    messages = [
        {"role": "system", "content": "Sources: The league was founded in 1920."},  # a prefix long enough to count
        {"role": "user", "content": QUESTION},
    ]
    assert not _request._hold_none(messages, CHUNKS)
    sent, record, ours, _ranked, _order = _request._placed(messages, CHUNKS, QUESTION, _ranker)
    statuses = {pc.id: pc.status for pc in record.chunks}
    assert statuses == {"p-2": "truncated", "p-1": "complete"} and ours == 1 and len(sent) == 3


def test_messages_that_name_a_chunk_are_still_refused() -> None:
    """An id header over other text contradicts the chunk: found only by locating in the caller's messages."""
    messages = [
        {"role": "system", "content": "Answer from the sources; [p-1] is the schedule."},
        {"role": "user", "content": QUESTION},
    ]
    assert not _request._hold_none(messages, CHUNKS)
    with pytest.raises(InputError, match="its id is in the messages but its text is not"):
        _request._placed(messages, CHUNKS, QUESTION, _ranker)
