import html
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from citelock.text import compress_offsets, normalize, normalize_with_map, raw_offset

TEXT = st.text(alphabet=st.sampled_from(list("abcxyz ABC019.,;:'\"<>&\\\n\r\t\u00a0é\u0301ñ漢字—«»")), max_size=80)


def test_examples() -> None:
    assert normalize("  a \r\n\t b  ") == "a b"
    assert normalize("Tom &amp;amp; Jerry &lt;3 &#39;x&#x27;") == "Tom & Jerry <3 'x'"
    assert normalize("cafe\u0301") == "café"
    assert normalize("") == ""


@given(TEXT)
def test_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once


@given(TEXT)
def test_map_agrees_with_normalize(text: str) -> None:
    norm, offsets = normalize_with_map(text)
    assert norm == normalize(text)
    assert len(offsets) == len(norm) + 1
    assert offsets == sorted(offsets)
    assert offsets[-1] == len(text)
    anchors = compress_offsets(offsets)
    assert [raw_offset(anchors, i) for i in range(len(offsets))] == offsets


@given(TEXT, st.data())
@settings(max_examples=200)
def test_raw_range_normalizes_back(text: str, data: st.DataObject) -> None:
    norm, offsets = normalize_with_map(text)
    if not norm:
        return
    a = data.draw(st.integers(0, len(norm) - 1))
    b = data.draw(st.integers(a + 1, len(norm)))
    piece = norm[a:b]
    if piece != piece.strip():
        return
    # NFC can compose one raw cluster into several normalized characters that share one raw offset (a base letter
    # with two combining marks): a boundary inside such a cluster has no raw position to map back to.
    inside = (a > 0 and offsets[a] == offsets[a - 1]) or (b < len(norm) and offsets[b] == offsets[b - 1])
    if inside:
        return
    assert normalize(text[offsets[a] : offsets[b]]) == piece


@given(TEXT)
def test_escaping_whitespace_and_nfd_do_not_change_the_result(text: str) -> None:
    variant = html.escape(text).replace(" ", " \r\n ")
    assert normalize(variant) == normalize(text)
    assert normalize(unicodedata.normalize("NFD", text)) == normalize(text)
