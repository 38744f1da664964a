"""The command line's contract (#15): exit codes, one message per failure, standard input, option validation
before anything is written, long answers guarded in windows, tables that never cut a reason code."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.cli._app import (
    EXIT_CODES,
    EXIT_CODES_HELP,
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTEGRITY,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_UNREACHABLE,
    classify,
)
from citelock.errors import (
    BackendConnectionError,
    BackendHTTPError,
    BackendTimeoutError,
    InputError,
    JudgeOutputError,
    MissingExtraError,
    ServerStartError,
    StoreIntegrityError,
    UnparsedAnswerError,
)
from citelock.records import ReasonCode

runner = CliRunner()

PROMPT = {
    "messages": [
        {"role": "system", "content": "Answer from the context."},
        {
            "role": "user",
            "content": "Context:\n[c-1] Revenue grew 12% in 2023.\n[c-2] Freight is paid by the buyer.\n"
            "Question: Did revenue grow?",
        },
    ],
    "chunks": [
        {"id": "c-1", "text": "Revenue grew 12% in 2023."},
        {"id": "c-2", "text": "Freight is paid by the buyer."},
    ],
    "question": "Did revenue grow?",
    "request_id": "req-1",
}
GOOD = {
    "claims": [{"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1", "span": "Revenue grew 12%"}]}]
}


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _run(*args: object, stdin: bytes | str | None = None) -> Any:
    result = runner.invoke(app, [str(a) for a in args], input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def _one_error_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("citelock: error: "), result.stderr
    return lines[0]


# --- the mapping, by type ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (InputError("bad field"), EXIT_INPUT),
        (MissingExtraError("postgres", "psycopg"), EXIT_INPUT),
        (StoreIntegrityError("record 'r' was altered"), EXIT_INTEGRITY),
        (BackendConnectionError("no route", provider="openai"), EXIT_UNREACHABLE),
        (BackendTimeoutError("too slow", provider="openai"), EXIT_UNREACHABLE),
        (ServerStartError("did not start", provider="llama.cpp"), EXIT_UNREACHABLE),
        (BackendHTTPError("500", provider="openai", status=500), EXIT_RUNTIME),
        (JudgeOutputError("maybe", ("yes", "no")), EXIT_RUNTIME),
        (IsADirectoryError(21, "Is a directory", "/some/dir"), EXIT_INPUT),
        (ConnectionRefusedError(111, "Connection refused"), EXIT_UNREACHABLE),
        (RecursionError("maximum recursion depth exceeded"), EXIT_INPUT),
        (ModuleNotFoundError("No module named 'MySQLdb'"), EXIT_INPUT),
        (sqlite3.DatabaseError("file is not a database"), EXIT_RUNTIME),  # no error code: not classified further
        (ZeroDivisionError("division by zero"), EXIT_INTERNAL),
    ],
)
def test_exceptions_map_to_the_contract_by_type(exc: BaseException, code: int) -> None:
    assert classify(exc)[0] == code
    assert code in EXIT_CODES


def test_an_unparsed_model_answer_is_a_runtime_failure_not_a_finding() -> None:
    assert issubclass(UnparsedAnswerError, Exception)
    assert EXIT_RUNTIME != EXIT_FINDINGS and EXIT_CODES[EXIT_RUNTIME].startswith("another runtime failure")


def test_every_command_documents_the_exit_codes_in_its_help() -> None:
    commands = [
        [],
        ["check"],
        ["answer"],
        ["calibrate"],
        ["metrics"],
        ["serve"],
        ["eval"],
        ["eval", "defects"],
        ["eval", "compare"],
        ["eval", "answers"],
        ["queue"],
        ["queue", "list"],
        ["queue", "show"],
        ["queue", "resolve"],
    ]
    for words in commands:
        result = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "400"})
        assert result.exit_code == 0, (words, result.output)
        flat = " ".join(result.stdout.split())
        assert "Exit codes: 0 ok; 1 findings" in flat, words
        assert f"{EXIT_UNREACHABLE} a backend, server or database is unreachable" in flat, words
    assert EXIT_CODES_HELP.startswith("Exit codes: 0 ok")


# --- the reported offenders -------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["answer", "prompt", "store"])
@pytest.mark.parametrize("shape", ["[" * 100_000 + "]" * 100_000, '{"a":' * 5_000 + "1" + "}" * 5_000])
def test_json_nested_deeply_exits_2_naming_the_file(tmp_path: Path, target: str, shape: str) -> None:
    deep = _write(tmp_path, f"deep-{target}.json", shape)
    files = {"answer": _write(tmp_path, "a.json", GOOD), "prompt": _write(tmp_path, "p.json", PROMPT)}
    files[target] = deep
    args = ["check", "--prompt", files["prompt"], "--answer", files["answer"]]
    if target == "store":
        args += ["--store", deep]
    result = _run(*args)
    assert result.exit_code == EXIT_INPUT
    line = _one_error_line(result)
    assert "deep-" in line and "nested" in line


def test_an_answer_path_that_is_a_directory_exits_2(tmp_path: Path) -> None:
    result = _run("check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", tmp_path)
    assert result.exit_code == EXIT_INPUT
    assert "Is a directory" in _one_error_line(result) and str(tmp_path) in result.stderr


def test_replaying_a_tampered_record_exits_3(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    prompt, answer = _write(tmp_path, "p.json", PROMPT), _write(tmp_path, "a.json", GOOD)
    assert _run("check", "--prompt", prompt, "--answer", answer, "--db", db).exit_code == EXIT_OK
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER citelock_prompt_log_no_update")
        conn.execute("UPDATE citelock_prompt_log SET record = replace(record, '12%', '15%')")
    result = _run("check", "--request-id", "req-1", "--db", db, "--answer", answer)
    assert result.exit_code == EXIT_INTEGRITY
    assert "req-1" in _one_error_line(result) and "altered" in result.stderr


def test_a_file_that_is_not_a_database_exits_3_naming_it(tmp_path: Path) -> None:
    garbage = _write(tmp_path, "notes.db", "plain text, not SQLite" * 20)
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    result = _run(*args, "--db", garbage)
    assert result.exit_code == EXIT_INTEGRITY
    assert str(garbage) in _one_error_line(result)


def test_an_unreachable_judge_server_exits_4(tmp_path: Path) -> None:
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    result = _run(*args, "--judge", "llm", "--judge-base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == EXIT_UNREACHABLE
    assert "unreachable" in _one_error_line(result)


def test_undecodable_and_odd_files_exit_2_with_one_message(tmp_path: Path) -> None:
    prompt = _write(tmp_path, "p.json", PROMPT)
    cases = {
        "latin1.json": (b'{"text": "caf\xe9 [c-1]."}', "not UTF-8 text (bad byte 0xe9 at offset 13)"),
        "lone.json": (b'{"text": "\\ud800 [c-1]."}', "lone surrogate"),
        "nan.json": (b"NaN", "must be a JSON object"),
        "empty.json": (b"", "not valid JSON"),
        "bom16.json": (b"\xff\xfe{", "nor the UTF-16 its byte-order mark announces"),
    }
    for name, (content, message) in cases.items():
        result = _run("check", "--prompt", prompt, "--answer", _write(tmp_path, name, content))
        assert result.exit_code == EXIT_INPUT, name
        assert message in _one_error_line(result), (name, result.stderr)
    odd = tmp_path / "line\nbreak.json"
    odd.write_text(json.dumps(GOOD), encoding="utf-8")
    assert _run("check", "--prompt", prompt, "--answer", odd).exit_code == EXIT_OK
    missing = _run("check", "--prompt", prompt, "--answer", tmp_path / "bad\nname.json")
    assert missing.exit_code == EXIT_INPUT and "'" in _one_error_line(missing)  # the newline is shown escaped
    zero = _run("check", "--prompt", prompt, "--answer", "/dev/zero")
    assert zero.exit_code == EXIT_INPUT and "too large" in _one_error_line(zero)


def test_utf8_and_utf16_with_a_byte_order_mark_are_read(tmp_path: Path) -> None:
    prompt = _write(tmp_path, "p.json", PROMPT)
    for encoding in ("utf-8-sig", "utf-16", "utf-32"):
        answer = _write(tmp_path, f"{encoding}.json", json.dumps(GOOD).encode(encoding))
        assert _run("check", "--prompt", prompt, "--answer", answer).exit_code == EXIT_OK, encoding


def test_standard_input_for_the_answer_the_prompt_and_the_chunks(tmp_path: Path) -> None:
    prompt, answer = _write(tmp_path, "p.json", PROMPT), _write(tmp_path, "a.json", GOOD)
    as_text = _run("check", "--prompt", prompt, "--answer", "-", "--json", stdin="Revenue grew 12% in 2023 [c-1].")
    assert as_text.exit_code == EXIT_OK and json.loads(as_text.stdout)["ok"] is True
    as_json = _run("check", "--prompt", "-", "--answer", answer, stdin=json.dumps(PROMPT))
    assert as_json.exit_code == EXIT_OK
    both = _run("check", "--prompt", "-", "--answer", "-", stdin=json.dumps(PROMPT))
    assert both.exit_code == EXIT_INPUT and "only one input" in _one_error_line(both)


def test_an_unexpected_error_is_one_line_and_exit_70_and_debug_shows_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citelock.cli import _report

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(_report, "run_guard", broken)
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    plain = _run(*args)
    assert plain.exit_code == EXIT_INTERNAL
    assert "internal error (ZeroDivisionError: a bug)" in _one_error_line(plain)
    debug = runner.invoke(app, ["--debug", *map(str, args)])
    assert debug.exit_code == EXIT_INTERNAL
    assert "Traceback (most recent call last)" in debug.stderr and debug.stderr.strip().endswith(
        "--debug prints the traceback"
    )


def test_an_interrupt_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from citelock.cli import _report

    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(_report, "run_guard", interrupted)
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    assert runner.invoke(app, [str(a) for a in args]).exit_code == EXIT_INTERRUPTED


# --- options checked before anything is written -----------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--stakes", "low", "--sample-rate", "0.5"], "--sample-rate needs a surface policy"),
        (["--surface", "legal", "--sample-rate", "0.5"], "sample_rate must be 1.0; give --stakes low"),
        (["--surface", " "], "--surface ' ': expected a non-empty printable surface name"),
        (["--judge", "LEXICAL"], "--judge: unknown judge 'LEXICAL'"),
        (["--judge", "llm", "--judge-base-url", "localhost:8080"], "expected an http(s) URL"),
        (["--judge", "llm", "--judge-model", "missing.gguf"], "no such GGUF file"),
        (["--surface", "legal", "--calibration", "-"], "--calibration reads a file"),
        (["--db", "mysql://u@127.0.0.1/x"], "unsupported database URL"),
    ],
)
def test_bad_options_exit_2_before_the_database_exists(tmp_path: Path, options: list[str], message: str) -> None:
    db = tmp_path / "team.db"
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    if "--db" not in options:
        options = [*options, "--db", str(db)]
    result = _run(*args, *options)
    assert result.exit_code == EXIT_INPUT
    assert message in _one_error_line(result)
    assert not db.exists()


def test_a_bad_input_file_fails_before_the_prompt_is_logged(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    prompt = _write(tmp_path, "p.json", PROMPT)
    store = _write(tmp_path, "s.jsonl", '{"id": "c-1"}\n[1]\n')
    result = _run(
        "check", "--prompt", prompt, "--answer", _write(tmp_path, "a.json", GOOD), "--store", store, "--db", db
    )
    assert result.exit_code == EXIT_INPUT and "line 2" in _one_error_line(result)
    assert not db.exists()
    replay = _run("check", "--request-id", "req-1", "--db", tmp_path / "none.db", "--answer", tmp_path / "a.json")
    assert replay.exit_code == EXIT_INPUT and "no prompt log there" in _one_error_line(replay)
    assert not (tmp_path / "none.db").exists()


# --- long answers: windows give the same report -------------------------------------------------------------


def test_a_long_answer_guarded_in_windows_prints_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citelock.cli import _report

    claims = []
    for i in range(23):
        if i % 5 == 0:
            claims.append({"text": f"Uncited claim number {i}."})
        elif i % 5 == 1:
            claims.append({"text": "Revenue grew 40% in 2023.", "citations": [{"chunk_id": "c-1"}]})
        elif i % 5 == 2:
            claims.append(
                {"text": "Freight.", "citations": [{"chunk_id": "c-9"}, {"chunk_id": "c-2", "span": "Revenue"}]}
            )
        else:
            claims.append({"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1", "span": "grew 12%"}]})
    args = [
        "check",
        "--prompt",
        _write(tmp_path, "p.json", PROMPT),
        "--answer",
        _write(tmp_path, "a.json", {"claims": claims}),
    ]
    whole = _run(*args, "--json")
    monkeypatch.setattr(_report, "WINDOW_CLAIMS", 4)
    windowed = _run(*args, "--json")
    assert whole.exit_code == windowed.exit_code == EXIT_FINDINGS
    assert json.loads(windowed.stdout) == json.loads(whole.stdout)
    monkeypatch.setattr(_report, "WINDOW_CITATIONS", 1)  # windows closed by citations: every claim alone
    assert json.loads(_run(*args, "--json").stdout) == json.loads(whole.stdout)
    data = json.loads(whole.stdout)
    assert [f["claim_index"] for f in data["findings"] if f["reason"] == "UNCITED_CLAIM"] == [0, 5, 10, 15, 20]
    assert list(data["counts"]) == ["ID_NOT_IN_PROMPT", "SPAN_IN_OTHER_CHUNK", "UNCITED_CLAIM", "NUMBER_MISMATCH"]
    table = _run(*args)
    assert table.stdout.count("UNCITED_CLAIM") == 5


# --- output ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", ["80", "64", "40"])
def test_reason_codes_are_never_cut(tmp_path: Path, columns: str) -> None:
    answer = {
        "claims": [
            {"text": "Revenue grew 12%.", "citations": [{"chunk_id": "c-2", "span": "Revenue grew 12%"}]},
            {"text": "x", "citations": [{"chunk_id": "c-1", "span": "Did revenue grow"}]},
        ]
    }
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", answer)]
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": columns})
    assert result.exit_code == EXIT_FINDINGS
    assert ReasonCode.SPAN_IN_OTHER_CHUNK.value in result.stdout
    assert ReasonCode.SPAN_ONLY_IN_QUESTION.value in result.stdout
    assert "SPAN_IN_OTHER_…" not in result.stdout and "SPAN_ONLY_IN_QUE…" not in result.stdout


def test_a_servers_model_path_is_printed_as_its_file_name() -> None:
    from citelock.cli._answer import model_label

    assert model_label("/srv/models/llm/smollm2-135m-instruct-q8_0.gguf") == "smollm2-135m-instruct-q8_0.gguf"
    assert model_label("C:\\models\\gemma.gguf") == "gemma.gguf"
    assert model_label("./weights/model.bin") == "model.bin"
    assert model_label("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert model_label("gpt-4o-mini") == "gpt-4o-mini"


def test_a_calibration_file_in_utf16_exits_2_naming_it(tmp_path: Path) -> None:
    calibration = _write(tmp_path, "cal.json", '{"schema_version": "1", "surfaces": {}}'.encode("utf-16"))
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    result = _run(*args, "--surface", "legal", "--judge", "lexical", "--calibration", calibration)
    assert result.exit_code == EXIT_INPUT
    assert "calibration file" in _one_error_line(result) and "not UTF-8" in result.stderr


def test_undecodable_option_values_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    replay = _run("check", "--request-id", "r\udc80", "--db", db, "--answer", _write(tmp_path, "a.json", GOOD))
    assert replay.exit_code == EXIT_INPUT and "not valid text" in _one_error_line(replay)
    question = _run("answer", "-q", "q\udc80?", "--chunks", _write(tmp_path, "c.jsonl", '{"id": "c-1", "text": "x"}'))
    assert question.exit_code == EXIT_INPUT and "not valid text" in _one_error_line(question)
    surface = _run(
        "check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", tmp_path / "a.json", "--surface", "s\udc80"
    )
    assert surface.exit_code == EXIT_INPUT and "printable" in _one_error_line(surface)
