"""The ``check --json`` row is built in one place: the streamed writer and the in-memory row agree field by field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from citelock.audit._report_row import (
    CHECK_FIELDS,
    POLICY_FIELDS,
    Elements,
    ReportView,
    check_fields,
    empty_fields,
    policy_fields,
    row_data,
)
from citelock.audit._work import error_report, report_fields
from citelock.cli._report import windowed_check, write_report_json
from citelock.guard import Guard, GuardResult, SurfacePolicy
from citelock.judges import make_judge
from citelock.prompt import parse_answer, record_from_messages
from support.audit_rows import make_row


def _result(i: int) -> GuardResult:
    row = make_row(i)
    record = record_from_messages(row["messages"], row["chunks"], question=row["question"], request_id=f"r{i}")
    policy = SurfacePolicy(name="support", stakes="high", on_fail="drop_claim")
    return Guard(policy, make_judge("lexical")).run(record, parse_answer(row["answer"]))


@pytest.mark.parametrize("i", range(7))  # every kind of answer the audit rows mix (clean, fabricated, uncited, ...)
def test_the_streamed_json_is_the_row_held_in_memory(i: int, capsys: pytest.CaptureFixture[str]) -> None:
    result = _result(i)
    write_report_json(ReportView.of(result.report), result)
    streamed = json.loads(capsys.readouterr().out)
    assert list(streamed) == [*CHECK_FIELDS, *POLICY_FIELDS]
    assert streamed["accounting"].pop("cache_hits") == 0  # the audit's row leaves it out
    assert report_fields(result, policy=True) == streamed


def test_spooled_texts_and_models_give_the_same_values() -> None:
    result = _result(1)
    record = record_from_messages(make_row(1)["messages"], make_row(1)["chunks"], request_id="r1")
    with windowed_check(record, parse_answer(make_row(1)["answer"])) as view:
        spooled = row_data(check_fields(view))  # the windowed view gives JSON texts, not models
        assert all(isinstance(line, str) for line in view.findings())
    assert spooled == row_data(check_fields(ReportView.of(result.report)))
    assert spooled["findings"] and spooled["ok"] is False
    texts = list(Elements(result.report.findings).texts())
    assert list(Elements(texts).texts()) == texts  # texts pass through unchanged
    assert list(Elements(texts).values()) == spooled["findings"]


def test_routes_keep_only_their_fields_and_audit_rows_leave_out_cache_hits() -> None:
    result = _result(0)
    fields = dict(policy_fields(result, cache_hits=False))
    routes = list(fields["routes"].values())
    assert routes and all(set(route) == {"claim_index", "citation_index", "route", "score"} for route in routes)
    assert "cache_hits" not in fields["accounting"]
    assert "cache_hits" in dict(policy_fields(result))["accounting"]  # the result itself is left as it was
    assert list(report_fields(result, policy=False)) == list(CHECK_FIELDS)


def test_an_error_row_has_every_field_empty_and_fresh() -> None:
    row: dict[str, Any] = error_report("k", "rows.jsonl", 3, "answer: bad", request_id="r3", policy=True)
    assert list(row) == ["key", "source", "row", "error", *CHECK_FIELDS, *POLICY_FIELDS]
    assert row["request_id"] == "r3" and row["findings"] == [] and row["counts"] == {} and row["accounting"] is None
    row["findings"].append("x")
    assert empty_fields(policy=False)["findings"] == []  # no container is shared between rows
    assert list(empty_fields(policy=False)) == list(CHECK_FIELDS)
