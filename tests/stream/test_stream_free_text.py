"""The free-text stream reader: a claim it reports complete is the claim ``parse_answer`` finds in the whole text.

The markers may come after the sentence's period (``... in 1932. [c-1] It spans ...``): the claim is then not
complete until the marker is closed and the next sentence has begun. Each text is fed one character at a time and
in the real model's token pieces, and every claim reported done at any point must equal the final parse's claim
at that index, citations included.
"""

from __future__ import annotations

from typing import Any

import pytest

import citelock.stream._incremental as incremental
from citelock import FakeBackend, parse_answer
from citelock.stream._incremental import FreeTextReader

TEXTS = [
    "The Aurora bridge opened in 1932. [c-1] It spans 880 meters across the bay.",  # SmolLM2's own output
    "The Aurora bridge opened in 1932. [c-1][c-2] It spans 880 meters. [c-1]",
    "The Aurora bridge opened in 1932 [c-1]. It spans 880 meters [c-2].",
    "The bridge opened in 1932. [c-1, c-2] The museum opened in 1975. [c-2] It holds maps.",
    "No marker here. Nor here.",
]
PIECES = ["The", " Aurora", " bridge", " opened", " in", " ", "1", "9", "3", "2", ".", " [", "c", "-", "1", "]", " It"]


def _feed(pieces: list[str]) -> tuple[FreeTextReader, list[tuple[int, str, tuple[str, ...]]]]:
    reader = FreeTextReader()
    done: list[tuple[int, str, tuple[str, ...]]] = []
    for piece in pieces:
        for n, claim in enumerate(reader.feed(piece)):
            if claim.done:
                done.append((n, claim.text, tuple(c.chunk_id for c in claim.citations)))
    return reader, done


@pytest.mark.parametrize("text", TEXTS)
def test_a_claim_reported_complete_is_the_final_claim(text: str) -> None:
    final = [(c.text, tuple(x.chunk_id for x in c.citations)) for c in parse_answer(text).claims]
    _, done = _feed(list(text))
    assert done, "some claim completes before the end of the text"
    for n, claim_text, ids in done:
        assert (claim_text, ids) == final[n], (n, claim_text, ids)


def test_the_models_token_pieces_hold_the_claim_until_its_marker_closes() -> None:
    _, done = _feed(PIECES)
    assert done and {d[1:] for d in done} == {("The Aurora bridge opened in 1932.", ("c-1",))}
    half = FreeTextReader()
    for piece in PIECES[:14]:  # "... 1932. [c-"
        claims = half.feed(piece)
    assert [c.done for c in claims] == [False] and claims[0].citations == []
    assert half.open_marker() == "c-"


@pytest.mark.parametrize("live", [True, False])
@pytest.mark.parametrize("cite", [False, True])
def test_each_claim_is_segmented_once_not_again_to_commit_it(
    live: bool, cite: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 30
    if cite:
        text = " ".join(f'<cite id="c-{k}">Section {k} is {100 + k} meters long.</cite>' for k in range(n))
    else:
        text = " ".join(f"Section {k} is {100 + k} meters long. [c-{k}]" for k in range(n))
    reads: list[str] = []
    parse = incremental.parse_answer

    def counting(tail: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(tail)
        return parse(tail, *args, **kwargs)

    monkeypatch.setattr(incremental, "parse_answer", counting)
    reader = FreeTextReader(live=live)
    deltas = FakeBackend.deltas(text)
    for delta in deltas:
        reader.feed(delta)
    claims = reader.feed("")
    assert [(c.text, [x.chunk_id for x in c.citations]) for c in claims] == [
        (c.text, [x.chunk_id for x in c.citations]) for c in parse(text).claims
    ]
    assert reader._base > len(text) // 2  # the claims before the last ones were committed
    if not live:
        # one reading that segments per claim (the first word after its break), and none again to commit it; a
        # <cite> tag adds the readings that stop at a tag half-way (nothing to segment)
        segmented = [t for t in reads if t.rfind("<cite") <= t.rfind("</cite")]
        assert len(segmented) <= n + 2
    else:
        assert len(reads) <= len(deltas) + 2  # one reading per delta, none again to commit
