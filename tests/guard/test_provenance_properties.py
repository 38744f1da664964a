"""Property tests: provenance is exact after normalization, in both directions."""

import html
import unicodedata

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from citelock import check, record_from_messages
from citelock.text import normalize

WORDS = st.sampled_from(
    [
        "revenue",
        "grew",
        "12%",
        "in",
        "2023",
        "café",
        "naïve",
        'said "no"',
        "a\\b",
        "<tag>",
        "R&D",
        "漢字",
        "—",
        "x",
    ]
)
CHUNK = st.lists(WORDS, min_size=3, max_size=12).map(" ".join)
SEPARATORS = st.sampled_from([" ", "  ", "\n", "\r\n", "\t", " \u00a0 "])


def _mangle(text: str, seps: list[str], escape_times: int, nfd: bool) -> str:
    words = text.split(" ")
    out = words[0]
    for index, word in enumerate(words[1:]):
        out += seps[index % len(seps)] + word
    for _ in range(escape_times):
        out = html.escape(out, quote=True)
    return unicodedata.normalize("NFD", out) if nfd else out


@given(
    st.lists(CHUNK, min_size=1, max_size=4),
    st.data(),
    st.lists(SEPARATORS, min_size=1, max_size=4),
    st.integers(0, 2),
    st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_span_cut_from_a_chunk_passes_after_prompt_side_changes(
    texts: list[str], data: st.DataObject, seps: list[str], escape_times: int, nfd: bool
) -> None:
    chunks = [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)]
    target = data.draw(st.integers(0, len(texts) - 1))
    text = texts[target]
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    span = text[start:end]
    assume(span.strip())
    body = "\n".join(f'<source id="c-{i}">{_mangle(t, seps, escape_times, nfd)}</source>' for i, t in enumerate(texts))
    messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": body + "\nQ?"}]
    record = record_from_messages(messages, chunks)
    assert record.chunks[target].status == "complete"
    answer = {"claims": [{"text": "claim", "citations": [{"chunk_id": f"c-{target}", "span": span}]}]}
    report = check(record, answer, numbers=False)
    result = report.citations[0]
    assert result.passed, result
    assert result.placement is not None
    raw = record.messages[result.placement.message].content[result.placement.start : result.placement.end]
    assert normalize(raw) == normalize(span)


@given(st.lists(CHUNK, min_size=1, max_size=4), st.text(min_size=1, max_size=30))
@settings(max_examples=150, deadline=None)
def test_span_not_in_the_chunk_never_passes(texts: list[str], span: str) -> None:
    assume(span.strip())
    chunks = [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)]
    assume(normalize(span) not in normalize(texts[0]))
    body = "\n".join(f'<source id="c-{i}">{html.escape(t)}</source>' for i, t in enumerate(texts))
    record = record_from_messages([{"role": "user", "content": body}], chunks)
    answer = {"claims": [{"text": "claim", "citations": [{"chunk_id": "c-0", "span": span}]}]}
    assert not check(record, answer).citations[0].passed
