"""Diagnoses that must send a reviewer the right way: straddling spans and chunks cut down to their id header."""

from citelock import ReasonCode, check, parse_answer, record_from_messages

ALPHA = "Alpha beta gamma is the first chunk and it ends here."
DELTA = "Delta epsilon zeta opens the second chunk of the prompt."


def _cite(record, chunk_id, span=None):
    cite = {"chunk_id": chunk_id} if span is None else {"chunk_id": chunk_id, "span": span}
    report = check(record, {"claims": [{"text": "A claim.", "citations": [cite]}]}, relevance=False)  # provenance only
    return report.citations[0], report.findings


def _plain_record():
    # A prompt another system assembled with nothing but a line break between chunk bodies.
    messages = [{"role": "user", "content": f"Context:\n{ALPHA}\n{DELTA}\n\nQuestion: what opens the second?"}]
    chunks = [{"id": "c-1", "text": ALPHA}, {"id": "c-2", "text": DELTA}]
    return record_from_messages(messages, chunks, question="what opens the second?")


def test_a_span_across_two_chunks_is_not_in_chunk_and_names_both() -> None:
    record = _plain_record()
    result, findings = _cite(record, "c-1", "it ends here. Delta epsilon")
    assert result.reason == ReasonCode.SPAN_NOT_IN_CHUNK
    assert result.related_chunk_id == "c-2"
    (finding,) = findings
    assert "straddles chunks c-1 and c-2" in finding.detail


def test_a_span_in_the_question_is_still_only_in_question() -> None:
    result, findings = _cite(_plain_record(), "c-1", "what opens the second")
    assert result.reason == ReasonCode.SPAN_ONLY_IN_QUESTION
    assert "straddles" not in findings[0].detail


def test_a_span_nowhere_is_not_in_chunk_without_a_straddle() -> None:
    result, findings = _cite(_plain_record(), "c-1", "omega psi")
    assert result.reason == ReasonCode.SPAN_NOT_IN_CHUNK
    assert result.related_chunk_id is None
    assert "straddles" not in findings[0].detail


def _header_only_record(chunk_id="c-9", header="[c-9]"):
    content = f"Context:\n[c-1] {ALPHA}\n{header}\n\nQuestion: who?"
    chunks = [{"id": "c-1", "text": ALPHA}, {"id": chunk_id, "text": DELTA}]
    return record_from_messages([{"role": "user", "content": content}], chunks, question="who?")


def test_a_chunk_cut_to_its_id_header_is_truncated_not_missing() -> None:
    record = _header_only_record()
    assert {pc.id: pc.status for pc in record.chunks} == {"c-1": "complete", "c-9": "truncated"}
    assert "c-9" in record.prompt_ids
    result, findings = _cite(record, "c-9", "Delta epsilon zeta")
    assert result.reason == ReasonCode.SPAN_TRUNCATED
    result, findings = _cite(record, "c-9")
    assert result.reason == ReasonCode.SPAN_TRUNCATED
    assert "whole body was cut" in findings[0].detail


def test_an_id_that_only_occurs_inside_another_chunk_or_the_question_stays_missing() -> None:
    messages = [{"role": "user", "content": f"Context:\n[c-1] {ALPHA} See c-9.\n\nQuestion: is c-7 there?"}]
    chunks = [
        {"id": "c-1", "text": f"{ALPHA} See c-9."},
        {"id": "c-9", "text": DELTA},
        {"id": "c-7", "text": DELTA + " Again."},
    ]
    record = record_from_messages(messages, chunks, question="is c-7 there?")
    assert {pc.id: pc.status for pc in record.chunks} == {"c-1": "complete", "c-9": "missing", "c-7": "missing"}
    assert _cite(record, "c-9")[0].reason == ReasonCode.ID_NOT_IN_PROMPT


def test_a_numeric_id_needs_header_punctuation() -> None:
    assert _header_only_record("3", "[3]").chunks[1].status == "truncated"
    assert _header_only_record("3", "There were 3 of them.").chunks[1].status == "missing"


def test_empty_citations_list_is_an_uncited_claim_for_the_guard() -> None:
    record = _plain_record()
    answer = parse_answer({"claims": [{"text": "Delta epsilon zeta opens the second chunk.", "citations": []}]})
    report = check(record, answer)
    assert [f.reason for f in report.findings] == [ReasonCode.UNCITED_CLAIM]
