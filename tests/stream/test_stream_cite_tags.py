"""A free-text stream citing with ``<cite id="...">...</cite>`` tags reads as ``[id]`` markers do.

Its complete claims are committed (never segmented again), so the tail each delta re-reads stays a few claims
long however long the answer grows; and, however the output is split into deltas, the claims it reads are the
whole parse's and the stream's result is ``Citelock.answer``'s (tags, bracket markers and both mixed, a tag that
holds two sentences, a sentence cut by no tag).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import citelock.stream._incremental as incremental
from citelock import BackendLimits, Citelock, FakeBackend, Guard, SurfacePolicy, parse_answer
from citelock.judges import LexicalJudge
from citelock.stream._incremental import FreeTextReader
from support.split_stream import SplitBackend, split

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023. Rents rose faster."},
]
SENTENCES = [
    "The Aurora bridge opened in 1932.",
    "It spans 880 meters across the bay!",
    "Dr. Smith said prices rose 5% in 2023.",
    "Is it 3.5 km long?",
    "Rents rose faster.",
]
TAGS = [
    '<cite id="c-1">{}</cite>',
    "<cite id='c-2'>{}</cite>",
    '<cite id="c-1, c-2">{}</cite>',
    '<cite id="c-9">{}</cite>',
]
PLAIN = ["{}", "{} [c-1]", "{}[c-2]"]
GAPS = [" ", "  ", "\n"]
SURFACES = [None, SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")]
TIMING = {"generation": {"latency_s", "first_token_s", "tokens_per_s", "schema_build_ms"}}

pieces = st.lists(
    st.tuples(
        st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=2),  # two: one tag holds both sentences
        st.sampled_from(TAGS + PLAIN),
        st.sampled_from(GAPS),
    ),
    min_size=1,
    max_size=6,
)
cuts = st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=400)


def _cited(parts: list[tuple[list[str], str, str]]) -> str:
    return "".join(form.format(" ".join(sentences)) + gap for sentences, form, gap in parts).rstrip()


def _key(claim: Any) -> tuple[Any, ...]:
    return (claim.text, tuple((c.chunk_id, c.span) for c in claim.citations), claim.start, claim.end)


def _long_answer(claims: int) -> str:
    return " ".join(TAGS[n % 2].format(SENTENCES[n % len(SENTENCES)]) for n in range(claims))


@pytest.mark.parametrize("live", [True, False])
def test_a_long_cite_tagged_answer_commits_its_claims_and_rereads_a_bounded_tail(
    live: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _long_answer(40)
    read: list[int] = []
    parse = incremental.parse_answer

    def counting(tail: str, *args: Any, **kwargs: Any) -> Any:
        read.append(len(tail))
        return parse(tail, *args, **kwargs)

    monkeypatch.setattr(incremental, "parse_answer", counting)
    reader = FreeTextReader(live=live)
    for word in split(text, [5, 3, 7]):
        reader.feed(word)
    claims = reader.feed("")
    assert [_key(c) for c in claims] == [_key(c) for c in parse(text).claims]
    assert len(claims) == 40
    assert reader._base > len(text) // 2  # the text before the last claims is never read again
    longest = max(len(tag) for tag in TAGS) + max(len(s) for s in SENTENCES)
    assert max(read) < 6 * longest < len(text) // 4  # a few claims' worth, not the answer so far


@settings(max_examples=150, deadline=None)
@given(parts=pieces, sizes=cuts, live=st.booleans())
def test_the_reader_reads_a_cite_tagged_answer_as_the_whole_parse_whatever_thesplit(
    parts: list[tuple[list[str], str, str]], sizes: list[int], live: bool
) -> None:
    text = _cited(parts)
    final = [_key(c) for c in parse_answer(text).claims]
    reader = FreeTextReader(live=live)
    for piece in split(text, sizes):
        for n, claim in enumerate(reader.feed(piece)):
            if claim.done:
                assert _key(claim) == final[n]
    assert [_key(c) for c in reader.feed("")] == final


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=pieces, sizes=cuts, surface=st.sampled_from(SURFACES))
def test_the_streams_result_on_a_cite_tagged_answer_equals_answers(
    parts: list[tuple[list[str], str, str]], sizes: list[int], surface: SurfacePolicy | None
) -> None:
    output = _cited(parts)
    fake = FakeBackend([output, output], limits=BackendLimits(policies=()), enforced=False)
    guard = Guard(surface, LexicalJudge()) if surface is not None else Guard()
    client = Citelock(SplitBackend(fake, sizes), guard=guard)
    question = "How long is the Aurora bridge?"
    events = list(client.stream(question, CHUNKS, request_id="s-1", on_diverge="continue"))
    whole = client.answer(question, CHUNKS, request_id="s-1")
    assert events[-1].type == "done" and not events[-1].cut
    assert events[-1].answer.model_dump(exclude=TIMING) == whole.model_dump(exclude=TIMING)
    assert [e.claim_index for e in events if e.type == "claim.checked"] == list(range(len(whole.answer.claims)))
