"""Native citation adapters on recorded provider JSON (written from each provider's documented format)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock.adapters import (
    anthropic_record,
    cohere_record,
    from_anthropic,
    from_cohere,
    from_openai_file_search,
    openai_file_search_record,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "provider_responses"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def cites(answer: citelock.Answer) -> list[list[tuple[str, str | None]]]:
    return [[(c.chunk_id, c.span) for c in claim.citations] for claim in answer.claims]


def test_anthropic_citations_become_claims_with_quotes_and_pass_the_guard() -> None:
    answer = from_anthropic(load("anthropic_response.json"), document_ids=["grass-doc", "physics"])
    assert [c.text for c in answer.claims] == [
        "According to the document, the grass is green and the sky is blue.",
        "Water boils at 100 degrees Celsius at sea level.",
    ]
    assert cites(answer) == [
        [("grass-doc", "The grass is green."), ("grass-doc", "The sky is blue.")],
        [("physics", "Water boils at 100 degrees Celsius at sea level.")],
    ]
    record = anthropic_record(load("anthropic_request.json"), document_ids=["grass-doc", "physics"])
    assert [pc.status for pc in record.chunks] == ["complete", "complete"]
    assert record.question == "What color is the grass and sky, and when does water boil?"
    report = citelock.check(record, answer)
    assert report.ok, report.findings


def test_anthropic_bad_quote_and_unknown_document_are_findings() -> None:
    record = anthropic_record(load("anthropic_request.json"))
    answer = from_anthropic(load("anthropic_response_bad_quote.json"), document_ids=["doc-0", "doc-1", "x", "doc-3"])
    reasons = sorted(f.reason.value for f in citelock.check(record, answer).findings)
    assert reasons == ["ID_NOT_IN_PROMPT", "SPAN_NOT_IN_CHUNK"]


def test_anthropic_document_index_out_of_range_is_an_input_error() -> None:
    with pytest.raises(citelock.InputError, match="document_index 3"):
        from_anthropic(load("anthropic_response_bad_quote.json"), document_ids=["a", "b"])


def test_anthropic_unknown_citation_type_is_an_error_not_dropped() -> None:
    response = {"content": [{"type": "text", "text": "x.", "citations": [{"type": "mystery", "cited_text": "x"}]}]}
    with pytest.raises(citelock.InputError, match="unknown citation type 'mystery'"):
        from_anthropic(response)


def test_cohere_v2_answer_spans_map_to_sentences_and_documents() -> None:
    answer = from_cohere(load("cohere_v2_response.json"))
    assert [c.text for c in answer.claims] == [
        "The tallest penguins are the Emperor penguins.",
        "They only live in Antarctica.",
    ]
    assert cites(answer) == [[("doc:0", None)], [("doc:1", None)]]
    record = cohere_record(load("cohere_v2_request.json"))
    report = citelock.check(record, answer)
    assert report.ok, report.findings


def test_cohere_v1_with_renamed_ids() -> None:
    answer = from_cohere(load("cohere_v1_response.json"), document_ids={"doc_0": "tall", "doc_1": "habitat"})
    assert cites(answer) == [[("tall", None)], [("habitat", None)]]


def test_cohere_offsets_that_disagree_with_the_text_are_rejected() -> None:
    response = load("cohere_v2_response.json")
    response["message"]["citations"][0]["start"] = 30
    with pytest.raises(citelock.InputError, match="does not match the answer"):
        from_cohere(response)


def test_cohere_wrong_document_id_is_caught_by_the_guard() -> None:
    response = load("cohere_v2_response.json")
    response["message"]["citations"][1]["sources"][0]["id"] = "doc:7"
    report = citelock.check(cohere_record(load("cohere_v2_request.json")), from_cohere(response))
    assert [f.reason.value for f in report.findings] == ["ID_NOT_IN_PROMPT"]


def test_openai_responses_file_citations_attach_to_the_sentence_they_follow() -> None:
    response = load("openai_file_search_response.json")
    answer = from_openai_file_search(response, file_ids={"file-9xYzQwErTy": "pricing"})
    assert [c.text for c in answer.claims] == [
        "Deep research is an agent that conducts multi-step research on the internet.",
        "It is available to Pro users.",
    ]
    assert cites(answer) == [[("file-2dtbBZdjtDKS8eqWxqbgDi", None)], [("pricing", None)]]
    record = openai_file_search_record("What is deep research?", response, file_ids={"file-9xYzQwErTy": "pricing"})
    assert {pc.id for pc in record.chunks} == {"file-2dtbBZdjtDKS8eqWxqbgDi", "pricing"}
    assert citelock.check(record, answer).ok


def test_openai_assistants_markers_are_removed_from_claim_text() -> None:
    answer = from_openai_file_search(load("openai_assistants_message.json"))
    assert [c.text for c in answer.claims] == [
        "Deep research conducts multi-step research on the internet.",
        "It is available to Pro users.",
    ]
    assert cites(answer) == [[("file-2dtbBZdjtDKS8eqWxqbgDi", None)], [("file-9xYzQwErTy", None)]]


def test_openai_record_needs_the_search_results() -> None:
    response = load("openai_file_search_response.json")
    response["output"] = [o for o in response["output"] if o["type"] != "file_search_call"]
    with pytest.raises(citelock.InputError, match=r"file_search_call\.results"):
        openai_file_search_record("q", response)
