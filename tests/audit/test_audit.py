"""``citelock audit`` and :mod:`citelock.audit`: rows, report, database, resumability, engines (local)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock.audit import AuditSettings, read_items, read_report, run_audit
from citelock.audit._sink import MANIFEST, SUMMARY
from citelock.cli import app
from citelock.prompt import record_from_messages
from citelock.store import ResultStore, ReviewQueue
from support.audit_rows import JudgeServer, bad_lines, log_with_answers, make_row, make_rows, write_jsonl, write_parquet

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
SURFACE = AuditSettings(surface="support")


def _cli(*args: Any) -> Any:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _content(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Report rows without what names the input file (key, source)."""
    return [{k: v for k, v in row.items() if k not in ("key", "source")} for row in rows]


def _counts(db: Path | str) -> tuple[int, int]:
    return len(ReviewQueue(db)), len(ResultStore(db))


# -- rows and their errors ---------------------------------------------------------------------------------------


def test_bad_rows_are_reported_with_their_reason_and_skipped(tmp_path: Path) -> None:
    rows = make_rows(8)
    schema_errors = [
        {**make_row(0), "chunk": []},  # a typo: an unknown field
        {**make_row(1), "messages": [{"role": "user"}]},  # a message without content
        {"messages": [{"role": "user", "content": "x"}], "chunks": [], "answer": 3},  # answer of the wrong type
        {**make_row(2), "request_id": ""},  # an empty request id
        {**make_row(3), "created_at": "last tuesday"},  # not a time
        {**make_row(4), "chunks": [{"id": "has space", "text": "t"}]},  # a chunk id with whitespace
    ]
    path = write_jsonl(tmp_path / "rows.jsonl", rows, [json.dumps(r) for r in schema_errors] + bad_lines())
    path.write_bytes(path.read_bytes() + b'{"answer": "\xff"}\n')  # not UTF-8
    result = _cli("audit", path, "--out", tmp_path / "out", "--processes", 1, "--json")
    assert result.exit_code == 2  # bad rows exit 2 whatever the other answers found
    report = {row["row"]: row for row in read_report(tmp_path / "out")}
    errors = {number: row["error"] for number, row in report.items() if row["error"]}
    assert errors[8].startswith("answer: 'claims' must be a non-empty list")  # make_row(7) cannot be parsed
    assert "Additional properties are not allowed ('chunk' was unexpected)" in errors[9]
    assert errors[10] == "schema: $.messages[0]: 'content' is a required property"
    assert errors[11].startswith("schema: $.answer: 3 is not valid")
    assert errors[12].startswith("schema: $.request_id:")
    assert errors[13] == "row: created_at 'last tuesday' is not an ISO 8601 time"
    assert errors[14].startswith("prompt:") and "whitespace" in errors[14]
    assert errors[15].startswith("not valid JSON: ")
    assert errors[16] == "expected a JSON object {messages, chunks, answer, ...}, got an array"
    assert errors[17] == "schema: $: 'chunks' is a required property"
    assert errors[18].startswith("not UTF-8 text (bad byte 0xff")
    assert sorted(errors) == [8, *range(9, 19)]
    assert all(report[n]["ok"] is None and report[n]["findings"] == [] for n in errors)
    summary = json.loads(result.stdout)
    assert summary["bad_rows"] == 11 and summary["answers"] == 7
    assert summary["bad_row_examples"][0] == [str(path), 8, errors[8]]
    assert f"{path} row 10: schema: $.messages[0]: 'content' is a required property" in result.stderr
    assert "11 bad rows skipped" in result.stderr


def test_bad_rows_on_stderr_are_bounded(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", make_rows(1), ["{broken"] * 30)
    result = _cli("audit", path, "--out", tmp_path / "out", "--processes", 1)
    assert result.exit_code == 2
    assert result.stderr.count("citelock: bad row:") == 20
    assert "30 bad rows skipped (10 more not shown here)" in result.stderr
    assert len([r for r in read_report(tmp_path / "out") if r["error"]]) == 30


def test_request_ids_are_derived_from_the_content_and_kept_when_given(tmp_path: Path) -> None:
    rows = make_rows(8)
    twin = dict(rows[0])  # the same prompt with another answer: another request
    twin["answer"] = {"claims": [{"text": "Something else entirely.", "citations": []}]}
    first = run_audit([str(write_jsonl(tmp_path / "a.jsonl", [*rows, twin]))], out=tmp_path / "o1", processes=1)
    assert first.complete
    ids = [row["request_id"] for row in read_report(tmp_path / "o1")]
    assert ids[6] == "req-6"  # given
    assert ids[7].startswith("audit-")  # an answer that cannot be parsed still names its derived request id
    derived = [i for i in ids if i.startswith("audit-")]
    assert len(derived) == 8 and len(set(derived)) == 8  # the twin included
    # the same rows in another file, and a row that differs only by null question: the same derived ids
    again = [{**rows[0], "question": rows[0]["question"]}, *rows[1:]]
    run_audit([str(write_jsonl(tmp_path / "b.jsonl", again))], out=tmp_path / "o2", processes=1)
    assert [row["request_id"] for row in read_report(tmp_path / "o2")] == ids[:8]


def test_jsonl_and_parquet_inputs_give_identical_report_rows(tmp_path: Path) -> None:
    rows = make_rows(24)
    jsonl = write_jsonl(tmp_path / "rows.jsonl", rows)
    nested = write_parquet(tmp_path / "nested.parquet", rows)
    as_text = write_parquet(tmp_path / "text.parquet", rows, json_text=True)
    reports = []
    for name, path in (("j", jsonl), ("n", nested), ("t", as_text)):
        run_audit([str(path)], out=tmp_path / name, settings=SURFACE, processes=1)
        reports.append(_content(read_report(tmp_path / name)))
    assert reports[0] == reports[1] == reports[2]
    assert len(reports[0]) == 24 and {r["row"] for r in reports[0]} == set(range(1, 25))
    statuses = {f["reason"] for r in reports[0] for f in r["findings"]}
    assert {"ID_NOT_IN_PROMPT", "NUMBER_MISMATCH", "UNCITED_CLAIM"} <= statuses


def test_parquet_and_jsonl_reports_read_back_the_same(tmp_path: Path) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(12), bad_lines()))
    for settings in (AuditSettings(), SURFACE):
        name = "s" if settings.runs_policy else "f"
        run_audit([path], out=tmp_path / f"{name}j", settings=settings, processes=1)
        run_audit([path], out=tmp_path / f"{name}p", fmt="parquet", settings=settings, processes=1)
        jsonl, parquet = read_report(tmp_path / f"{name}j"), read_report(tmp_path / f"{name}p")
        assert jsonl == parquet and len(jsonl) == 15
        assert ("decision" in jsonl[0]) == settings.runs_policy
    import pyarrow.dataset as ds

    table = ds.dataset(tmp_path / "sp", format="parquet").to_table()  # the directory reads as one dataset
    assert table.num_rows == 15 and "findings" in table.column_names


# -- the report row is check --json ----------------------------------------------------------------------------


@pytest.mark.parametrize("surface", [False, True])
def test_report_rows_equal_check_json(tmp_path: Path, surface: bool) -> None:
    rows = make_rows(8)[:7]  # every kind that parses: clean, fabricated id, number, uncited, truncated, free text
    settings = SURFACE if surface else AuditSettings()
    run_audit([str(write_jsonl(tmp_path / "rows.jsonl", rows))], out=tmp_path / "out", settings=settings, processes=1)
    report = read_report(tmp_path / "out")
    truncated = report[4]["citations"][0]
    assert truncated["passed"] and truncated["chunk_id"].endswith("-c3")  # the cut chunk, cited in what survived
    for row, reported in zip(rows, report, strict=True):
        prompt = {k: row[k] for k in ("messages", "chunks", "question")}
        prompt["request_id"] = reported["request_id"]
        (tmp_path / "p.json").write_text(json.dumps(prompt), encoding="utf-8")
        answer = row["answer"]
        (tmp_path / "a.txt").write_text(answer if isinstance(answer, str) else json.dumps(answer), encoding="utf-8")
        extra = ["--surface", "support"] if surface else []
        result = _cli("check", "--prompt", tmp_path / "p.json", "--answer", tmp_path / "a.txt", "--json", *extra)
        assert result.exit_code in (0, 1), result.stderr
        expected = json.loads(result.stdout)
        if surface:
            assert expected["accounting"].pop("cache_hits") == 0
        assert {k: v for k, v in reported.items() if k not in ("key", "source", "row", "error")} == expected


# -- the prompt log ------------------------------------------------------------------------------------------------


def test_prompt_log_with_answers_and_a_time_window(tmp_path: Path, target: str) -> None:
    answers, start = log_with_answers(tmp_path, target)
    since, until = (start + timedelta(days=1)).date().isoformat(), (start + timedelta(days=4)).date().isoformat()
    args = ["audit", target, "--answers", answers, "--out", tmp_path / "out", "--surface", "support"]
    result = _cli(*args, "--since", since, "--until", until, "--processes", 1, "--json")
    assert result.exit_code == 2, result.stderr  # two bad rows
    report = read_report(tmp_path / "out")
    audited = [r["request_id"] for r in report if not r["error"]]
    assert audited == ["r1", "r2", "r3"]  # logged on days 1..3; day 0, 4 and 5 are outside
    errors = [r["error"] for r in report if r["error"]]
    assert errors == [
        "request id 'not-logged' is not in the prompt log",
        "schema: $: Additional properties are not allowed ('user' was unexpected)",
    ]
    summary = json.loads(result.stdout)
    assert summary["outside_window"] == 3 and summary["answers"] == 3
    # the log's own database is the default --db: r1 and r2 have one finding each, r3 two (its uncited claim is
    # UNCITED_CLAIM, and its numbers are in no chunk: NUMBER_MISMATCH), and r2's answer (its number wrong, its year
    # dropped) is also OFF_QUESTION for the slot check at high stakes (review), queued there; one result per answer
    assert _counts(target) == (5, 3)
    again = _cli(*args, "--since", since, "--until", until, "--processes", 1)
    assert again.exit_code == 2 and _counts(target) == (5, 3)
    assert len(read_report(tmp_path / "out")) == 5


def test_log_inputs_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    answers, _ = log_with_answers(tmp_path, db, days=1)
    rows = write_jsonl(tmp_path / "rows.jsonl", make_rows(1))
    cases = [
        (["audit", db, "--out", tmp_path / "o"], "stores prompts, not answers: give the answers with --answers"),
        (["audit", rows, "--since", "2025-01-01", "--out", tmp_path / "o"], "--since/--until select prompts"),
        (["audit", rows, "--answers", answers, "--out", tmp_path / "o"], "--answers gives the answers of a prompt"),
        (["audit", db, rows, "--answers", answers, "--out", tmp_path / "o"], "audit one prompt log at a time"),
        (["audit", db, "--answers", answers, "--since", "yesterday", "--out", tmp_path / "o"], "ISO 8601"),
        (["audit", db, "--answers", answers, "--since", "2025-02-01", "--until", "2025-01-01"], "is not before"),
        (["audit", tmp_path / "nope.jsonl", "--out", tmp_path / "o"], "does not exist"),
        (["audit", rows, "--format", "csv", "--out", tmp_path / "o"], "--format must be jsonl or parquet"),
        (["audit", rows, "--address", "x:1", "--out", tmp_path / "o"], "--address is the Ray cluster's"),
        (["audit", rows, "--processes", 0, "--out", tmp_path / "o"], "--processes sizes the local engine's pool"),
        (["audit", rows, "--stakes", "low", "--sample-rate", "2", "--out", tmp_path / "o"], "sample-rate"),
    ]
    for args, message in cases:
        result = _cli(*args)
        assert result.exit_code == 2, (args, result.stdout)
        assert message in result.stderr, (message, result.stderr)
    assert not (tmp_path / "o").exists()


# -- exactly once ------------------------------------------------------------------------------------------------


def test_running_the_same_input_twice_adds_nothing(tmp_path: Path, target: str) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(16), bad_lines()))
    first = run_audit([path], out=tmp_path / "out", db=target, settings=SURFACE, processes=1)
    counts = _counts(target)
    assert counts[0] > 0 and counts[1] == 14
    rows = read_report(tmp_path / "out")
    second = run_audit([path], out=tmp_path / "out", db=target, settings=SURFACE, processes=1)
    assert second.run_rows == 0 and second.resumed and second.figures == first.figures
    assert first.figures.queued == counts[0]  # every finding sent to the queue is an entry there
    assert read_report(tmp_path / "out") == rows
    third = run_audit([path], out=tmp_path / "elsewhere", db=target, settings=SURFACE, processes=1)  # a new report
    assert third.run_rows == 19 and third.run_answers == 14  # 2 answers cannot be parsed, 3 lines are not rows
    assert _content(read_report(tmp_path / "elsewhere")) == _content(rows)
    assert _counts(target) == counts  # the same answers: no new queue entries, no new results


@pytest.mark.slow
def test_one_and_two_processes_give_identical_rows(tmp_path: Path) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(40), bad_lines()))
    one = run_audit([path], out=tmp_path / "one", settings=SURFACE, processes=1)
    two = run_audit([path], out=tmp_path / "two", settings=SURFACE, processes=2, batch_size=3, commit_rows=7)
    assert read_report(tmp_path / "one") == read_report(tmp_path / "two")
    assert two.parts == 5 and one.parts == 1  # 43 rows, tasks of 3, parts of at least 7: 9, 9, 9, 9, 7
    assert one.figures == two.figures
    assert one.figures.queued == 0 and one.database is None  # a surface without a database: nothing queued
    # every part of the two-process run lists its rows in input order (submission order is kept)
    first = [json.loads(line)["row"] for line in (tmp_path / "two" / "part-000001.jsonl").read_text().splitlines()]
    assert first == list(range(1, 10))


def test_a_second_audit_of_the_same_directory_is_refused(tmp_path: Path) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(2)))
    run_audit([path], out=tmp_path / "out", processes=1)
    result = _cli("audit", path, "--out", tmp_path / "out", "--surface", "other")
    assert result.exit_code == 2 and "holds an audit of other inputs or settings (settings differ)" in result.stderr
    from citelock.audit import AuditSink

    with AuditSink(tmp_path / "out", manifest=json.loads((tmp_path / "out" / MANIFEST).read_text())):
        busy = _cli("audit", path, "--out", tmp_path / "out", "--processes", 1)
    assert busy.exit_code == 2 and "another audit is writing to this directory" in busy.stderr


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, "-m", "citelock", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(path: Path, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no part was committed in time"
        time.sleep(0.005)


def _keys(out: Path) -> list[str]:
    return [row["key"] for row in read_report(out)]


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["kill", "interrupt"])
def test_a_killed_or_interrupted_audit_resumes_exactly_once(tmp_path: Path, stop: str) -> None:
    rows = make_rows(300)
    path = write_jsonl(tmp_path / "rows.jsonl", rows, bad_lines())
    args = ["audit", str(path), "--surface", "support", "--quiet", "--batch-size", "2", "--commit-every", "2"]
    workers = ["--processes", "1"] if stop == "kill" else ["--processes", "2"]
    clean = _start([*args, *workers, "--out", "clean", "--db", "clean.db"], tmp_path)
    clean.communicate(timeout=300)
    expected_keys = sorted(_keys(tmp_path / "clean"))
    assert len(expected_keys) == 303 and clean.returncode == 2

    run = _start([*args, *workers, "--out", "out", "--db", "audit.db"], tmp_path)
    _wait_for(tmp_path / "out" / "part-000002.jsonl", run)
    run.send_signal(signal.SIGKILL if stop == "kill" else signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    if stop == "kill":
        assert run.returncode == -signal.SIGKILL
    else:
        assert run.returncode == 130, stderr
        assert b"interrupted; what was committed is kept" in stderr
        assert json.loads((tmp_path / "out" / SUMMARY).read_text())["complete"] is False
    stopped_at = _keys(tmp_path / "out")
    assert 0 < len(stopped_at) < 303  # it stopped mid-run
    assert len(stopped_at) == len(set(stopped_at))

    rerun = _start([*args, *workers, "--out", "out", "--db", "audit.db", "--json"], tmp_path)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 2, stderr
    summary = json.loads(stdout)
    assert summary["complete"] and summary["run"]["resumed"]
    assert summary["run"]["rows"] == 303 - len(stopped_at)
    assert summary["answers"] + summary["bad_rows"] == 303
    keys = _keys(tmp_path / "out")
    assert sorted(keys) == expected_keys  # every key exactly once
    assert read_report(tmp_path / "out") == read_report(tmp_path / "clean")
    assert _counts(tmp_path / "audit.db") == _counts(tmp_path / "clean.db")
    clean_summary = json.loads((tmp_path / "clean" / SUMMARY).read_text())
    for field in ("answers", "bad_rows", "passed", "citations", "findings", "findings_by_reason", "decisions"):
        assert summary[field] == clean_summary[field], field


# -- the database ------------------------------------------------------------------------------------------------


def test_result_keys_make_appends_idempotent(tmp_path: Path, target: str) -> None:
    from citelock.guard import Guard, SurfacePolicy

    store = ResultStore(target)
    record = record_from_messages(make_row(1)["messages"], make_row(1)["chunks"], request_id="x")
    result = Guard(SurfacePolicy(name="s", stakes="low", sample_rate=0.0)).run(record, make_row(1)["answer"])
    assert store.append(result, key="k1") and not store.append(result, key="k1")
    assert store.append(result) and store.append(result)  # no key: always appended, as before
    assert store.append_many([(result, "k1"), (result, "k2"), (result, "k2")]) == 1
    assert len(store) == 4
    queue = ReviewQueue(target)  # enqueue_results: one transaction; add() counts what was new on both databases
    entries = queue.enqueue_results([result, result])
    assert len(entries) == 2 * len(result.report.findings) and len(queue) == len(result.report.findings)
    assert queue.add(entries) == 0


def test_results_of_an_older_database_keep_and_gain_the_key_column(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # the table as citelock wrote it before result keys
        conn.execute(
            "CREATE TABLE citelock_results (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at DATETIME NOT NULL "
            "DEFAULT CURRENT_TIMESTAMP, request_id VARCHAR(200) NOT NULL, surface VARCHAR(200) NOT NULL, "
            "week VARCHAR(10) NOT NULL, decision VARCHAR(32) NOT NULL, result TEXT NOT NULL)"
        )
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(4)))
    run_audit([path], out=tmp_path / "o1", db=str(db), settings=SURFACE, processes=1)
    run_audit([path], out=tmp_path / "o2", db=str(db), settings=SURFACE, processes=1)
    assert len(ResultStore(db)) == 4
    with sqlite3.connect(db) as conn:
        indexes = [row[1] for row in conn.execute("PRAGMA index_list(citelock_results)")]
    assert "citelock_results_result_key" in indexes


@pytest.mark.slow
def test_a_judge_server_that_goes_away_stops_the_audit_before_committing(tmp_path: Path) -> None:
    server = JudgeServer()  # the judge asks which model the server runs when it is built
    settings = AuditSettings(surface="support", judge="llm", judge_base_url=server.url)
    guard = settings.build_guard()
    server.close()
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(4)))
    from citelock.errors import BackendConnectionError

    with pytest.raises(BackendConnectionError):
        run_audit([path], out=tmp_path / "out", settings=settings, processes=1, guard=guard)
    assert read_report(tmp_path / "out") == []  # nothing judged by nobody was committed
    assert json.loads((tmp_path / "out" / SUMMARY).read_text())["complete"] is False
    # in worker processes (each builds its judge, which asks the server for its model): the same error arrives
    with pytest.raises(BackendConnectionError, match="could not reach the server"):
        run_audit([path], out=tmp_path / "out", settings=settings, processes=2)
    assert read_report(tmp_path / "out") == []


@pytest.mark.parametrize(
    "options",
    [
        {"surface": "legal"},
        {"surface": "faq", "stakes": "low", "sample_rate": 0.25, "judge": "offline", "on_fail": "mark"},
        {"judge": "lexical", "on_fail": "drop_claim"},
        {"surface": "faq", "stakes": "low"},
    ],
)
def test_settings_build_the_guard_check_builds(options: dict[str, Any]) -> None:
    from citelock.cli._surface_options import SurfaceOptions, surface_setup

    setup = surface_setup(SurfaceOptions(**options))
    assert setup is not None
    assert SurfaceOptions(**options).audit_settings() == AuditSettings(**options)  # what `citelock audit` passes
    built = AuditSettings(**options).build_guard()
    assert built.policy == setup.guard.policy and built.routing == setup.guard.routing
    judges = [(j.name, j.version) if j is not None else None for j in (built.judge, setup.guard.judge)]
    assert judges[0] == judges[1]


def test_read_items_streams_in_input_order_with_stable_keys(tmp_path: Path) -> None:
    a = str(write_jsonl(tmp_path / "a.jsonl", make_rows(3)))
    b = str(write_jsonl(tmp_path / "b.jsonl", make_rows(2), ["", "{bad"]))
    items = list(read_items([a, b]))
    assert [(i.source, i.row) for i in items] == [(a, 1), (a, 2), (a, 3), (b, 1), (b, 2), (b, 4)]
    assert items[-1].error is not None and items[-1].payload is None
    assert [i.key for i in read_items([a, b])] == [i.key for i in items]
    assert len({i.key for i in items}) == 6


def test_citelock_errors_cross_process_boundaries_whole() -> None:
    import pickle

    from citelock.errors import BackendConnectionError, ParseError, TruncatedOutputError

    for error in (
        BackendConnectionError("could not reach the server", provider="openai", retryable=True),
        TruncatedOutputError("cut short", partial='{"claims": [', max_tokens=8, provider="llama-cpp-python"),
        ParseError("bad claims", where="claims[0]"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error) and vars(copy) == vars(error)
