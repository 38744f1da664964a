import re

import pytest

from citelock import MarkerPattern, ParseError, parse_answer, parse_free_text


def _ids(answer):
    return [[c.chunk_id for c in claim.citations] for claim in answer.claims]


def test_marker_styles() -> None:
    answer = parse_answer(
        {
            "text": 'Revenue grew 12% [c-8812]. Margins expanded [3, 5]. <cite id="s1">Costs fell.</cite> '
            "Freight is on the buyer.[c-2][c-3] Thanks!"
        }
    )
    assert [c.text for c in answer.claims] == [
        "Revenue grew 12%.",
        "Margins expanded.",
        "Costs fell.",
        "Freight is on the buyer.",
        "Thanks!",
    ]
    assert _ids(answer) == [["c-8812"], ["3", "5"], ["s1"], ["c-2", "c-3"], []]
    assert answer.format == "free_text"


def test_marker_at_start_of_next_sentence_belongs_to_previous() -> None:
    answer = parse_free_text("Revenue grew.[1] Margins fell. [2]\nCosts rose [3].")
    assert _ids(answer) == [["1"], ["2"], ["3"]]


def test_numbered_sources_map_to_ids() -> None:
    answer = parse_free_text("A holds [2]. B holds [1, 2].", ids_by_number=["c-a", "c-b"])
    assert _ids(answer) == [["c-b"], ["c-a", "c-b"]]
    with pytest.raises(ParseError, match="out of range"):
        parse_free_text("A holds [3].", ids_by_number=["c-a", "c-b"])


def test_markdown_links_are_not_citations() -> None:
    answer = parse_free_text("See [the docs](https://example.org) for details.")
    assert _ids(answer) == [[]]


def test_custom_pattern() -> None:
    pattern = MarkerPattern(re.compile(r"\(source:\s*(?P<ids>[\w-]+)\)"), "source tag")
    answer = parse_free_text("Revenue grew (source: doc-7).", markers=[pattern])
    assert _ids(answer) == [["doc-7"]]


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ('{"claims": [', "line 1"),
        ({"claims": {}}, "claims"),
        ({"claims": [{"text": "x", "citations": [{"chunk_id": ""}]}]}, "claims[0].citations[0].chunk_id"),
        (
            {"claims": [{"text": "x", "citations": [{"chunk_id": "a", "span": "  "}]}]},
            "claims[0].citations[0].span",
        ),
        ({"claims": [{"text": "x", "extra": 1}]}, "claims[0].extra"),
        ({"claims": [{"citations": [{"chunk_id": "a"}]}]}, "claims[0].text"),
        ({"answer": "x"}, "answer"),
        ({"text": ""}, "text"),
        ({"text": 'Unclosed <cite id="a">quote.'}, "offset 9"),
        ({"text": "Empty marker [] here."}, "offset 13"),
        ({"text": 5}, "text"),
        ([1, 2], None),
        (b"\xff\xfe bad", "byte 0"),
    ],
)
def test_malformed_answers_say_what_and_where(data, where) -> None:
    with pytest.raises(ParseError) as info:
        parse_answer(data)
    if where:
        assert where in str(info.value)


def test_an_empty_citations_list_is_an_uncited_claim() -> None:
    answer = parse_answer(
        {"claims": [{"text": "Revenue grew.", "citations": [{"chunk_id": "c-1"}]}, {"text": "Hi.", "citations": []}]}
    )
    assert _ids(answer) == [["c-1"], []]
    assert parse_answer('{"claims": [{"text": "x", "citations": []}]}').claims[0].citations == ()
