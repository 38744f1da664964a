"""A replayed record made by a constrained call gets the live call's parse rule: the schema's JSON or nothing.

Live, a call that declared a citation constraint parses its output under the schema (``parse_constrained``):
prose or a ``{"text": ...}`` object is ``UnparsedAnswerError``, never free text. ``citelock check`` replaying that
call's logged record (``--request-id`` from the log, or ``--prompt`` with the record's JSON) must refuse the
same answers (exit 2, naming the constraint), and so must the Python doors that take a record and an unparsed
answer (``check``, ``Guard.run``) and an audit of logged rows. A record of a call that declared no constraint
(the naive backend, or a prompt file of messages and chunks) keeps the free-text parse.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import citelock
from citelock import BackendLimits, FakeBackend, PromptLog
from citelock.cli import app
from citelock.errors import ParseError
from citelock.prompt._parse import declared_policy, parse_for_record

runner = CliRunner()
CHUNKS = [{"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932."}]
QUESTION = "When did the Aurora Bridge open?"
SPAN = {"chunk_id": "c-1", "span": "opened to traffic in 1932"}
CITED = {"claims": [{"text": "It opened in 1932.", "citations": [SPAN]}]}
FREE_TEXT = [
    "The Aurora Bridge never opened",  # a short line with no digit and no stop: a "heading" in free text
    "It opened in 1932 [c-1].",
    json.dumps({"text": "It opened in 1932 [c-1]."}),
]


def _logged(db: Path, *, constrained: bool) -> str:
    """The request id of a call logged to ``db`` (constrained: the fake backend declared the substring policy)."""
    output = json.dumps(CITED) if constrained else "It opened in 1932 [c-1]."
    limits = None if constrained else BackendLimits(policies=())
    backend = FakeBackend([output]) if limits is None else FakeBackend([output], limits=limits)
    result = citelock.answer(QUESTION, CHUNKS, backend=backend, log=str(db))
    return result.request_id


def _run(*args: object) -> object:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _answer_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "answer.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text", FREE_TEXT)
def test_replaying_a_constrained_record_by_request_id_refuses_free_text(text: str, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    request_id = _logged(db, constrained=True)
    result = _run("check", "--request-id", request_id, "--db", db, "--answer", _answer_file(tmp_path, text))
    assert result.exit_code == 2, result.stdout  # type: ignore[attr-defined]
    assert "substring citation constraint" in result.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", FREE_TEXT)
def test_replaying_a_constrained_record_file_refuses_free_text(text: str, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    request_id = _logged(db, constrained=True)
    record = tmp_path / "record.json"
    record.write_text(PromptLog(db).get(request_id).model_dump_json(), encoding="utf-8")
    out_db = tmp_path / "other.db"
    result = _run("check", "--prompt", record, "--db", out_db, "--answer", _answer_file(tmp_path, text))
    assert result.exit_code == 2, result.stdout  # type: ignore[attr-defined]
    assert "substring citation constraint" in result.stderr  # type: ignore[attr-defined]
    assert not out_db.exists() or request_id not in PromptLog(out_db)  # refused before anything was written


def test_the_schemas_json_still_replays_and_holds_the_live_span_policy(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    request_id = _logged(db, constrained=True)
    answer = _answer_file(tmp_path, json.dumps(CITED))
    result = _run("check", "--request-id", request_id, "--db", db, "--answer", answer, "--json")
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    record = PromptLog(db).get(request_id)
    parsed = parse_for_record(CITED, record)
    assert parsed.span_policy == "substring"  # what the live parse gives an output of the schema's shape


def test_a_record_without_a_declared_constraint_keeps_the_free_text_parse(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    request_id = _logged(db, constrained=False)
    assert declared_policy(PromptLog(db).get(request_id)) is None
    answer = _answer_file(tmp_path, "It opened to traffic in 1932 [c-1].")
    result = _run("check", "--request-id", request_id, "--db", db, "--answer", answer)
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", FREE_TEXT)
def test_the_python_doors_apply_the_same_rule(text: str, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record = PromptLog(db).get(_logged(db, constrained=True))
    assert declared_policy(record) == "substring"
    with pytest.raises(ParseError, match="substring citation constraint"):
        citelock.check(record, text)
    with pytest.raises(ParseError, match="substring citation constraint"):
        citelock.Guard().run(record, text)
    assert citelock.check(record, CITED).ok  # the schema's JSON is checked as before


def test_an_audit_of_logged_rows_reports_the_free_text_row(tmp_path: Path) -> None:
    from citelock.audit import AuditItem
    from citelock.audit._work import prepare

    db = tmp_path / "log.db"
    record = PromptLog(db).get(_logged(db, constrained=True))
    row = {"record": json.loads(record.model_dump_json()), "answer": FREE_TEXT[0]}
    prepared = prepare(AuditItem(key="k", source="log", row=1, payload=row, logged=True))
    assert prepared.error is not None and "substring citation constraint" in prepared.error
    good = prepare(AuditItem(key="k", source="log", row=2, payload={**row, "answer": CITED}, logged=True))
    assert good.error is None and good.answer is not None and good.answer.span_policy == "substring"
