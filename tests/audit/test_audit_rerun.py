"""``citelock audit`` over time: rows in input order, an honest progress count, edited inputs rerun, the key index.

The local engine here; ``tests/audit/test_audit_ray.py`` runs the same edits through the Ray engine.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock.audit import AuditSettings, AuditSink, read_report, run_audit
from citelock.audit._rows import count_rows
from citelock.audit._sink import KEYS, PARTS
from citelock.cli import app
from citelock.store import ResultStore, ReviewQueue
from support.audit_rows import bad_lines, log_with_answers, make_row, make_rows, write_jsonl, write_parquet

SURFACE = AuditSettings(surface="support")
FOUND = ("answers", "bad_rows", "passed", "citations", "findings", "findings_by_reason", "decisions")


def _content(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Report rows without what names the input file and its content's hash (key, source)."""
    return [{k: v for k, v in row.items() if k not in ("key", "source")} for row in rows]


def _part_rows(out: Path) -> list[list[tuple[str, int]]]:
    """(source file name, row) of each part's rows, part by part, as written."""
    parts = []
    for path in sorted(out.glob("part-*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        parts.append([(Path(row["source"]).name, row["row"]) for row in rows])
    return parts


def _found(summary: Any) -> dict[str, Any]:
    data = summary.to_json() if hasattr(summary, "to_json") else summary
    return {name: data[name] for name in FOUND}


# -- input order -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("processes", [1, 2])
def test_rows_come_out_in_input_order_not_by_source_name(tmp_path: Path, processes: int) -> None:
    late = str(write_jsonl(tmp_path / "z-first.jsonl", make_rows(9), ["{broken"]))  # named last, given first
    early = str(write_jsonl(tmp_path / "a-second.jsonl", make_rows(8, start=20)))
    run_audit([late, early], out=tmp_path / "out", processes=processes, batch_size=3, commit_rows=7)
    expected = [("z-first.jsonl", n) for n in range(1, 11)] + [("a-second.jsonl", n) for n in range(1, 9)]
    parts = _part_rows(tmp_path / "out")
    assert len(parts) > 1 and any(len({name for name, _ in part}) == 2 for part in parts)  # a part spans both
    assert [row for part in parts for row in part] == expected  # each part, and the parts in turn, in input order
    assert [(Path(r["source"]).name, r["row"]) for r in read_report(tmp_path / "out")] == expected
    run_audit([late, early], out=tmp_path / "pq", fmt="parquet", processes=1)
    assert read_report(tmp_path / "pq") == read_report(tmp_path / "out")


# -- progress ----------------------------------------------------------------------------------------------------


def test_progress_counts_rows_skipped_by_the_window_as_done(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    answers, start = log_with_answers(tmp_path, db, days=12)  # and 2 bad rows after them
    since, until = start + timedelta(days=2), start + timedelta(days=9)  # days 2..8 audited, 5 rows outside

    def audit() -> tuple[int, list[int], Any]:
        began: list[int] = []
        done: list[int] = []
        summary = run_audit(
            [db], answers=[str(answers)], since=since, until=until, out=tmp_path / "out", processes=1,
            batch_size=2, on_start=began.append, on_progress=done.append,
        )  # fmt: skip
        return began[0], done, summary

    total = count_rows([db], answers=[str(answers)])  # what the CLI's bar takes as its total
    began, done, summary = audit()
    assert total == 14 and summary.outside_window == 5
    assert summary.figures.answers + summary.figures.bad_rows == 9  # days 2..8, and the 2 bad rows
    assert began == 0 and sum(done) == total  # the bar ends full: 9 rows committed + 5 skipped
    assert all(count > 0 for count in done)
    began, done, summary = audit()  # a rerun: the 9 committed are done at the start, the 5 skipped again
    assert began == 9 and sum(done) == 5 and began + sum(done) == total and summary.run_rows == 0


# -- edited inputs -----------------------------------------------------------------------------------------------


def _fixed(i: int) -> dict[str, Any]:
    """Row ``i`` (one that cannot be parsed, ``i % 8 == 7``) with its answer repaired."""
    row = make_row(i)
    row["answer"] = make_row(i - 7)["answer"]
    row["answer"]["claims"][0]["citations"][0]["chunk_id"] = row["chunks"][0]["id"]
    row["answer"]["claims"][0]["text"] = row["answer"]["claims"][0]["citations"][0]["span"] = (
        row["chunks"][0]["text"].split(". ")[0] + "."
    )
    return row


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_an_edited_input_supersedes_its_old_report_rows(tmp_path: Path, fmt: str) -> None:
    rows = make_rows(16)
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, rows, bad_lines())
    db = str(tmp_path / "audit.db")

    def audit(out: str = "out", database: str = db) -> Any:
        result = CliRunner().invoke(
            app,
            ["audit", str(path), "--out", str(tmp_path / out), "--db", database, "--format", fmt,
             "--surface", "support", "--processes", "1", "--batch-size", "3", "--commit-every", "5", "--json"],
        )  # fmt: skip
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        return result.exit_code, json.loads(result.stdout)

    code, first = audit()
    assert code == 2 and first["bad_rows"] == 5 and first["superseded"] == 0  # rows 8, 16 and 3 bad lines
    original = read_report(tmp_path / "out")
    queued = len(ReviewQueue(db))

    # fix every bad row and change one answer: the same rows, five fixed, one edited
    edited = [*rows]
    edited[7], edited[15] = _fixed(7), _fixed(15)
    edited[2] = {**rows[2], "answer": rows[0]["answer"]}
    write_jsonl(path, edited)
    code, second = audit()
    assert code in (0, 1)  # no bad row left: the audit is whole again
    assert second["superseded"] == 6 and second["run"]["rows"] == 3  # 3 new versions; 3 deleted lines retired
    assert second["bad_rows"] == 0 and second["bad_row_examples"] == []
    report = read_report(tmp_path / "out")
    assert [r["row"] for r in report] == list(range(1, 17))  # each input row once
    assert report[2]["key"] != original[2]["key"] and report[2]["counts"] != original[2]["counts"]
    assert [r["key"] for i, r in enumerate(report) if i not in (2, 7, 15)] == [
        r["key"] for i, r in enumerate(original[:16]) if i not in (2, 7, 15)
    ]  # the others are the rows committed the first time, not audited again
    text = CliRunner().invoke(
        app,
        ["audit", str(path), "--out", str(tmp_path / "out"), "--db", db, "--format", fmt, "--surface", "support",
         "--processes", "1", "--quiet"],
    )  # fmt: skip
    assert "superseded: 6 report rows replaced by a newer version of their input row" in text.stdout
    _, clean = audit("clean", str(tmp_path / "clean.db"))  # the edited input audited from scratch
    assert _content(report) == _content(read_report(tmp_path / "clean"))
    assert _found(second) == _found(clean)
    assert second["queued"] >= queued and len(ReviewQueue(db)) >= queued  # what was queued stays queued

    # a line inserted at the top: every row moves down one, so every row is new; then the edit is undone
    write_jsonl(path, [make_row(40), *edited])
    code, third = audit()
    assert third["run"]["rows"] == 17 and third["superseded"] == 6 + 16
    assert [r["row"] for r in read_report(tmp_path / "out")] == list(range(1, 18))
    stored = len(ResultStore(db)), len(ReviewQueue(db))
    write_jsonl(path, rows, bad_lines())  # back to the first version: its rows come back (their old keys too)
    code, fourth = audit()
    assert code == 2 and _found(fourth) == _found(first) and fourth["run"]["rows"] == 19
    assert read_report(tmp_path / "out") == original
    assert (len(ResultStore(db)), len(ReviewQueue(db))) == stored  # the same answers again: nothing new stored


def test_the_key_index_is_rebuilt_from_the_parts(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    index = tmp_path / "out" / KEYS
    write_jsonl(path, make_rows(12))
    run_audit([str(path)], out=tmp_path / "out", processes=1, batch_size=4, commit_rows=4)
    stale = tmp_path / "stale.sqlite"  # the index as it was after 3 parts (a crash before the next ingest)
    with AuditSink(tmp_path / "out", manifest=json.loads((tmp_path / "out" / "_manifest.json").read_text())):
        pass  # opening and closing checkpoints the index into its one file
    stale.write_bytes(index.read_bytes())
    write_jsonl(path, make_rows(20))  # 8 rows more: parts 4 and 5
    first = run_audit([str(path)], out=tmp_path / "out", processes=1, batch_size=4, commit_rows=4)
    assert first.parts == 5 and first.run_rows == 8
    for damage in ("delete", "garbage", "stale"):
        for suffix in ("-wal", "-shm"):
            index.with_name(KEYS + suffix).unlink(missing_ok=True)
        if damage == "delete":
            index.unlink()
        elif damage == "garbage":
            index.write_bytes(b"not a database" * 100)
        else:
            index.write_bytes(stale.read_bytes())
        again = run_audit([str(path)], out=tmp_path / "out", processes=1, batch_size=4, commit_rows=4)
        assert again.run_rows == 0 and again.resumed and again.figures == first.figures, damage
        with AuditSink(tmp_path / "out", manifest=json.loads((tmp_path / "out" / "_manifest.json").read_text())) as s:
            assert s.committed_rows == 20 and len(s.done_keys()) == 20
    assert len(list((tmp_path / "out" / PARTS).glob("part-*.json"))) == 5


def test_a_deleted_part_is_redone(tmp_path: Path) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(12)))
    first = run_audit([path], out=tmp_path / "out", processes=1, batch_size=4, commit_rows=4)
    report = read_report(tmp_path / "out")
    (tmp_path / "out" / "part-000003.jsonl").unlink()  # the last part: its rows are audited again
    again = run_audit([path], out=tmp_path / "out", processes=1, batch_size=4, commit_rows=4)
    assert again.run_rows == 4 and again.figures == first.figures
    assert read_report(tmp_path / "out") == report


def test_parquet_inputs_edited_in_place(tmp_path: Path) -> None:
    rows = make_rows(10)
    path = write_parquet(tmp_path / "rows.parquet", rows)
    run_audit([str(path)], out=tmp_path / "out", settings=SURFACE, processes=1)
    write_parquet(path, rows[:6])  # the last four rows deleted
    summary = run_audit([str(path)], out=tmp_path / "out", settings=SURFACE, processes=1)
    assert summary.superseded == 4 and summary.run_rows == 0
    assert [r["row"] for r in read_report(tmp_path / "out")] == list(range(1, 7))
    clean = run_audit([str(path)], out=tmp_path / "clean", settings=SURFACE, processes=1)
    assert _found(summary) == _found(clean)


def test_an_audit_written_before_the_key_index_is_continued(tmp_path: Path) -> None:
    late = tmp_path / "z-first.jsonl"  # named last, given first
    early = str(write_jsonl(tmp_path / "a-second.jsonl", make_rows(6, start=10)))
    rows = make_rows(8)
    write_jsonl(late, rows)
    inputs = [str(late), early]
    run_audit(inputs, out=tmp_path / "out", processes=1, batch_size=4, commit_rows=4)
    for meta_path in (tmp_path / "out" / PARTS).glob("part-*.json"):  # the metadata as citelock wrote it before
        meta = json.loads(meta_path.read_text())
        meta_path.write_text(json.dumps({k: meta[k] for k in ("part", "rows", "keys", "figures")}))
    (tmp_path / "out" / KEYS).unlink()
    assert [Path(r["source"]).name for r in read_report(tmp_path / "out")] == [late.name] * 8 + ["a-second.jsonl"] * 6

    write_jsonl(late, [*rows[:2], {**rows[2], "answer": rows[0]["answer"]}, *rows[3:]])  # row 3 edited
    summary = run_audit(inputs, out=tmp_path / "out", processes=1, batch_size=4, commit_rows=4)
    assert summary.run_rows == 1 and summary.superseded == 1  # the old rows' positions were recovered
    clean = run_audit(inputs, out=tmp_path / "clean", processes=1)
    assert read_report(tmp_path / "out") == read_report(tmp_path / "clean")
    assert _found(summary) == _found(clean)
