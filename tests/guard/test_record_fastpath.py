"""The fast path for never-logged prompts builds exactly the records (and so the findings) it always did.

``tests/support/reference_record.py`` keeps the straightforward implementation; every test here builds the same thing
both ways and compares whole values: normalized text, offset maps, placements, statuses, sha256, JSON, reports.
"""

from __future__ import annotations

import html
import json
import random
import sys
import unicodedata
from bisect import bisect_left
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import support.reference_record as ref
from citelock import assemble, check, record_from_messages, serialize
from citelock.prompt import _search, _serialize, messages_sha256
from citelock.prompt._search import TextSearch
from citelock.records import Message, PromptRecord
from citelock.text import _normalize, normalize, normalize_with_map, numbers_in_order
from citelock.text._normalize import (
    _ODD_WHITESPACE,
    norm_offset,
    normalize_all,
    normalize_with_anchors,
    raw_offset,
)

# Characters and pieces that exercise every normalization step: entities (known, unknown, numeric, one that
# decodes to nothing, one that decodes to two characters, double-escaped), NFD marks, Hangul jamo, every kind of
# whitespace, quotes and backslashes (escaped by json), and control characters.
PIECES = [
    *"abcxyz ABC019.,;:'\"<>&\\#-_=[]",
    *"\n\r\t\x0b\x0c\x1c\x1f\x85\u00a0\u1680\u2003\u2028\u2029\u202f\u3000",
    *"éñ漢字—«»\u0301\u0302\u212b\u1100\u1161\U0001f600\x00\x01\x7f",
    "&amp;",
    "&amp;amp;",
    "&lt;b&gt;",
    "&#39;",
    "&#x27;",
    "&#1;",
    "&foo;",
    "&NotEqualTilde;",
    "  ",
    "\r\n",
    " \n ",
    "e\u0301\u0302",
]
TEXT = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def _expected_anchors(text: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    normalized, offsets = ref.normalize_with_map(text)
    return normalized, ref.compress_offsets(offsets)


def test_the_whitespace_list_is_pythons() -> None:
    everything = (chr(code) for code in range(sys.maxunicode + 1))
    spaces = [ch for ch in everything if ch.isspace() and ch != " "]
    assert "".join(spaces) == _ODD_WHITESPACE
    assert not any(ch.isprintable() for ch in spaces)  # what the printable shortcut relies on


@given(TEXT)
@settings(max_examples=600, deadline=None)
def test_normalization_and_offset_maps_are_the_reference(text: str) -> None:
    expected_text, expected_anchors = _expected_anchors(text)
    assert normalize(text) == ref.normalize(text)
    assert normalize_with_anchors(text) == (expected_text, expected_anchors)
    assert normalize_with_map(text) == ref.normalize_with_map(text)
    offsets = ref.normalize_with_map(text)[1]
    length = len(expected_text)
    for raw in range(len(text) + 2):
        assert norm_offset(expected_anchors, length, raw) == bisect_left(offsets, raw, hi=length)
    for norm in range(length + 1):
        assert raw_offset(expected_anchors, norm) == offsets[norm]


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join), st.integers(1, 3))
@settings(max_examples=60, deadline=None)
def test_long_texts_take_the_vector_scan_and_agree(fragment: str, variant: int) -> None:
    # Long enough for the numpy double-space scan; the variants put the irregular whitespace at the ends too.
    text = (fragment + "word\nword ") * (20_000 // (len(fragment) + 10) + 1)
    text = {1: text, 2: " " + text + "x", 3: text.replace("\n", "  ", 1)}[variant]
    assert normalize_with_anchors(text) == _expected_anchors(text)
    assert normalize(text) == ref.normalize(text)


ASCII_PIECES = ["ab", "ab", "ab", " ", "  ", "\n", "\t", "\x1c", "\x1f", "\x00", "\x08", "\x7f"]
ASCII_CHUNK = st.lists(st.sampled_from(ASCII_PIECES), max_size=12).map("".join)
OTHER_CHUNK = st.sampled_from(["é  x", "caf\u0065\u0301", "&amp; y", "R&D", ""])


@pytest.mark.slow
@given(st.lists(st.one_of(ASCII_CHUNK, OTHER_CHUNK), max_size=40))
@settings(max_examples=400, deadline=None)
def test_normalize_all_is_normalize_each(texts: list[str]) -> None:
    assert normalize_all(texts) == [ref.normalize(text) for text in texts]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_normalize, "_VECTOR_SCAN_CHARS", 0)  # the one-pass numpy scan, whatever the length
        assert normalize_all(texts) == [ref.normalize(text) for text in texts]


NUMBERISH = st.lists(
    st.sampled_from([*"0123456789,.-$€£¥ aZ_\n%()[]", "٣", "1,000", "12.5", "c-10", "v2", "x", "1,00", "3.", ".5"]),
    max_size=20,
).map("".join)


@pytest.mark.slow
@given(NUMBERISH)
@settings(max_examples=800, deadline=None)
def test_numbers_are_the_reference(text: str) -> None:
    assert numbers_in_order(text) == ref.numbers_in_order(text)


@given(st.lists(st.tuples(st.sampled_from(["system", "user", 'a"\\b', "r\x01"]), TEXT), min_size=0, max_size=3))
@settings(max_examples=300, deadline=None)
def test_messages_sha256_is_the_canonical_json(pairs: list[tuple[str, str]]) -> None:
    messages = [Message(role=role, content=content) for role, content in pairs]
    assert messages_sha256(messages) == ref.messages_sha256(messages)


def test_messages_sha256_refuses_a_lone_surrogate_like_json_then_utf8() -> None:
    messages = [Message(role="user", content="a\ud800b")]
    with pytest.raises(UnicodeEncodeError):
        ref.messages_sha256(messages)
    with pytest.raises(UnicodeEncodeError):
        messages_sha256(messages)


SEARCH_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "é", "漢", "\U0001f600"]), max_size=1500)


@pytest.fixture(params=["str.find", "stringzilla"])
def simd(request: pytest.FixtureRequest) -> bool:
    if request.param == "stringzilla":
        pytest.importorskip("stringzilla")
    return bool(request.param == "stringzilla")


@given(text=SEARCH_TEXT, start=st.integers(0, 1500), length=st.integers(0, 1200), inside=st.booleans())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_text_search_is_str_find(simd: bool, text: str, start: int, length: int, inside: bool) -> None:
    needle = text[start : start + length] if inside else ("ab漢" * length)[:length]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_search, "SIMD_MIN_CHARS", 0)  # short texts take the SIMD path too
        search = TextSearch(text, simd=simd)
        assert search.simd == simd
        assert search.first(needle) == text.find(needle)


def test_text_search_stays_linear_on_a_repetitive_text(simd: bool) -> None:
    text = "a" * 50_000
    needle = "a" * 700 + "b" + "a" * 300  # its probe occurs everywhere, the needle nowhere
    assert TextSearch(text, simd=simd).first(needle) == -1
    assert TextSearch(text + needle, simd=simd).first(needle) == 50_000
    probe = "".join(random.Random(0).choice("abc") for _ in range(256))
    needle = probe + "z" * 300
    for misses in range(12):  # the needle right at the probe's n-th hit, before and after the switch to str.find
        text = ((probe + "y") * misses + needle + "y") * 8
        assert TextSearch(text, simd=simd).first(needle) == text.find(needle) == misses * 257


def test_text_search_without_utf8_falls_back_to_str_find() -> None:
    text = "x\ud800" + "ab" * 5000  # a lone surrogate: no UTF-8 form
    search = TextSearch(text)
    assert not search.simd
    assert search.first("ba") == text.find("ba") == 3


def _dump(record: PromptRecord) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude={"created_at"})


def _same_record_and_report(
    messages: list[dict[str, str]],
    chunks: list[dict[str, str]],
    question: str | None,
    answer: dict[str, Any],
    store: set[str] | None,
) -> PromptRecord:
    fast = record_from_messages(messages, chunks, question=question, request_id="r-1")
    slow = ref.record_from_messages(messages, chunks, question=question, request_id="r-1")
    assert _dump(fast) == _dump(slow)
    fast_report = check(fast, answer, known_ids=store)
    slow_report = check(slow, answer, known_ids=store)
    assert fast_report == slow_report
    return fast


WORDS = st.sampled_from(["revenue", "grew", "12%", "in", "2023", "café", 'said "no"', "a\\b", "<tag>", "R&D", "漢字"])
CHUNK_TEXT = st.lists(WORDS, min_size=3, max_size=14).map(" ".join)
FATE = st.sampled_from(["complete", "complete", "truncated", "header_only", "missing", "duplicate"])
SEPARATOR = st.sampled_from([" ", "  ", "\n", "\r\n", "\t", " \u00a0 "])


def _mangle(text: str, separator: str, escape_times: int, nfd: bool) -> str:
    out = text.replace(" ", separator)
    for _ in range(escape_times):
        out = html.escape(out, quote=True)
    return unicodedata.normalize("NFD", out) if nfd else out


@given(
    st.lists(st.tuples(CHUNK_TEXT, FATE), min_size=1, max_size=6),
    SEPARATOR,
    st.integers(0, 2),
    st.booleans(),
    st.sampled_from([None, "", "What grew in 2023?", "revenue grew"]),
    st.data(),
)
@pytest.mark.slow
@settings(max_examples=250, deadline=None)
def test_records_and_findings_are_the_reference(
    chunk_specs: list[tuple[str, str]],
    separator: str,
    escape_times: int,
    nfd: bool,
    question: str | None,
    data: st.DataObject,
) -> None:
    chunks = [{"id": f"c-{i}", "text": text} for i, (text, _) in enumerate(chunk_specs)]
    blocks = []
    for i, (text, fate) in enumerate(chunk_specs):
        sent = _mangle(text, separator, escape_times, nfd)
        if fate == "truncated":
            sent = sent[: max(1, len(sent) * 2 // 3)]
        elif fate == "header_only":
            sent = ""
        elif fate == "duplicate":
            sent = sent + " / " + sent
        if fate != "missing":
            blocks.append(f'<source id="c-{i}">{sent}</source>')
    body = "\n".join(blocks)
    if question:
        body += f"\n<question>{_mangle(question, separator, escape_times, nfd)}</question>"
    messages = [{"role": "system", "content": "Answer with\tsources.\n"}, {"role": "user", "content": body}]
    claims = []
    for k in range(data.draw(st.integers(1, 5))):
        cited = data.draw(st.integers(0, len(chunks)))  # len(chunks): an id that is not in the prompt
        cid = chunks[cited]["id"] if cited < len(chunks) else f"c-{cited + 7}"
        source = data.draw(st.sampled_from([c["text"] for c in chunks] + [question or "grew in", "nowhere at all"]))
        start = data.draw(st.integers(0, max(0, len(source) - 2)))
        span = source[start : start + data.draw(st.integers(1, 40))]
        citation: dict[str, Any] = {"chunk_id": cid}
        if span.strip() and data.draw(st.booleans()):
            citation["span"] = span
        claims.append({"text": f"Claim {k} says revenue grew 12% in 2023.", "citations": [citation]})
    store = {c["id"] for c in chunks} | {"c-9"} if data.draw(st.booleans()) else None
    _same_record_and_report(messages, chunks, question, {"claims": claims}, store)


@given(
    st.lists(CHUNK_TEXT, min_size=1, max_size=6, unique=True), st.sampled_from(["answer_structured", "answer_naive"])
)
@settings(max_examples=100, deadline=None)
def test_serialized_records_keep_their_json(texts: list[str], template: str) -> None:
    # The prompt log stores this JSON and hash-chains it: a record built by serialize must not change by a byte.
    context = assemble("What grew & why?", [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)])
    fast = serialize(context, template=template, request_id="r-1")
    slow = ref.serialize(context, template=template, request_id="r-1")
    assert fast.model_dump_json() == slow.model_copy(update={"created_at": fast.created_at}).model_dump_json()
    assert PromptRecord.model_validate_json(slow.model_dump_json()) == slow


def _large_case(
    rng: random.Random, ascii_only: bool
) -> tuple[list[dict[str, str]], list[dict[str, str]], str, dict[str, Any]]:
    """The guard benchmark's shape (100 chunks of ~1,000 characters) with everything the fast path must keep."""
    words = 'revenue margin freight clause buyer seller R&D <policy> dosage "patient" trial court 12% 3.5'.split()
    if not ascii_only:
        words += ["café", "naïve", "—", "漢字", "\U0001f600"]
    texts = [" ".join(rng.choice(words) for _ in range(160)) for _ in range(100)]
    texts[42] = "Zebra quartz jukebox: no other chunk has words like these. " + texts[42]  # not even a prefix survives
    chunks = [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)]
    question = "What does the contract say about freight & insurance?"
    record = serialize(assemble(question, chunks), template="answer_structured")
    user = record.messages[1].content
    cut_body = html.escape(texts[40], quote=True)
    user = user.replace(cut_body, cut_body[: len(cut_body) // 2])  # chunk 40 truncated
    user = user.replace(html.escape(texts[41], quote=True), "")  # chunk 41: only its id header survives
    user = user.replace(f'<source id="c-42">{html.escape(texts[42], quote=True)}</source>', "")  # 42: gone
    user = user.replace("\n", "\r\n  ", 30)  # irregular whitespace in the first lines
    messages = [{"role": m.role, "content": m.content} for m in record.messages]
    messages[1]["content"] = user
    claims = []
    for k in range(20):
        index = rng.choice([3, 17, 40, 40, 41, 42, 55, 99])
        start = rng.randrange(0, len(texts[index]) - 60)
        span = texts[index][start : start + 50].strip()
        cited = f"c-{index}" if k % 7 else f"c-{(index + 1) % 100}"  # every 7th cites the neighbour
        claims.append({"text": f"The source states that {span}.", "citations": [{"chunk_id": cited, "span": span}]})
    claims.append({"text": "It says freight & insurance.", "citations": [{"chunk_id": "c-5", "span": "freight &"}]})
    claims.append({"text": "Stale.", "citations": [{"chunk_id": "c-500", "span": "revenue"}]})
    claims.append({"text": "Invented.", "citations": [{"chunk_id": "c-x", "span": "revenue"}]})
    claims.append({"text": "The buyer always pays the freight charges in full."})
    return messages, chunks, question, {"claims": claims}


@pytest.mark.parametrize(("seed", "ascii_only"), [(0, True), (1, False), (2, False)])
def test_a_large_prompt_gives_the_reference_record_and_findings(simd: bool, seed: int, ascii_only: bool) -> None:
    messages, chunks, question, answer = _large_case(random.Random(seed), ascii_only)
    store = {c["id"] for c in chunks} | {"c-500"}
    with pytest.MonkeyPatch.context() as patch:
        if not simd:
            patch.setattr(_search, "stringzilla", None)
        assert _serialize._Normalized([Message(**m) for m in messages]).searches[1].simd == simd
        record = _same_record_and_report(messages, chunks, question, answer, store)
    statuses = {pc.id: pc.status for pc in record.chunks}
    assert (statuses["c-40"], statuses["c-41"], statuses["c-42"], statuses["c-0"]) == (
        "truncated",
        "truncated",
        "missing",
        "complete",
    )
    assert record.question_placement is not None
    assert len(record.offset_maps[1]) > 1  # the CRLF runs shifted the map
    reasons = {f.reason.value for f in check(record, answer, known_ids=store).findings}
    assert {"SPAN_ONLY_IN_QUESTION", "STALE_ID", "FABRICATED_ID", "UNCITED_CLAIM"} <= reasons


@given(
    st.sampled_from(["..", "#1#", "7", "x-1", "[2]"]),
    st.lists(st.sampled_from([*'. #17x-[]="', "..", "....", "#1#1#", "[2]", "x-1", "body text here"]), max_size=30),
)
@settings(max_examples=300, deadline=None)
def test_header_only_chunks_are_found_where_the_reference_finds_them(chunk_id: str, pieces: list[str]) -> None:
    # Ids whose occurrences overlap, ids of digits only, occurrences inside another chunk's body: the missing
    # chunk becomes header-only at exactly the occurrence the reference's regex scan accepts.
    text = "".join(pieces)
    messages = [{"role": "user", "content": f"{text} <source>body text here</source> {text[::-1]}"}]
    chunks = [{"id": "b", "text": "body text here"}, {"id": chunk_id, "text": "a body that was cut from the prompt"}]
    fast = record_from_messages(messages, chunks, request_id="r-1")
    slow = ref.record_from_messages(messages, chunks, request_id="r-1")
    assert _dump(fast) == _dump(slow)


def test_a_header_only_id_is_matched_left_to_right_without_overlaps() -> None:
    # ".." first matches across the end of the located body (rejected); the regex scan resumes after that match,
    # so the header is the next ".." two characters on, not the overlapping one in between.
    messages = [{"role": "user", "content": "<source>body text .....</source>"}]
    chunks = [{"id": "b", "text": "body text ."}, {"id": "..", "text": "a body that was cut from the prompt"}]
    fast = record_from_messages(messages, chunks, request_id="r-1")
    assert _dump(fast) == _dump(ref.record_from_messages(messages, chunks, request_id="r-1"))
    placement = fast.chunks[1].placement
    assert fast.chunks[1].status == "truncated" and placement is not None and placement.norm_start == 22


def _expertqa_prompts(path: Path, limit: int) -> list[tuple[str, list[str], list[str]]]:
    """(question, evidence passages, claim strings) of the first ``limit`` ExpertQA questions with evidence."""
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            passages: list[str] = []
            claims: list[str] = []
            for answer in row["answers"].values():
                for claim in answer.get("claims") or []:
                    claims.append(claim["claim_string"])
                    for evidence in claim.get("evidence") or []:
                        text = evidence.split("\n\n", 1)[-1].strip()  # "[n] URL\n\npassage"
                        if text and text not in passages:
                            passages.append(text)
            if len(passages) >= 4:
                out.append((row["question"], passages[:20], claims))
            if len(out) == limit:
                break
    return out


@pytest.mark.shared_data
def test_real_web_passages_give_the_reference_records_and_findings(shared_data: Path) -> None:
    # Real evidence passages (web text: Unicode, entities after escaping, odd whitespace) rendered by the
    # structured template, then cut like a real truncating stack: a body halved, a body dropped, CRLF line ends.
    cases = _expertqa_prompts(shared_data / "expertqa" / "val.jsonl", 40)
    assert len(cases) == 40
    rng = random.Random(0)
    statuses: set[str] = set()
    reasons: set[str] = set()
    sizes = []
    pool: list[str] = []  # earlier questions' passages: off-topic chunks, as a retriever returns them
    for question, own, claim_strings in cases:
        passages = own + [text for text in pool[-30:] if text not in own]
        pool += own
        chunks = [{"id": f"e-{i}", "text": text} for i, text in enumerate(passages)]
        user = serialize(assemble(question, chunks)).messages[1].content
        halved, cut, gone = (html.escape(passages[i], quote=True) for i in (1, 2, 3))
        user = user.replace(halved, halved[: len(halved) // 2]).replace(cut, "")  # e-2: only its id header stays
        user = user.replace(f'<source id="e-3">{gone}</source>', "").replace("\n", "\r\n", 5)
        messages = [{"role": "system", "content": "Cite the sources."}, {"role": "user", "content": user}]
        claims = []
        for k, claim in enumerate(claim_strings[:12]):
            source = rng.choice([*passages, question])
            start = rng.randrange(max(1, len(source) - 40))
            span = source[start : start + 40]
            cited = chunks[rng.randrange(len(chunks))]["id"] if k % 5 else "e-999"
            citation = {"chunk_id": cited, "span": span} if span.strip() else {"chunk_id": cited}
            claims.append({"text": claim, "citations": [citation]})
        store = {c["id"] for c in chunks}
        record = _same_record_and_report(messages, chunks, question, {"claims": claims}, store)
        statuses |= {pc.status for pc in record.chunks}
        reasons |= {f.reason.value for f in check(record, {"claims": claims}, known_ids=store).findings}
        sizes.append(len(user))
    assert statuses == {"complete", "truncated", "missing"}
    assert {"SPAN_NOT_IN_CHUNK", "SPAN_IN_OTHER_CHUNK", "SPAN_ONLY_IN_QUESTION", "FABRICATED_ID"} <= reasons
    assert sum(size >= _search.SIMD_MIN_CHARS for size in sizes) >= 30  # searched with SIMD when installed
