"""Detect-only mode: [n] markers and quotations in free text, checked against numbered sources (no framework)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import citelock
from citelock import Guard, InputError, ParseError, SurfacePolicy, UsageError
from citelock.evals._framework_answers import CLASSES, framework_answers, measure
from citelock.integrations import Detection, Detector, Source, numbered_chunks
from citelock.records import ReasonCode
from citelock.store import PromptLog, ResultStore, ReviewQueue

R = ReasonCode
SOURCES = [
    "Revenue grew 12% in 2023. Margins were flat in the first half of the year. The board approved a dividend of "
    "4 cents per share in March after a long review of the capital plan by the audit committee.",
    "The freight clause applies to all shipments over 20 kg. Claims must be filed within 30 days of delivery.",
    "The Lisbon office opened in 2019 and employs 140 people across three departments of the company.",
]


def run(text: str, sources: list[str] | None = None, **kwargs: object) -> Detection:
    return Detector(Guard(relevance="off")).run(text, sources or SOURCES, **kwargs)  # type: ignore[arg-type]


def reasons(found: Detection) -> list[tuple[int, str]]:
    return [(f.claim_index, f.reason.value) for f in found.findings]


def test_markers_single_list_and_range_name_sources_by_number() -> None:
    found = run("Revenue grew 12% [1]. Claims are filed within 30 days [1, 2]. The office opened in 2019 [2-3].")
    cited = [[c.chunk_id for c in claim.citations] for claim in found.answer.claims]
    assert cited == [["1"], ["1", "2"], ["2", "3"]]
    assert found.ok and found.passing and found.verified() == (0, 1, 2)
    dashed = run("The office opened in 2019 [2\u20133].")
    assert [c.chunk_id for c in dashed.answer.claims[0].citations] == ["2", "3"]


@pytest.mark.parametrize("marker", ["[4]", "[9]", "[0]", "[3-5]"])
def test_an_out_of_range_marker_is_id_not_in_prompt(marker: str) -> None:
    found = run(f"The office opened in 2019 {marker}.")
    assert (0, "ID_NOT_IN_PROMPT") in reasons(found)
    assert not found.passing
    assert all(found.source(f.chunk_id) is None for f in found.findings if f.chunk_id is not None)


def test_a_verbatim_correctly_attributed_quote_is_verified() -> None:
    found = run('The report says "Revenue grew 12% in 2023" [1]. It adds "Claims must be filed within 30 days" [2].')
    assert found.ok, reasons(found)
    spans = [(c.chunk_id, c.span) for claim in found.answer.claims for c in claim.citations]
    assert spans == [("1", "Revenue grew 12% in 2023"), ("2", "Claims must be filed within 30 days")]


def test_a_quote_found_in_no_source_is_span_not_in_chunk() -> None:
    found = run('The report says "Revenue soared 12% in 2023" [1].')
    assert reasons(found) == [(0, "SPAN_NOT_IN_CHUNK")]
    assert found.findings[0].span == "Revenue soared 12% in 2023"


@pytest.mark.parametrize(
    "quote",
    [
        "Revenue grew 12% ... a dividend of 4 cents per share",  # cut at an ellipsis
        "Revenue grew 12% \u2026 the audit committee",
        # two runs of 8+ words, verbatim apart, never contiguous
        "Margins were flat in the first half of the year review of the capital plan by the audit committee",
    ],
)
def test_a_quote_stitched_from_pieces_never_contiguous_is_span_stitched(quote: str) -> None:
    found = run(f'The filing says "{quote}" [1].')
    assert reasons(found) == [(0, "SPAN_STITCHED")]


def test_a_paraphrase_is_not_a_stitch() -> None:
    found = run('The filing says "Margins were reportedly flat in the first half of the year" [1].')
    assert reasons(found) == [(0, "SPAN_NOT_IN_CHUNK")]


def test_the_core_guard_gives_the_same_code_to_a_stitched_span() -> None:
    record = citelock.serialize(citelock.assemble("q?", [{"id": "c-1", "text": SOURCES[0]}]))
    answer = {"claims": [{"text": "x", "citations": [{"chunk_id": "c-1", "span": "Revenue grew 12% ... 4 cents"}]}]}
    report = citelock.check(record, answer, relevance=False, numbers=False)
    assert [f.reason for f in report.findings] == [R.SPAN_STITCHED]
    assert "never contiguous" in report.findings[0].detail


def test_a_verbatim_quote_attributed_to_the_wrong_source_is_span_in_other_chunk() -> None:
    found = run('The contract says "The freight clause applies to all shipments over 20 kg" [3].')
    assert reasons(found) == [(0, "SPAN_IN_OTHER_CHUNK")]
    assert found.findings[0].related_chunk_id == "2"


def test_a_quote_is_attributed_to_whichever_cited_source_holds_it() -> None:
    found = run('Both note "Claims must be filed within 30 days" [1, 2].')
    assert found.ok
    assert [(c.chunk_id, c.span) for c in found.answer.claims[0].citations] == [
        ("2", "Claims must be filed within 30 days"),
        ("1", None),
    ]


def test_an_unmarked_quote_is_attributed_to_its_source_or_to_the_nearest_citation() -> None:
    held = run('Shipping is covered: "applies to all shipments over 20 kg".')
    assert held.ok and held.answer.claims[0].citations[0].chunk_id == "2"
    invented = run('Revenue grew 12% [1]. It also says "margins doubled in every quarter".')
    assert reasons(invented) == [(1, "SPAN_NOT_IN_CHUNK")]
    assert invented.findings[0].chunk_id == "1"


def test_scare_quotes_are_not_citations() -> None:
    found = run('The "capital plan" was reviewed by the audit committee [1].')
    assert found.ok and found.answer.claims[0].citations[0].span is None


def test_numbering_from_zero_and_the_quoted_answer_shape() -> None:
    detector = Detector(Guard(relevance="off"), first=0)
    answer = detector.quoted(
        "Revenue grew.", [(0, "Revenue grew 12% in 2023"), (5, "anything at all"), (1, "Revenue grew 12% in 2023")]
    )
    found = detector.run(answer, SOURCES)
    assert [(f.reason.value, f.chunk_id) for f in found.findings] == [
        ("ID_NOT_IN_PROMPT", "5"),
        ("SPAN_IN_OTHER_CHUNK", "1"),
    ]
    assert found.source("0") == Source(SOURCES[0]) and found.source("3") is None
    with pytest.raises(InputError, match="blank"):
        detector.quoted("x", [(0, "  ")])


def test_bad_input_names_what_was_expected() -> None:
    with pytest.raises(InputError, match="no sources"):
        Detector().run("Revenue grew [1].", [])
    with pytest.raises(ParseError, match="empty"):
        run("   ")
    with pytest.raises(ParseError, match="empty citation marker"):
        run("Revenue grew [].")
    with pytest.raises(UsageError, match="first must be"):
        Detector(first=-1)
    with pytest.raises(UsageError, match="surface"):
        Detector(sinks=[ResultStore("sqlite://")])
    with pytest.raises(InputError, match="first must be"):
        numbered_chunks(["a"], first=-2)


def test_findings_reach_the_queue_the_store_and_the_log(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    seen: list[Detection] = []
    guard = Guard(SurfacePolicy(name="docs", stakes="low", sample_rate=0.0, relevance="off"))
    detector = Detector(guard, log=PromptLog(db), sinks=[ReviewQueue(db), ResultStore(db), seen.append])
    found = detector.run('It says "Revenue soared 12% in 2023" [1]. The office opened in 2019 [7].', SOURCES)
    assert not found.passing and seen == [found]
    queued = sorted(entry.reason.value for entry, _ in ReviewQueue(db).items())
    assert queued == ["ID_NOT_IN_PROMPT", "SPAN_NOT_IN_CHUNK"]
    assert ResultStore(db).for_request(found.record.request_id, surface="docs") is not None
    assert PromptLog(db).get(found.record.request_id).sha256 == found.record.sha256


def test_the_seeded_framework_answers_every_defect_found_no_clean_quote_flagged() -> None:
    tallies = measure(framework_answers(seed=202, per_class=12), baseline=False)
    assert set(tallies) == set(CLASSES)
    for name, t in tallies.items():
        assert t.answers == 12
        assert t.clean_flagged == 0, name
        if name != "clean":
            assert t.found_code == t.answers, name


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("_langchain", "langchain_core", "langchain"),
        ("_llamaindex", "llama_index", "llamaindex"),
        ("_haystack", "haystack", "haystack"),
    ],
)
def test_a_missing_framework_names_its_extra(module: str, framework: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        "try:\n"
        f"    import citelock.integrations.{module}\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingExtraError") and f'pip install "citelock[{extra}]"' in out


@settings(max_examples=60, deadline=None)
@given(
    numbers=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=4),
    quote_from=st.integers(min_value=0, max_value=2),
)
def test_no_out_of_range_marker_or_foreign_quote_is_ever_verified(numbers: list[int], quote_from: int) -> None:
    quote = SOURCES[quote_from].split(". ")[0].rstrip(".")
    marker = "[" + ", ".join(str(n) for n in numbers) + "]"
    found = run(f'The source says "{quote}" {marker}.')
    checks = found.result.report.citations
    for check in checks:
        in_range = check.chunk_id in {"1", "2", "3"}
        if not in_range:
            assert not check.passed and check.reason == R.ID_NOT_IN_PROMPT
        if check.passed and check.span is not None:
            assert check.chunk_id == str(quote_from + 1)  # a verified quotation is in the source it names
    verified = found.verified()
    assert list(verified) == sorted(set(verified))
    assert set(verified) <= {int(c.chunk_id) - 1 for c in checks if c.passed}


@pytest.mark.parametrize("text", ["Revenue grew 12% in 2023 [1].", "Revenue grew 12% in 2023 [7].", "", "It grew []."])
def test_one_verdict_for_every_framework_door_and_an_unreadable_reply_fails_closed(text: str) -> None:
    """Haystack's component and LlamaIndex's query engine report the one verdict ``Detector.checked`` builds."""
    from citelock.integrations._detect import unreadable, verdict

    found, reply_verdict = Detector(Guard(relevance="off")).checked(text, SOURCES)
    if found is None:  # empty or malformed: nothing verified
        assert reply_verdict["passing"] is False and reply_verdict["verified_documents"] == []
        assert reply_verdict["error"] is not None and set(reply_verdict) == set(unreadable(ParseError("x")))
        return
    assert reply_verdict == verdict(found) and reply_verdict["error"] is None
    assert reply_verdict["passing"] == found.passing and reply_verdict["verified_documents"] == list(found.verified())
    assert reply_verdict["reasons"] == [f.reason.value for f in found.findings]
    assert reply_verdict["passing"] is (text.endswith("[1]."))  # [7] names no source: ID_NOT_IN_PROMPT blocks
    for module, name in (("_haystack", "verdict_of"), ("_llamaindex", "citelock_metadata")):
        door = pytest.importorskip(f"citelock.integrations.{module}")
        assert getattr(door, name) is verdict
