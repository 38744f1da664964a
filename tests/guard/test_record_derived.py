"""Derived fields are derived: every record citelock builds verifies, and any edit of a derived field is caught.

:func:`citelock.prompt.derived_problem` recomputes what a check relies on from the messages as sent. A false
refusal would break logging of legitimate prompts, so records built every way (``serialize`` with each template,
``record_from_messages`` with complete, truncated and missing chunks, ``with_history``) from text with entities,
odd whitespace, decomposed Unicode and outer spaces must verify; and an edit of any derived field must not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citelock import InputError, serialize
from citelock.prompt import (
    assemble,
    derived_problem,
    load_record,
    load_template,
    record_from_messages,
    verified_record,
)
from citelock.prompt._serialize import with_history
from citelock.records import PromptRecord

_PIECES = st.sampled_from(
    [
        "opened",
        "in 1932",
        " ",
        "  ",
        "\n",
        "\t",
        "\u00a0",
        "&amp;",
        "&lt;b&gt;",
        "&#39;",
        "<tag>",
        "e\u0301",  # decomposed: NFC composes it
        "\u00e9",
        "\uff26\uff55\uff4c\uff4c",  # fullwidth
        "\u200b",
        '"quoted"',
        "\\",
        "ü",
        ".",
        "1999",
    ]
)
TEXTS = st.lists(_PIECES, min_size=1, max_size=12).map("".join).filter(lambda t: t.strip() != "")
TEMPLATES = [("answer_structured", "1"), ("answer_structured", "2"), ("answer_naive", "1"), ("answer_naive", "3")]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.lists(TEXTS, min_size=1, max_size=4), TEXTS, st.sampled_from(TEMPLATES))
def test_serialized_records_verify(bodies: list[str], question: str, template: tuple[str, str]) -> None:
    chunks = [{"id": f"c-{i}", "text": body} for i, body in enumerate(bodies)]
    record = serialize(assemble(question, chunks), template=load_template(*template))
    assert derived_problem(record) is None
    assert derived_problem(with_history(record, [{"role": "user", "content": question}])) is None


@FAST
@given(st.lists(TEXTS, min_size=1, max_size=4), TEXTS, st.integers(0, 60), st.booleans())
def test_records_of_prompts_assembled_elsewhere_verify(bodies: list[str], question: str, cut: int, drop: bool) -> None:
    long_tail = " and it carried cars across the ship canal for decades after"
    chunks = [{"id": f"c-{i}", "text": body + long_tail} for i, body in enumerate(bodies)]
    parts = [f"[c-{i}] {c['text']}" for i, c in enumerate(chunks)]
    parts[-1] = parts[-1][: max(len(parts[-1]) - cut, 6)]  # the last chunk's tail cut: truncated or missing
    if drop and len(parts) > 1:
        parts.pop(0)  # the first chunk is not there at all: missing
    messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "\n\n".join(parts) + question}]
    record = record_from_messages(messages, chunks, question=question)
    assert derived_problem(record) is None
    assert load_record(record.model_dump_json()) == record


def _record() -> dict[str, Any]:
    record = serialize(assemble("When did it open?", [{"id": "c-1", "text": "It opened  in 1932 &amp; later."}]))
    data: dict[str, Any] = json.loads(record.model_dump_json())
    return data


def _shift(data: dict[str, Any], field: str, by: int) -> None:
    data["chunks"][0]["placement"][field] += by


EDITS = {
    "normalized": lambda d: d["normalized"].__setitem__(1, d["normalized"][1].replace("1932", "1999")),
    "normalized count": lambda d: d["normalized"].pop(),
    "offset map": lambda d: d["offset_maps"].__setitem__(1, [[0, 0], [5, 9]]),
    "sha256": lambda d: d.__setitem__("sha256", "0" * 64),
    "norm_start": lambda d: _shift(d, "norm_start", 1),
    "norm_end": lambda d: _shift(d, "norm_end", -3),
    "raw start": lambda d: _shift(d, "start", 2),
    "message index": lambda d: d["chunks"][0]["placement"].__setitem__("message", 7),
    "out of range": lambda d: _shift(d, "norm_end", 10_000),
    "no placement": lambda d: d["chunks"][0].__setitem__("placement", None),
    "chunk text": lambda d: d["chunks"][0]["chunk"].__setitem__("text", "It opened in 1999."),
    "truncated not a prefix": lambda d: (
        d["chunks"][0].__setitem__("status", "truncated"),
        d["chunks"][0]["chunk"].__setitem__("text", "Something else entirely, longer than the body."),
    ),
    "question placement": lambda d: d["question_placement"].__setitem__("norm_start", 0),
    "duplicate chunk": lambda d: d["chunks"].append(d["chunks"][0]),
}


def test_the_record_as_built_verifies() -> None:
    assert derived_problem(load_record(_record())) is None


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_edit_of_a_derived_field_is_caught(edit: str) -> None:
    data = _record()
    EDITS[edit](data)
    with pytest.raises(InputError, match="prompt record"):
        load_record(data)
    with pytest.raises(InputError):
        verified_record(PromptRecord.model_validate(data))


# --- the question: input, not derived; its numbers count as known only when it was sent -----------------------

_SENT = "Context:\n[c-1] The Aurora Bridge opened to traffic in 1932.\n\nQuestion: Did it open in 1931?"


def _question_record(question: str, *, forged: bool = False) -> PromptRecord:
    record = record_from_messages(
        [{"role": "user", "content": _SENT}],
        [{"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932."}],
        question=question,
    )
    if forged:  # the logged record's question replaced by one never sent, its placement dropped (not derived)
        data = json.loads(record.model_dump_json())
        data.update(question="Did it open in 1999?", question_placement=None)
        record = load_record(data)
    return record


@pytest.mark.parametrize("cited", [False, True])
def test_a_question_never_sent_does_not_excuse_a_number(cited: bool) -> None:
    from citelock import ReasonCode, check

    citations = [{"chunk_id": "c-1"}] if cited else []
    answer = {"claims": [{"text": "The Aurora Bridge opened to traffic in 1999.", "citations": citations}]}
    forged = _question_record("Did it open in 1931?", forged=True)
    assert forged.question is not None and "1999" in forged.question  # the forged record loads: input, not derived
    assert ReasonCode.NUMBER_MISMATCH in {f.reason for f in check(forged, answer).findings}
    # the question as sent still counts: a claim restating its premise did not make the number up
    echoed = {"claims": [{"text": "The Aurora Bridge did not open in 1931.", "citations": citations}]}
    sent = _question_record("Did it open in 1931?")
    assert sent.question_placement is not None
    assert ReasonCode.NUMBER_MISMATCH not in {f.reason for f in check(sent, echoed).findings}
    unplaced = PromptRecord.model_validate({**json.loads(sent.model_dump_json()), "question_placement": None})
    assert ReasonCode.NUMBER_MISMATCH not in {f.reason for f in check(unplaced, echoed).findings}  # wrap's records
