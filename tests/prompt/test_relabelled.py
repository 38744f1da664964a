"""A record relabelled after it was built: trusted as built only when nothing derived changed.

:func:`citelock.prompt._serialize.relabelled` is how the wrapped client adds its metadata and question to the
record it just built. The prompt log does not re-derive a record this process built; the relabelled copy keeps
that only when the change cannot disagree with the messages (metadata, or the question of a record whose question
was not located).
"""

from __future__ import annotations

import pytest

from citelock import InputError
from citelock.prompt import _verify, record_from_messages, verified_record
from citelock.prompt._serialize import relabelled

_SENT = "Context:\n[c-1] The Aurora Bridge opened to traffic in 1932.\n\nQuestion: When did it open?"
_CHUNKS = [{"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932."}]


def _refuse_rederiving(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def counted(record: object) -> None:
        calls.append("derived_problem")

    monkeypatch.setattr(_verify, "derived_problem", counted)
    return calls


def test_a_built_record_relabelled_is_not_derived_again(monkeypatch: pytest.MonkeyPatch) -> None:
    record = record_from_messages([{"role": "user", "content": _SENT}], _CHUNKS)
    copy = relabelled(record, metadata={"backend": "wrap"}, question="When did it open?")
    assert copy is not record
    assert copy.metadata == {"backend": "wrap"} and copy.question == "When did it open?"
    assert copy.messages == record.messages and copy.chunks == record.chunks
    calls = _refuse_rederiving(monkeypatch)
    assert verified_record(copy) is copy
    assert calls == []


def test_a_relabelled_record_with_a_located_question_is_checked() -> None:
    record = record_from_messages([{"role": "user", "content": _SENT}], _CHUNKS, question="When did it open?")
    assert record.question_placement is not None
    copy = relabelled(record, metadata={}, question="How long is it?")  # no longer the text at its placement
    with pytest.raises(InputError, match="question_placement"):
        verified_record(copy)


def test_a_record_from_outside_relabelled_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    record = record_from_messages([{"role": "user", "content": _SENT}], _CHUNKS)
    outside = record.model_copy()  # not built here: not in the registry
    calls = _refuse_rederiving(monkeypatch)
    verified_record(relabelled(outside, metadata={}, question=None))
    assert calls == ["derived_problem"]
