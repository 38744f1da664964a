"""The stream's fast paths give what its generic path gives, wherever a delta boundary falls.

The fast paths: a delta that only extends an open string (no quote, no backslash) is appended by the scanner
without its character loop; a delta no check or screen reads (a word of unchecked text, pure structure, the shape
alone, a span growing where it was found) returns before the session's generic step; the driver steps the
session without :meth:`StreamRun.feed`'s layer; an inline judge's memo hands its verdict over without a future.
Each is held here to the slow path's result: a delta split exactly at a quote, a backslash or inside an escape
reads the same claims as the document read character by character; the character bound cuts at the very delta
that crosses it; a diverging span is caught at the same delta with the quick span test switched off.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

import pytest

from citelock import Citelock, FakeBackend, Guard, OutputBoundsError, SurfacePolicy
from citelock.records import Verdict
from citelock.stream._incremental import JsonReader, PrefixChecker
from citelock.stream._session import MemoJudge

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": 'Café prices in Zürich rose 5% in 2023. He said "rents rose" \\ faster.'},
]
QUESTION = "How long is the Aurora bridge?"
ANSWER = {
    "claims": [
        {
            "text": 'He said "hi" \\ then left, café 😀 done.\n',
            "citations": [{"chunk_id": "c-2", "span": 'said "rents rose" \\ faster'}],
        },
        {"text": "The bridge spans 880 meters.", "citations": [{"chunk_id": "c-1", "span": "spans 880 meters"}]},
    ]
}


def _state(reader: JsonReader) -> list[tuple[Any, ...]]:
    return [(c.text, c.done, tuple((x.chunk_id, x.span, x.chunk_id_done) for x in c.citations)) for c in reader.claims]


def _by_chars(text: str) -> JsonReader:
    reader = JsonReader()
    for ch in text:
        reader.feed(ch)
    return reader


@pytest.mark.parametrize("ascii_only", [True, False])
def test_a_delta_split_anywhere_reads_what_the_characters_one_by_one_read(ascii_only: bool) -> None:
    """Two deltas cut at every position (inside a string, at a quote, after a backslash, inside a ``\\uXXXX``)."""
    text = json.dumps(ANSWER, ensure_ascii=ascii_only)
    whole = [
        (c["text"], True, tuple((x["chunk_id"], x["span"], True) for x in c["citations"])) for c in ANSWER["claims"]
    ]
    for cut in range(1, len(text)):
        reader = JsonReader()
        reader.feed(text[:cut])
        assert _state(reader) == _state(_by_chars(text[:cut])), cut
        reader.feed(text[cut:])
        reader.feed("")
        assert reader.complete and not reader.failed
        assert _state(reader) == whole, cut


@pytest.mark.parametrize("ascii_only", [True, False])
def test_deltas_that_end_or_begin_at_every_quote_and_backslash_read_the_whole_parse(ascii_only: bool) -> None:
    """Words inside strings take the fast path; a delta holding a quote or a backslash the character loop."""
    text = json.dumps(ANSWER, ensure_ascii=ascii_only)
    cuts = sorted(
        {0, len(text)}
        | {i for i, ch in enumerate(text) if ch in '"\\'}
        | {i + 1 for i, ch in enumerate(text) if ch in '"\\'}
    )
    pieces = [text[a:b] for a, b in itertools.pairwise(cuts) if b > a]
    words = [w for piece in pieces for w in FakeBackend.deltas(piece)]  # and each piece split into words
    for deltas in (pieces, words):
        assert "".join(deltas) == text
        reader = JsonReader()
        for k, delta in enumerate(deltas):
            reader.feed(delta)
            if k % 7 == 0:
                assert _state(reader) == _state(_by_chars("".join(deltas[: k + 1]))), k
        reader.feed("")
        assert reader.complete and reader.text == text
        assert [(c.text, [(x.chunk_id, x.span) for x in c.citations]) for c in reader.claims] == [
            (c["text"], [(x["chunk_id"], x["span"]) for x in c["citations"]]) for c in ANSWER["claims"]
        ]


def test_the_characters_bound_cuts_at_the_very_delta_that_crosses_it_inside_a_claims_text() -> None:
    """The word fast path still counts every character: the cut is where the running length first passes."""
    huge = json.dumps(
        {"claims": [{"text": "The bridge spans" + " long" * 20000, "citations": [{"chunk_id": "c-1"}]}]},
        separators=(",", ":"),
    )
    fake = FakeBackend([huge], enforced=False)
    with pytest.raises(OutputBoundsError) as info:
        list(Citelock(fake).stream(QUESTION, CHUNKS, show="after_checks"))
    limit = info.value.limit
    deltas, length = FakeBackend.deltas(huge), 0
    crossing = next(k for k, d in enumerate(deltas) if (length := length + len(d)) > limit)
    assert info.value.bound == "chars"
    assert fake.streamed == crossing + 1  # not one delta more was read
    assert info.value.got == sum(len(d) for d in deltas[: crossing + 1])


def _out(*claims: tuple[str, str, str], span_first: bool = False) -> str:
    def cite(c: str, s: str) -> dict[str, str]:
        return {"span": s, "chunk_id": c} if span_first else {"chunk_id": c, "span": s}

    data = {"claims": [{"text": t, "citations": [cite(c, s)]} for t, c, s in claims]}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


OUTPUTS = [
    _out(("The bridge spans 880 meters.", "c-1", "spans 880 meters across the river")),  # a span diverges at a word
    _out(("It spans far.", "c-1", "It spans 881 meters")),  # inside a number
    _out(("Prices rose.", "c-2", "Café prices in Zürich rose 9%")),  # a non-ASCII span: the full check
    _out(("Prices rose.", "c-2", "prices  in Zürich")),  # a double space: the full check
    _out(("Rents rose.", "c-2", 'said "rents rose" \\ slower')),  # escapes inside the span
    _out(("The bridge spans 880 meters.", "c-1", "spans 880 meters"), ("Ok.", "c-2", "rose 5% in 2023")),
    _out(("The bridge spans 880 meters.", "c-17", "spans 880 meters")),  # an id that stops being a prefix
    _out(("The bridge spans 880 meters.", "c", "spans 880 meters")),  # an id wrong only once it closes
    _out(("The bridge spans 880 meters.", "c-2", "spans 880 meters"), span_first=True),  # the span before its id
    _out(("The bridge spans 880 meters.", "c-17", "spans 880 meters"), span_first=True),
]


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("surface", [None, SurfacePolicy(name="chat", stakes="low", sample_rate=0.0)])
@pytest.mark.parametrize("quick", ["span_holds", "id_holds"])
def test_a_citation_is_caught_at_the_same_delta_with_a_quick_test_switched_off(
    output: str, surface: SurfacePolicy | None, quick: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quick test only ever says "still holds"; every delta it lets pass, the full check lets pass too."""

    def run() -> list[Any]:
        guard = Guard(surface) if surface is not None else None
        client = Citelock(FakeBackend([output], enforced=False), guard=guard, policy="substring")
        events = list(client.stream(QUESTION, CHUNKS, request_id="r-1", show="after_checks"))
        return [e.model_dump(exclude={"answer"}) if e.type == "done" else e.model_dump() for e in events] + [
            events[-1].answer.result.model_dump(exclude={"accounting"})
        ]

    fast = run()
    monkeypatch.setattr(PrefixChecker, quick, lambda self, cite: False)
    assert run() == fast


def test_the_quick_tests_see_the_deltas_they_are_for() -> None:
    """The comparison above is not empty: both quick tests pass most of the deltas they are asked about."""
    asked: dict[str, list[bool]] = {"span_holds": [], "id_holds": []}
    originals = {name: getattr(PrefixChecker, name) for name in asked}

    def spy(name: str) -> Any:
        return lambda self, cite: asked[name].append(originals[name](self, cite)) or asked[name][-1]

    with pytest.MonkeyPatch.context() as patch:
        for name in asked:
            patch.setattr(PrefixChecker, name, spy(name))
        events = list(Citelock(FakeBackend([OUTPUTS[0]], enforced=False)).stream(QUESTION, CHUNKS))
    assert [e.type for e in events if e.type == "claim.diverged"] == ["claim.diverged"]
    assert asked["id_holds"].count(True) == 3  # "c", "-", "1": each a prefix of an assembled id, no span yet
    assert asked["span_holds"].count(True) > asked["span_holds"].count(False) > 0  # the first word: the full check


class _Inline:
    name, version, inline = "inline", "1", True

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    def judge(self, claim: str, passage: str) -> Verdict:
        self.calls.append((claim, passage))
        if self.fail:
            raise RuntimeError("judge down")
        return Verdict(label="yes", raw="yes", judge=self.name, version=self.version)


def test_an_inline_judges_memo_asks_once_per_pair_across_threads() -> None:
    inner = _Inline()
    memo = MemoJudge(inner)  # type: ignore[arg-type]
    verdicts: list[Verdict] = []

    def ask() -> None:
        for k in range(50):
            verdicts.append(memo.judge(f"claim {k % 5}", "passage"))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(inner.calls) == sorted({(f"claim {k}", "passage") for k in range(5)})
    assert len(verdicts) == 200 and all(v.label == "yes" for v in verdicts)


def test_an_inline_judges_failure_reaches_every_caller_and_the_judge_is_asked_once() -> None:
    inner = _Inline(fail=True)
    memo = MemoJudge(inner)  # type: ignore[arg-type]
    for _ in range(3):
        with pytest.raises(RuntimeError, match="judge down"):
            memo.judge("claim", "passage")
    assert inner.calls == [("claim", "passage")]
