"""The linear-time rewrites of #15 give exactly the answers of the straightforward code they replaced.

Each property runs the new code and a reference copy of the old (quadratic) code on random inputs and compares.
Speed itself is measured by ``benchmarks/bench_check_large.py``, not asserted here.
"""

from __future__ import annotations

import re
from contextlib import suppress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citelock.prompt import PromptIndex, check_citation, record_from_messages
from citelock.prompt._parse import _unclosed_cite, parse_free_text
from citelock.records import Citation, PlacedChunk, ReasonCode
from citelock.text import normalize

pytestmark = pytest.mark.slow


_OLD_UNCLOSED = re.compile(r"<cite\b(?![^>]*>.*?</cite\s*>)", re.DOTALL)
_PIECES = ["<cite", "<cite ", 'id="a"', ">", "</cite>", "</cite >", "</cite", "x", " ", "<", "\n", "citex"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_unclosed_cite_finds_what_the_lookahead_regex_found(text: str) -> None:
    old = _OLD_UNCLOSED.search(text)
    assert _unclosed_cite(text) == (old.start() if old else None)


_SENTENCES = st.lists(
    st.tuples(
        st.sampled_from(["Revenue grew", "Costs fell", "It rained", "The toll rose", "Freight is paid"]),
        st.sampled_from(["", " [c-1]", " [c-2, c-3]", ' <cite id="s1">quoted text</cite>', " [7]"]),
        st.sampled_from([". ", ".\n", "! ", "? ", " ", ".[c-4] "]),
    ),
    min_size=1,
    max_size=25,
)


def _old_owner(sentences: list[tuple[int, int]], offset: int) -> int:
    owner = 0
    for index, (start, _end) in enumerate(sentences):
        if start < offset:
            owner = index
        else:
            break
    return owner


@settings(max_examples=150, deadline=None)
@given(_SENTENCES)
def test_free_text_markers_go_to_the_sentence_the_old_scan_chose(parts: list[tuple[str, str, str]]) -> None:
    text = "".join(a + b + c for a, b, c in parts)
    answer = parse_free_text(text)
    plain_marks = []  # recompute (offset, ids) the slow way: one search per pattern per marker
    from citelock.prompt import DEFAULT_MARKERS
    from citelock.text import split_sentences

    stripped, pos, kept = [], 0, 0
    while True:
        best = None
        for marker in DEFAULT_MARKERS:
            found = marker.regex.search(text, pos)
            if found and (best is None or found.start() < best.start()):
                best = found
        if best is None:
            break
        stripped.append(text[pos : best.start()])
        kept += best.start() - pos
        inner = best.groupdict().get("text")
        if inner is not None:
            stripped.append(inner)
            kept += len(inner)
        plain_marks.append((kept, [i.strip() for i in re.split(r"[,;]", best.group("ids")) if i.strip()]))
        pos = best.end()
    stripped.append(text[pos:])
    sentences = split_sentences("".join(stripped))
    expected: list[list[str]] = [[] for _ in sentences]
    for offset, ids in plain_marks:
        owner = expected[_old_owner(sentences, offset)]
        owner.extend(i for i in ids if i not in owner)
    assert [[c.chunk_id for c in claim.citations] for claim in answer.claims] == expected


# --- the prompt index: the old per-chunk scans as the reference -------------------------------------------

_WORDS = ["alpha", "beta", "gamma", "delta", "alpha beta", "beta gamma."]


def _old_overlapping(index: PromptIndex, message: int, start: int, end: int) -> list[PlacedChunk]:
    hits = [
        pc
        for pc in index.by_id.values()
        if pc.placement is not None
        and pc.placement.message == message
        and pc.placement.norm_start < end
        and start < pc.placement.norm_end
    ]
    return sorted(hits, key=lambda pc: pc.placement.norm_start if pc.placement else 0)


def _old_occurrences(index: PromptIndex, needle: str) -> list[tuple[int, int, int]]:
    out = []
    for message, text in enumerate(index.record.normalized):
        at = text.find(needle)
        while needle and at >= 0:
            out.append((message, at, at + len(needle)))
            at = text.find(needle, at + 1)
    return out


def _old_check(index: PromptIndex, citation: Citation) -> tuple[bool, ReasonCode | None, str | None]:
    placed = index.by_id.get(citation.chunk_id)
    if placed is None:
        return False, ReasonCode.ID_NOT_IN_PROMPT, None
    if citation.span is None:
        if placed.status == "truncated" and not index.body(placed):
            return False, ReasonCode.SPAN_TRUNCATED, None
        return True, None, None
    span = normalize(citation.span)
    if index.find_in_body(placed, span) >= 0:
        return True, None, None
    if placed.status == "truncated" and span in normalize(placed.chunk.text):
        return False, ReasonCode.SPAN_TRUNCATED, None
    for other in index.by_id.values():
        if other is not placed and index.find_in_body(other, span) >= 0:
            return False, ReasonCode.SPAN_IN_OTHER_CHUNK, other.id
    occurrences = _old_occurrences(index, span)
    if any(not _old_overlapping(index, *occurrence) for occurrence in occurrences):
        return False, ReasonCode.SPAN_ONLY_IN_QUESTION, None
    if occurrences:
        straddled = _old_overlapping(index, *occurrences[0])
        return False, ReasonCode.SPAN_NOT_IN_CHUNK, next((pc.id for pc in straddled if pc.id != placed.id), None)
    return False, ReasonCode.SPAN_NOT_IN_CHUNK, None


@st.composite
def _prompts(draw: st.DrawFn) -> tuple[PromptIndex, list[Citation]]:
    texts = draw(
        st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join), min_size=1, max_size=7)
    )
    chunks = [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)]
    sent = []
    for chunk in chunks:
        cut = draw(st.sampled_from(["whole", "whole", "whole", "half", "gone"]))
        body = chunk["text"] if cut == "whole" else chunk["text"][: len(chunk["text"]) // 2] if cut == "half" else ""
        sent.append(f"[{chunk['id']}] {body}")
    question = draw(st.sampled_from(["gamma delta?", "alpha?", "what of beta gamma?"]))
    user = "Context:\n" + "\n".join(sent) + f"\nQuestion: {question}"
    record = record_from_messages([{"role": "user", "content": user}], chunks, question=question)
    prompt_words = normalize(user).split()
    spans = st.one_of(
        st.none(),
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
        st.integers(0, len(prompt_words) - 1).flatmap(
            lambda i: st.integers(i + 1, len(prompt_words)).map(lambda j: " ".join(prompt_words[i:j]))
        ),
    )
    ids = st.sampled_from([c["id"] for c in chunks] + ["c-99"])
    citations = draw(st.lists(st.builds(Citation, chunk_id=ids, span=spans), min_size=1, max_size=12))
    return PromptIndex.build(record), citations


@settings(max_examples=300, deadline=None)
@given(_prompts())
def test_citation_checks_match_the_per_chunk_scan(case: tuple[PromptIndex, list[Citation]]) -> None:
    index, citations = case
    for number, citation in enumerate(citations):
        new = check_citation(index, citation, number, 0)
        assert (new.passed, new.reason, new.related_chunk_id) == _old_check(index, citation), citation


@settings(max_examples=200, deadline=None)
@given(_prompts(), st.data())
def test_overlap_lookup_matches_the_per_chunk_scan(
    case: tuple[PromptIndex, list[Citation]], data: st.DataObject
) -> None:
    index, _ = case
    text = index.record.normalized[0]
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    assert index.chunks_overlapping(0, start, end) == _old_overlapping(index, 0, start, end)


# --- numbers: derivations computed once per claim ---------------------------------------------------------


def _old_derivable(target: str, operands: list[str], *, percent: bool, arithmetic: bool) -> bool:
    from decimal import Decimal
    from itertools import permutations

    def close(value: Decimal) -> bool:
        places = len(target.partition(".")[2])
        return abs(value - Decimal(target)) <= Decimal(5) / Decimal(10) ** (places + 1)

    goal = Decimal(target)
    if goal == 0 or not (percent or arithmetic):
        return False
    for a, b in permutations([Decimal(o) for o in operands[:8]], 2):
        results = [a + b, a - b, a * b, *([a / b] if b != 0 else [])] if arithmetic else []
        if percent and b != 0:
            results += [a / b * 100, abs(a - b) / b * 100]
        if any(close(r) for r in results):
            return True
    return False


_NUMBER_TEXT = st.one_of(
    st.integers(0, 400).map(str),
    st.decimals(min_value=0, max_value=1000, places=2, allow_nan=False).map(lambda d: format(d.normalize(), "f")),
    st.sampled_from(["0.5", "33.3", "33.33", "66.7", "12.5", "1.25", "250", "0.1", "1" + "0" * 30]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_NUMBER_TEXT, min_size=0, max_size=9), _NUMBER_TEXT, st.booleans(), st.booleans())
def test_number_derivations_match_the_pairwise_scan(
    operands: list[str], target: str, percent: bool, arithmetic: bool
) -> None:
    from citelock.guard._numbers import derivable

    assert derivable(target, operands, percent=percent, arithmetic=arithmetic) == _old_derivable(
        target, operands, percent=percent, arithmetic=arithmetic
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_NUMBER_TEXT, min_size=2, max_size=9, unique=True),
    st.data(),
    st.sampled_from(["+", "-", "*", "/", "%", "%change"]),
    st.integers(0, 3),
    st.booleans(),
)
def test_number_derivations_agree_on_derived_targets(
    operands: list[str], data: st.DataObject, op: str, places: int, arithmetic: bool
) -> None:
    from decimal import Decimal, InvalidOperation

    from citelock.guard._numbers import derivable

    a, b = (Decimal(x) for x in data.draw(st.permutations(operands[:8]))[:2])
    if b == 0:
        b = Decimal(7)
    value = {
        "+": lambda: a + b,
        "-": lambda: abs(a - b),
        "*": lambda: a * b,
        "/": lambda: a / b,
        "%": lambda: a / b * 100,
        "%change": lambda: abs(a - b) / b * 100,
    }[op]()
    with suppress(InvalidOperation):  # more digits than the context holds: the value stands as computed
        value = value.quantize(Decimal(1).scaleb(-places))
    target = format(value.normalize(), "f")
    percent = op.startswith("%")
    new = derivable(target, operands, percent=percent, arithmetic=arithmetic)
    assert new == _old_derivable(target, operands, percent=percent, arithmetic=arithmetic)
