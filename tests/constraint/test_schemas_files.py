import json

import jsonschema
import pytest

from citelock import assemble, check, parse_answer, serialize
from citelock._jsonschema import FROZEN_SCHEMAS, record_schemas, schemas_dir


@pytest.mark.parametrize("name", sorted(record_schemas()))
def test_committed_schema_matches_model(name: str) -> None:
    committed = json.loads((schemas_dir() / name).read_text(encoding="utf-8"))
    assert committed == record_schemas()[name], f"schemas/{name} is out of date: run `python -m citelock._jsonschema`"


def test_no_stray_schema_files() -> None:
    on_disk = {p.name for p in schemas_dir().glob("*.json")}
    assert on_disk == set(record_schemas()) | set(FROZEN_SCHEMAS)


def test_a_frozen_schema_is_an_earlier_version_of_a_current_record() -> None:
    current = {name.rsplit(".v", 1)[0]: int(name.rsplit(".v", 1)[1].split(".")[0]) for name in record_schemas()}
    for name in FROZEN_SCHEMAS:
        stem, version = name.rsplit(".v", 1)
        assert int(version.split(".")[0]) < current[stem], f"{name} is not older than the current {stem} schema"


def test_records_validate_against_their_schemas() -> None:
    ctx = assemble("Did revenue grow?", [{"id": "c-1", "text": "Revenue grew 12% in 2023."}])
    record = serialize(ctx)
    answer = parse_answer({"claims": [{"text": "Revenue grew 12%.", "citations": [{"chunk_id": "c-9"}]}]})
    report = check(record, answer)
    schemas = record_schemas()
    for obj, name in [
        (record, "prompt_record.v1.json"),
        (answer, "answer.v1.json"),
        (report, "guard_report.v1.json"),
    ]:
        jsonschema.validate(json.loads(obj.model_dump_json()), schemas[name])
    assert report.findings
    jsonschema.validate(json.loads(report.findings[0].model_dump_json()), schemas["finding.v1.json"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"claims": [{"text": 1}]}, schemas["answer.v1.json"])


def test_guarded_answer_validates_against_its_schema() -> None:
    import citelock
    from citelock.backends import FakeBackend

    output = '{"claims":[{"text":"Revenue grew 12%.","citations":[{"chunk_id":"c-1","span":"Revenue grew 12%"}]}]}'
    result = citelock.answer(
        "Did revenue grow?", [{"id": "c-1", "text": "Revenue grew 12% in 2023."}], backend=FakeBackend([output])
    )
    data = json.loads(result.model_dump_json())
    jsonschema.validate(data, record_schemas()["guarded_answer.v2.json"])
    assert data["schema_version"] == "2" and data["result"]["decision"] == "pass"
    assert data["answer"]["claims"][0]["citations"][0]["chunk_id"] == "c-1"
    assert data["span_policy"] == "substring"
