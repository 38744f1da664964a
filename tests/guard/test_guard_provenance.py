import pytest

from citelock import ReasonCode, assemble, check, record_from_messages, serialize

CHUNKS = [
    {"id": "c-1", "text": "Revenue grew 12% in 2023 & margins <expanded>.\nThe CEO said so."},
    {"id": "c-2", "text": "Freight costs are borne by the buyer under clause 7."},
    {"id": "c-10", "text": 'Café opened in 1999 with "quotes" and a back\\slash.'},
]
STORE = {"c-1", "c-2", "c-10", "c-100", "c-50"}


@pytest.fixture(scope="module")
def record():
    return serialize(assemble("Who pays freight under clause 7?", CHUNKS))


def _one(record, chunk_id, span=None, store=None):
    cite = {"chunk_id": chunk_id} if span is None else {"chunk_id": chunk_id, "span": span}
    return check(record, {"claims": [{"text": "A claim.", "citations": [cite]}]}, known_ids=store).citations[0]


@pytest.mark.parametrize(
    ("chunk_id", "span", "store", "reason"),
    [
        ("c-999", None, None, ReasonCode.ID_NOT_IN_PROMPT),
        ("c-999", None, STORE, ReasonCode.FABRICATED_ID),
        ("c-100", None, STORE, ReasonCode.STALE_ID),
        ("c-50", "anything", STORE, ReasonCode.STALE_ID),
        ("c-1", "borne by the buyer", None, ReasonCode.SPAN_IN_OTHER_CHUNK),
        ("c-1", "Who pays freight", None, ReasonCode.SPAN_ONLY_IN_QUESTION),
        ("c-1", "Revenue fell", None, ReasonCode.SPAN_NOT_IN_CHUNK),
        ("c-2", "clause 7.", None, None),
        ("c-10", 'with "quotes" and a back\\slash', None, None),
        ("c-1", "2023 &amp; margins &lt;expanded&gt;. The CEO", None, None),
        ("c-1", "2023 & margins <expanded>.\r\n  The   CEO", None, None),
    ],
)
def test_reason_codes(record, chunk_id, span, store, reason) -> None:
    result = _one(record, chunk_id, span, store)
    assert result.reason == reason
    assert result.passed is (reason is None)


def test_look_alike_ids_are_distinct(record) -> None:
    assert _one(record, "c-10", "Café opened").passed
    assert _one(record, "c-1", "Café opened").reason == ReasonCode.SPAN_IN_OTHER_CHUNK
    assert _one(record, "c-100", None, STORE).reason == ReasonCode.STALE_ID


def test_passing_span_carries_raw_offsets(record) -> None:
    result = _one(record, "c-1", "margins <expanded>. The")
    p = result.placement
    assert p is not None
    assert record.messages[p.message].content[p.start : p.end] == "margins &lt;expanded&gt;.\nThe"


def test_span_in_other_chunk_names_it(record) -> None:
    assert _one(record, "c-1", "borne by the buyer").related_chunk_id == "c-2"


def test_truncated_prompt_from_another_system() -> None:
    full = "Clause 7 says freight is borne by the buyer. Clause 8 says insurance is borne by the seller."
    cut = full[:50]
    messages = [
        {"role": "system", "content": "Use the context."},
        {"role": "user", "content": f"Context:\n[c-7] {cut}\n[c-8] Other text here.\n\nQuestion: who pays?"},
    ]
    record = record_from_messages(
        messages,
        [
            {"id": "c-7", "text": full},
            {"id": "c-8", "text": "Other text here."},
            {"id": "c-9", "text": "A chunk that never made it into the prompt at all."},
        ],
        question="who pays?",
    )
    statuses = {pc.id: pc.status for pc in record.chunks}
    assert statuses == {"c-7": "truncated", "c-8": "complete", "c-9": "missing"}
    assert _one(record, "c-7", "insurance is borne by the seller").reason == ReasonCode.SPAN_TRUNCATED
    assert _one(record, "c-7", "freight is borne by the buyer").passed
    assert _one(record, "c-9", None).reason == ReasonCode.ID_NOT_IN_PROMPT
    assert _one(record, "c-8", "who pays").reason == ReasonCode.SPAN_ONLY_IN_QUESTION
    assert record.question_placement is not None


def test_findings_carry_everything_a_reviewer_needs(record) -> None:
    answer = {
        "claims": [{"text": "Buyers pay freight.", "citations": [{"chunk_id": "c-1", "span": "borne by the buyer"}]}]
    }
    report = check(record, answer)
    (finding,) = report.findings
    assert finding.request_id == record.request_id
    assert finding.prompt_sha256 == record.sha256
    assert finding.claim == "Buyers pay freight."
    assert finding.chunk_id == "c-1" and finding.span == "borne by the buyer"
    assert finding.passage and finding.passage.startswith("Revenue grew 12%")
    assert finding.verdicts == {"provenance": "fail"}
    assert not report.ok and report.counts == {"SPAN_IN_OTHER_CHUNK": 1}


def test_numbers_and_coverage(record) -> None:
    answer = {
        "claims": [
            {"text": "There are two points:"},
            {"text": "Revenue grew 15% in 2023.", "citations": [{"chunk_id": "c-1"}]},
            {"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1"}]},
            {"text": "The buyer pays freight under clause 7."},
            {"text": "I hope this helps!"},
        ]
    }
    report = check(record, answer)
    reasons = [(f.claim_index, f.reason) for f in report.findings]
    assert reasons == [(3, ReasonCode.UNCITED_CLAIM), (1, ReasonCode.NUMBER_MISMATCH)]
    assert "15" in report.findings[1].detail
    assert [c.factual for c in report.claims] == [False, True, True, True, False]
