"""Records entering from outside have their derived fields derived, and the CLI's input and exit contract holds.

Issue 34, item 4: a logged record whose ``normalized`` copy was edited (1932 -> 1999) while its messages and sha256
were unchanged passed provenance for a span never sent, was appended and verified intact. Item 8: a JSON integer
of more than 4,300 digits exited 70 and aborted an audit; on a file that is not a database `log verify` exited 2
while `check` and `metrics` exited 3.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from citelock import serialize
from citelock.audit import read_report
from citelock.cli import app
from citelock.prompt import assemble
from citelock.prompt._serialize import with_history
from citelock.records import PromptRecord
from citelock.store import PromptLog
from citelock.store._chain import KEY_ENV, content_hash, link_hash
from support.audit_rows import make_rows, write_jsonl

runner = CliRunner()
SAID = "The Aurora Bridge opened to traffic in 1932."
CLAIM = {"text": "The Aurora Bridge opened in 1999.", "citations": [{"chunk_id": "c-1", "span": "traffic in 1999"}]}
LONG = "7" * 5000


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


def _record(rid: str = "r1") -> dict[str, Any]:
    record = serialize(assemble("When did the Aurora Bridge open?", [{"id": "c-1", "text": SAID}]), request_id=rid)
    data: dict[str, Any] = json.loads(record.model_dump_json())
    return data


def _edit_normalized(data: dict[str, Any]) -> None:
    data["normalized"] = [t.replace("1932", "1999") for t in data["normalized"]]


def _edit_chunk_text(data: dict[str, Any]) -> None:
    """The chunk's text says 1999 (where a truncated chunk's lost tail would be looked up); the prompt said 1932."""
    data["chunks"][0]["chunk"]["text"] = SAID.replace("1932", "1999")


def _edit_offsets(data: dict[str, Any]) -> None:
    data["chunks"][0]["placement"]["norm_start"] += 4


def _edit_offset_map(data: dict[str, Any]) -> None:
    data["offset_maps"][1] = [[0, 0], [10, 12]]


def _edit_message(data: dict[str, Any]) -> None:
    data["messages"][1]["content"] = data["messages"][1]["content"].replace("1932", "1999")
    _edit_normalized(data)  # consistent with the edited message, but the sha256 is the old one


def _edit_status(data: dict[str, Any]) -> None:
    data["chunks"][0]["placement"] = None  # "complete" with nowhere in the prompt


FORGERIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "normalized": _edit_normalized,
    "chunk text": _edit_chunk_text,
    "placement offsets": _edit_offsets,
    "offset map": _edit_offset_map,
    "message": _edit_message,
    "status": _edit_status,
}


def _answer(tmp_path: Path) -> Path:
    path = tmp_path / "answer.json"
    path.write_text(json.dumps({"claims": [CLAIM]}), encoding="utf-8")
    return path


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_record_with_forged_derived_fields_is_refused_and_not_appended(tmp_path: Path, forgery: str) -> None:
    data = _record()
    FORGERIES[forgery](data)
    prompt = tmp_path / "forged.json"
    prompt.write_text(json.dumps(data), encoding="utf-8")
    db = tmp_path / "log.db"
    result = runner.invoke(app, ["check", "--prompt", str(prompt), "--answer", str(_answer(tmp_path)), "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert f"prompt file {prompt}" in result.stderr and "'r1'" in result.stderr
    assert "provenance" not in result.stdout
    assert not db.exists() or len(PromptLog(db)) == 0


def test_the_unedited_record_still_passes(tmp_path: Path) -> None:
    prompt = tmp_path / "record.json"
    prompt.write_text(json.dumps(_record()), encoding="utf-8")
    answer = tmp_path / "ok.json"
    claim = {"text": "It opened in 1932.", "citations": [{"chunk_id": "c-1", "span": "traffic in 1932"}]}
    answer.write_text(json.dumps({"claims": [claim]}), encoding="utf-8")
    result = runner.invoke(
        app, ["check", "--prompt", str(prompt), "--answer", str(answer), "--db", str(tmp_path / "l")]
    )
    assert result.exit_code == 0, result.output


# --- placements that are no chunk body in the prompt as sent (a renamed id, the question, an assistant turn) -----

QUESTION = "When did the Aurora Bridge open?"
EARLIER = "It opened in 1999, as I said before."


def _conversation() -> dict[str, Any]:
    """A record of answer_structured.v2 after one earlier exchange (the assistant's words are history)."""
    history = [{"role": "user", "content": "Tell me about the bridge."}, {"role": "assistant", "content": EARLIER}]
    record = with_history(serialize(assemble(QUESTION, [{"id": "c-1", "text": SAID}]), request_id="r1"), history)
    data: dict[str, Any] = json.loads(record.model_dump_json())
    return data


def _renamed(data: dict[str, Any]) -> None:
    data["chunks"][0]["chunk"]["id"] = "c-9"  # the prompt as sent still says <source id="c-1">


def _on_question(data: dict[str, Any]) -> None:
    data["chunks"][0]["chunk"]["text"] = QUESTION
    data["chunks"][0]["placement"] = dict(data["question_placement"])


def _on_assistant_turn(data: dict[str, Any]) -> None:
    norm = data["normalized"][2]
    at = norm.index(EARLIER)
    placement = {"message": 2, "start": at, "end": at + len(EARLIER), "norm_start": at, "norm_end": at + len(EARLIER)}
    data["chunks"].append({"chunk": {"id": "c-2", "text": EARLIER}, "status": "complete", "placement": placement})


PLACEMENTS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "renamed id": (_renamed, '<source id="c-9">The Aurora Bridge'),
    "on the question": (_on_question, '<source id="c-1">When did the Aurora'),
    "on an assistant turn": (_on_assistant_turn, '<source id="c-2">It opened in 1999'),
}
"""Each forgery, and what the error quotes as expected: the prompt the template renders from the record."""


@pytest.mark.parametrize("forgery", sorted(PLACEMENTS))
def test_a_record_placing_a_chunk_on_no_chunk_body_is_exit_2_naming_what_was_expected(
    tmp_path: Path, forgery: str
) -> None:
    data = _conversation()
    edit, expected = PLACEMENTS[forgery]
    edit(data)
    prompt = tmp_path / "forged.json"
    prompt.write_text(json.dumps(data), encoding="utf-8")
    db = tmp_path / "log.db"
    answer = tmp_path / "answer.json"
    claim = {"text": "It opened in 1999.", "citations": [{"chunk_id": data["chunks"][-1]["chunk"]["id"]}]}
    answer.write_text(json.dumps({"claims": [claim]}), encoding="utf-8")
    result = runner.invoke(app, ["check", "--prompt", str(prompt), "--answer", str(answer), "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert f"prompt file {prompt}" in result.stderr and "'r1'" in result.stderr
    assert "is not what answer_structured.v2 renders from the record's chunks, question and history" in result.stderr
    assert "expected '" in result.stderr and expected in result.stderr.split("expected '", 1)[1]
    assert not db.exists() or len(PromptLog(db)) == 0


def test_the_unedited_conversation_still_passes(tmp_path: Path) -> None:
    prompt = tmp_path / "record.json"
    prompt.write_text(json.dumps(_conversation()), encoding="utf-8")
    answer = tmp_path / "ok.json"
    claim = {"text": "It opened in 1932.", "citations": [{"chunk_id": "c-1", "span": "traffic in 1932"}]}
    answer.write_text(json.dumps({"claims": [claim]}), encoding="utf-8")
    result = runner.invoke(app, ["check", "--prompt", str(prompt), "--answer", str(answer)])
    assert result.exit_code == 0, result.output


def _forge_in_log(db: str) -> None:
    """Rewrite the log's only record with an edited normalized copy, its content hash and its link recomputed."""
    log = PromptLog(db)
    with log.engine.begin() as conn:
        row = conn.execute(text("SELECT * FROM citelock_prompt_log WHERE request_id = 'r1'")).mappings().one()
        data = json.loads(row["record"])
        _edit_normalized(data)
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        digest = content_hash(payload)
        chain = link_hash(None, 1, row["prev_hash"], "r1", digest)
        if conn.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_log DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER citelock_prompt_log_no_update"))
        conn.execute(
            text("UPDATE citelock_prompt_log SET record = :r, record_sha256 = :d, chain_hash = :c"),
            {"r": payload, "d": digest, "c": chain},
        )
        if conn.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE citelock_prompt_log ENABLE TRIGGER USER"))


def test_a_logged_record_with_a_forged_normalized_copy_fails_replay_verify_and_audit(
    tmp_path: Path, target: str
) -> None:
    PromptLog(target).append(PromptRecord.model_validate(_record()))
    _forge_in_log(target)
    check = runner.invoke(app, ["check", "--request-id", "r1", "--db", target, "--answer", str(_answer(tmp_path))])
    assert check.exit_code == 3, check.output
    assert "derived fields disagree" in check.stderr
    verify = runner.invoke(app, ["log", "verify", "--db", target])
    assert verify.exit_code == 3 and "normalized[1]" in verify.stderr
    answers = write_jsonl(tmp_path / "answers.jsonl", [{"request_id": "r1", "answer": {"claims": [CLAIM]}}])
    audit = runner.invoke(app, ["audit", target, "--answers", str(answers), "--out", str(tmp_path / "out")])
    assert audit.exit_code == 2, audit.output  # a reported bad row, not an abort
    (row,) = read_report(tmp_path / "out")
    assert row["error"].startswith("store integrity failure:") and "derived fields" in row["error"]


# --- over-long integers and other refused JSON ---------------------------------------------------------------


def test_an_over_long_integer_is_exit_2_naming_the_file_and_field(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps(_record()), encoding="utf-8")
    answer = tmp_path / "answer.json"
    answer.write_text('{"claims": [{"text": "x", "citations": [], "n": ' + LONG + "}]}", encoding="utf-8")
    result = runner.invoke(app, ["check", "--prompt", str(prompt), "--answer", str(answer)])
    assert result.exit_code == 2, result.output
    assert f"answer file {answer}: $.claims[0].n: an integer of 5000 digits" in result.stderr
    bad_prompt = tmp_path / "bad-prompt.json"
    bad_prompt.write_text(json.dumps(_record())[:-1] + ', "x": -' + LONG + "}", encoding="utf-8")
    result = runner.invoke(app, ["check", "--prompt", str(bad_prompt), "--answer", str(_answer(tmp_path))])
    assert result.exit_code == 2 and f"prompt file {bad_prompt}: $.x: an integer of 5000 digits" in result.stderr
    store = tmp_path / "store.jsonl"
    store.write_text('{"id": "c-1", "text": "t"}\n{"id": ' + LONG + "}\n", encoding="utf-8")
    args = ["check", "--prompt", str(prompt), "--answer", str(_answer(tmp_path)), "--store", str(store)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and f"store file {store} line 2: $.id: an integer" in result.stderr


def test_an_over_long_integer_in_a_calibration_file_is_exit_2(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps(_record()), encoding="utf-8")
    calibration = tmp_path / "calibration.json"
    calibration.write_text('{"schema_version": "1", "surfaces": {"*": {"pass_at": ' + LONG + "}}}", encoding="utf-8")
    args = ["check", "--prompt", str(prompt), "--answer", str(_answer(tmp_path)), "--surface", "legal"]
    result = runner.invoke(app, [*args, "--judge", "lexical", "--calibration", str(calibration)])
    assert result.exit_code == 2, result.output
    assert f"calibration file {calibration}" in result.stderr


def test_an_audit_row_with_an_over_long_integer_is_a_reported_row(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", make_rows(2), ['{"answer": "x", "n": ' + LONG + "}"])
    result = runner.invoke(app, ["audit", str(path), "--out", str(tmp_path / "out"), "--processes", "1"])
    assert result.exit_code == 2, result.output  # bad rows: 2, and the other rows were audited
    report = {row["row"]: row for row in read_report(tmp_path / "out")}
    assert len(report) == 3 and report[1]["error"] is None and report[2]["error"] is None
    assert report[3]["error"].startswith("$.n: an integer of 5000 digits; the limit is 4300 digits")


@pytest.mark.parametrize(
    "command",
    [
        ["log", "verify"],
        ["metrics"],
        ["queue", "list"],
        ["check", "--request-id", "r1", "--answer", "ANSWER"],
    ],
    ids=lambda c: c[0] + ("-" + c[1] if c[0] in ("log", "queue") else ""),
)
def test_a_file_that_is_not_a_database_is_exit_3_in_every_command(tmp_path: Path, command: list[str]) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 10)
    args = [str(_answer(tmp_path)) if word == "ANSWER" else word for word in command]
    result = runner.invoke(app, [*args, "--db", str(garbage)])
    assert result.exit_code == 3, result.output
    assert "not a database" in result.stderr and str(garbage) in result.stderr
