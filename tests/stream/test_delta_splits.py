"""Property: however the output is split into deltas, the stream reads the same claims and ends as ``answer``.

The stream's readers are incremental (a resumable JSON scanner, a free-text reader that segments only its open
tail), so where a delta boundary falls must not matter: the same output cut at random points (inside strings,
escapes, surrogate pairs, markers, between sentences) gives the claims a whole parse gives, every claim reported
complete at any point is the final parse's claim, and the stream's result equals ``Citelock.answer``'s with every
claim checked exactly once (the fold is reused, never re-guarded).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import citelock.guard._fold as fold_module
from citelock import BackendLimits, Citelock, FakeBackend, Guard, SchemaOptions, SurfacePolicy, parse_answer
from citelock.judges import LexicalJudge
from citelock.stream._incremental import FreeTextReader, JsonReader
from support.split_stream import SplitBackend, split

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023. Rents rose faster."},
]
TEXTS = [
    "The bridge spans 880 meters.",
    "It opened in 1931.",
    'Prices rose "5%" in 2023 😀.',
    "Rents rose faster\\than prices.",
    "Thanks for asking!",
]
CITES = [
    {"chunk_id": "c-1", "span": "spans 880 meters"},
    {"chunk_id": "c-2", "span": "rose 5% in 2023"},
    {"chunk_id": "c-2", "span": "Café prices in Zürich"},
    {"chunk_id": "c-9", "span": "spans 880 meters"},
]
SENTENCES = [
    "The Aurora bridge opened in 1932.",
    "It spans 880 meters across the bay!",
    "Dr. Smith said prices rose 5% in 2023.",
    "Is it 3.5 km long?",
    "Rents rose faster.",
]
MARKERS = ["", " [c-1]", "[c-2]", " [c-1, c-2]", " [c-9]"]
SURFACES = [None, SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim")]
TIMING = {"generation": {"latency_s", "first_token_s", "tokens_per_s", "schema_build_ms"}}

claims = st.lists(st.tuples(st.sampled_from(TEXTS), st.lists(st.sampled_from(CITES), max_size=2)), max_size=4)
prose = st.lists(
    st.tuples(st.sampled_from(SENTENCES), st.sampled_from(MARKERS), st.sampled_from([" ", "  ", "\n"])),
    min_size=1,
    max_size=6,
)
cuts = st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=400)


def _json(answer: list[tuple[str, list[dict[str, str]]]], ascii_only: bool) -> str:
    return json.dumps({"claims": [{"text": t, "citations": c} for t, c in answer]}, ensure_ascii=ascii_only)


def _free(sentences: list[tuple[str, str, str]]) -> str:
    return "".join(s + m + gap for s, m, gap in sentences).rstrip()


def _key(claim: Any) -> tuple[Any, ...]:
    return (claim.text, tuple((c.chunk_id, c.span) for c in claim.citations))


@settings(max_examples=150, deadline=None)
@given(answer=claims, ascii_only=st.booleans(), sizes=cuts)
def test_the_json_reader_reads_the_whole_parse_whatever_thesplit(
    answer: list[tuple[str, list[dict[str, str]]]], ascii_only: bool, sizes: list[int]
) -> None:
    output = _json(answer, ascii_only)
    final = [(t, tuple((c["chunk_id"], c["span"]) for c in cites)) for t, cites in answer]
    reader = JsonReader()
    for piece in split(output, sizes):
        for n, claim in enumerate(reader.feed(piece)):
            if claim.done:
                assert (claim.text, tuple((c.chunk_id, c.span) for c in claim.citations)) == final[n]
    reader.feed("")
    assert reader.complete and not reader.failed
    assert [(c.text, tuple((x.chunk_id, x.span) for x in c.citations)) for c in reader.claims] == final
    assert reader.text == output and reader.length == len(output)


@settings(max_examples=150, deadline=None)
@given(sentences=prose, sizes=cuts, live=st.booleans())
def test_the_free_text_reader_reads_the_whole_parse_whatever_thesplit(
    sentences: list[tuple[str, str, str]], sizes: list[int], live: bool
) -> None:
    text = _free(sentences)
    final = [(_key(c), c.start, c.end) for c in parse_answer(text).claims]
    reader = FreeTextReader(live=live)
    for piece in split(text, sizes):
        for n, claim in enumerate(reader.feed(piece)):
            if claim.done:
                assert (_key(claim), claim.start, claim.end) == final[n]
    assert [(_key(c), c.start, c.end) for c in reader.feed("")] == final


@pytest.mark.parametrize("broken", ['{"claims":[{"text":"a"}', '{"claims":[}', '{"claims":[{"text":"a\x01"}]}'])
def test_json_that_breaks_is_never_complete(broken: str) -> None:
    reader = JsonReader()
    for ch in broken:
        reader.feed(ch)
    reader.feed("")
    assert not reader.complete


def _dump(answer: Any) -> dict[str, Any]:
    return answer.model_dump(exclude=TIMING)  # type: ignore[no-any-return]


def _checked_once(client: Citelock, question: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int]:
    counted = 0
    check = fold_module.check_claim

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal counted
        counted += 1
        return check(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(fold_module, "check_claim", counting)
        events = list(client.stream(question, CHUNKS, request_id="s-1", on_diverge="continue"))
    return events, counted


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=claims, sentences=prose, free=st.booleans(), sizes=cuts, surface=st.sampled_from(SURFACES))
def test_the_streams_result_equals_answers_whatever_thesplit(
    answer: list[tuple[str, list[dict[str, str]]]],
    sentences: list[tuple[str, str, str]],
    free: bool,
    sizes: list[int],
    surface: SurfacePolicy | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    output = _free(sentences) if free else _json(answer, ascii_only=False)
    limits = BackendLimits(policies=()) if free else None
    fake = FakeBackend([output, output], limits=limits, enforced=False)
    guard = Guard(surface, LexicalJudge()) if surface is not None else Guard()
    client = Citelock(SplitBackend(fake, sizes), guard=guard, options=None if free else SchemaOptions(max_claims=5))
    question = "How long is the Aurora bridge?"
    events, checks = _checked_once(client, question, monkeypatch)
    whole = client.answer(question, CHUNKS, request_id="s-1")
    assert events[-1].type == "done" and not events[-1].cut
    assert _dump(events[-1].answer) == _dump(whole)
    assert [e.claim_index for e in events if e.type == "claim.checked"] == list(range(len(whole.answer.claims)))
    assert checks == len(whole.answer.claims)  # each claim checked once: the result was assembled, not re-guarded
