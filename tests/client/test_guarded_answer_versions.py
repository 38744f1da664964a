"""``GuardedAnswer`` version 2 holds the ``GuardResult`` whole; a version-1 record (it copied the result's fields
under other names) still reads, upgraded. The v1 files in ``tests/client/data`` were written by the code of before
the change (a repaired answer on a high-stakes surface, a free-checks-only answer, a pipeline abstention).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from citelock import FakeBackend, GuardedAnswer, UsageError, answer
from citelock._guarded import upgrade_v1
from citelock._jsonschema import record_schemas, schemas_dir

DATA = Path(__file__).parent / "data"
V1_FILES = sorted(DATA.glob("guarded_answer.v1.*.json"))


def _v1(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"guarded_answer.v1.{name}.json").read_text(encoding="utf-8"))
    return data


def test_the_fixtures_are_version_1_records_valid_against_the_frozen_schema() -> None:
    v1_schema = json.loads((schemas_dir() / "guarded_answer.v1.json").read_text(encoding="utf-8"))
    assert len(V1_FILES) == 3
    for path in V1_FILES:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["schema_version"] == "1"
        jsonschema.validate(data, v1_schema)
        with pytest.raises(jsonschema.ValidationError):  # and they are not version-2 records
            jsonschema.validate(data, record_schemas()["guarded_answer.v2.json"])


@pytest.mark.parametrize("path", V1_FILES, ids=lambda p: p.name)
def test_a_version_1_record_reads_as_version_2_with_the_same_verdict(path: Path) -> None:
    v1 = json.loads(path.read_text(encoding="utf-8"))
    read = GuardedAnswer.model_validate_json(path.read_text(encoding="utf-8"))
    assert read.schema_version == "2" and read.request_id == v1["request_id"]
    assert read.decision == (v1["decision"] or ("pass" if v1["ok"] else "block"))
    assert read.ok == v1["ok"] and read.surface == v1["surface"]
    assert [json.loads(f.model_dump_json()) for f in read.findings] == v1["findings"]
    assert json.loads(read.report.model_dump_json()) == v1["report"]
    for mine, theirs in (
        (read.result.dropped, "removed"),
        (read.result.marked, "marked"),
        (read.result.trimmed, "trimmed"),
    ):
        assert [json.loads(o.model_dump_json()) for o in mine] == v1[theirs]
    assert read.abstained_before_generation == v1["abstained_before_generation"]
    assert [json.loads(d.model_dump_json()) for d in read.dropped_chunks] == v1["dropped"]
    assert read.rendered == v1["rendered"] and read.result.week == "unknown"
    if v1["accounting"] is not None:
        assert json.loads(read.result.accounting.model_dump_json()) == v1["accounting"]
    dumped = json.loads(read.model_dump_json())
    jsonschema.validate(dumped, record_schemas()["guarded_answer.v2.json"])
    assert GuardedAnswer.model_validate(dumped) == read  # and it round-trips as version 2


def test_the_fixtures_cover_a_repair_a_free_check_and_an_abstention() -> None:
    repaired, free, abstained = _v1("repaired"), _v1("free"), _v1("abstained")
    assert repaired["decision"] == "repaired" and repaired["removed"] and repaired["trimmed"]
    assert free["surface"] is None and free["decision"] == "pass" and free["ok"] is True
    assert abstained["abstained_before_generation"] is True
    assert GuardedAnswer.model_validate(abstained).result.abstention == "pipeline"


def test_version_2_holds_the_guard_result_and_copies_none_of_its_fields() -> None:
    output = '{"claims":[{"text":"Revenue grew 12%.","citations":[{"chunk_id":"c-1","span":"Revenue grew 12%"}]}]}'
    result = answer(
        "Did revenue grow?", [{"id": "c-1", "text": "Revenue grew 12% in 2023."}], backend=FakeBackend([output])
    )
    data = json.loads(result.model_dump_json())
    assert data["schema_version"] == "2" and data["result"]["decision"] == "pass"
    for copied in ("report", "findings", "ok", "decision", "surface", "accounting", "removed", "marked", "trimmed"):
        assert copied not in data, copied
    assert result.findings is result.result.report.findings and result.decision == result.result.decision
    with pytest.raises(ValidationError, match="removed"):  # a v2 record with a v1 field is refused, not mixed
        GuardedAnswer.model_validate({**data, "removed": []})


def test_a_broken_version_1_record_names_what_it_needs() -> None:
    broken = {k: v for k, v in _v1("free").items() if k != "report"}
    with pytest.raises(UsageError, match="needs report"):
        upgrade_v1(broken)
    with pytest.raises((UsageError, ValidationError), match="report"):
        GuardedAnswer.model_validate(broken)
