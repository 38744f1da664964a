from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.guard import SurfacePolicy
from citelock.reasons import REASONS, ReasonCode
from citelock.store import ReviewQueue
from support.fakes import REVENUE_CHUNKS, KeywordJudge, make_record
from support.guarding import guard_and_store

runner = CliRunner()


def cite(text: str, chunk_id: str) -> dict[str, object]:
    return {"text": text, "citations": [{"chunk_id": chunk_id}]}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "citelock.db"
    queue = ReviewQueue(path)
    policy = SurfacePolicy(name="billing", stakes="high")
    answers = [
        {"claims": [cite("Operating margins expanded.", "c1"), cite("Revenue grew 12%.", "c-404")]},
        {"claims": [cite("Dividends were suspended.", "c1"), cite("Revenue grew 12%.", "c-405")]},
    ]
    for n, answer in enumerate(answers):
        guard_and_store(
            make_record("q?", REVENUE_CHUNKS, request_id=f"r{n}"),
            answer,
            policy=policy,
            judge=KeywordJudge(),
            queue=queue,
        )
    return path


def entry_id(db: Path, reason: str) -> str:
    (entries,) = ReviewQueue(db).grouped(reason=reason).values()
    return entries[0].id


def test_list_groups_by_reason_with_counts(db: Path) -> None:
    result = runner.invoke(app, ["queue", "list", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["counts"] == {"ID_NOT_IN_PROMPT": 2, "UNSUPPORTED": 1, "WRONG_CHUNK": 1}
    assert data["total"] == 4
    assert [e["request_id"] for e in data["groups"]["ID_NOT_IN_PROMPT"]] == ["r0", "r1"]
    table = runner.invoke(app, ["queue", "list", "--db", str(db)])
    assert table.exit_code == 0
    assert "4 open entries in 3 reason group(s)" in table.output
    assert "ID_NOT_IN_PROMPT (2)" in table.output
    flat = " ".join(table.output.split())  # rich wraps a group's caption (its meaning and fix from REASONS)
    for code in (ReasonCode.ID_NOT_IN_PROMPT, ReasonCode.UNSUPPORTED, ReasonCode.WRONG_CHUNK):
        assert f"{REASONS[code].description}; what to do: {REASONS[code].fix}" in flat, code
    only = runner.invoke(app, ["queue", "list", "--db", str(db), "--reason", "WRONG_CHUNK", "--json"])
    assert json.loads(only.output)["counts"] == {"WRONG_CHUNK": 1}


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_list_never_cuts_the_entry_id_or_the_surface_on_a_narrow_terminal(
    db: Path, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    table = runner.invoke(app, ["queue", "list", "--db", str(db)])
    assert table.exit_code == 0, table.output
    for entries in ReviewQueue(db).grouped().values():
        for e in entries:
            assert e.id[:12] in table.output, (columns, e.id)  # the id a reviewer types into `queue show`
    assert "billing" in "".join(table.output.split())  # folded, never cut with an ellipsis


def test_list_rejects_unknown_reason_and_missing_db(db: Path, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["queue", "list", "--db", str(db), "--reason", "NOPE"])
    assert bad.exit_code == 2
    assert "unknown reason code 'NOPE'" in bad.output
    missing = runner.invoke(app, ["queue", "list", "--db", str(tmp_path / "nope.db")])
    assert missing.exit_code == 2
    assert "no citelock database at" in missing.output
    assert not (tmp_path / "nope.db").exists()


def test_default_db_from_env(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITELOCK_DB", str(db))
    result = runner.invoke(app, ["queue", "list", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)["total"] == 4


def test_show_has_everything_a_reviewer_needs(db: Path) -> None:
    wid = entry_id(db, "WRONG_CHUNK")
    result = runner.invoke(app, ["queue", "show", wid[:8], "--db", str(db)])
    assert result.exit_code == 0, result.output
    for expected in (
        "WRONG_CHUNK (support)",
        "Operating margins expanded.",
        "Revenue grew 12% in 2024.",
        "related chunk  c2",
        "support=no",
        "keyword-test 1",
        "request r0, sha256",
        "resolution  open",
        f"meaning  {REASONS[ReasonCode.WRONG_CHUNK].description}",
        f"what to do  {REASONS[ReasonCode.WRONG_CHUNK].fix}",
    ):
        assert expected in result.output, expected
    as_json = json.loads(runner.invoke(app, ["queue", "show", wid, "--db", str(db), "--json"]).output)
    assert as_json["id"] == wid and as_json["resolution"] is None
    missing = runner.invoke(app, ["queue", "show", "ffff0000", "--db", str(db)])
    assert missing.exit_code == 2
    assert "no queue entry with id 'ffff0000'" in missing.output


def test_resolve_accept_repair_escalate_once(db: Path) -> None:
    uid = entry_id(db, "UNSUPPORTED")
    ok = runner.invoke(app, ["queue", "resolve", uid, "--outcome", "accept", "--db", str(db)])
    assert ok.exit_code == 0, ok.output
    assert "as accept (stored as a calibration sample, label yes)" in ok.output
    again = runner.invoke(app, ["queue", "resolve", uid, "--outcome", "repair", "--note", "x", "--db", str(db)])
    assert again.exit_code == 2
    assert "already has an outcome (accept at" in again.output and "citelock queue rereview" in again.output

    ids = [
        e["id"]
        for e in json.loads(runner.invoke(app, ["queue", "list", "--db", str(db), "--json"]).output)["groups"][
            "ID_NOT_IN_PROMPT"
        ]
    ]
    repair = runner.invoke(
        app,
        [
            "queue",
            "resolve",
            ids[0],
            "--outcome",
            "repair",
            "--note",
            "cite c1",
            "--chunk",
            "c1",
            "--db",
            str(db),
            "--json",
        ],
    )
    assert repair.exit_code == 0, repair.output
    assert json.loads(repair.output)["chunk_id"] == "c1"
    no_category = runner.invoke(app, ["queue", "resolve", ids[1], "--outcome", "escalate", "--db", str(db)])
    assert no_category.exit_code == 2
    assert "needs a category" in no_category.output
    escalate = runner.invoke(
        app, ["queue", "resolve", ids[1], "--outcome", "escalate", "--category", "ranking", "--db", str(db)]
    )
    assert escalate.exit_code == 0
    queue = ReviewQueue(db)
    assert queue.outcome_counts() == {"accept": 1, "repair": 1, "escalate": 1, "escalate:ranking": 1}
    assert len(queue.calibration_samples()) == 1
    shown = runner.invoke(app, ["queue", "show", ids[0], "--db", str(db)])
    assert "repair at" in shown.output and "chunk=c1" in shown.output and "note  cite c1" in shown.output
    remaining = json.loads(runner.invoke(app, ["queue", "list", "--db", str(db), "--json"]).output)
    assert remaining["counts"] == {"WRONG_CHUNK": 1}


def test_rereview_supersedes_with_a_name_and_show_lists_the_history(db: Path) -> None:
    uid = entry_id(db, "UNSUPPORTED")
    base = ["--db", str(db)]
    assert (
        runner.invoke(app, ["queue", "resolve", uid, "--outcome", "accept", "--reviewer", "ana", *base]).exit_code == 0
    )
    nameless = runner.invoke(app, ["queue", "rereview", uid, "--outcome", "repair", "--note", "x", *base])
    assert nameless.exit_code == 2 and "--reviewer" in nameless.output  # the name is required
    changed = runner.invoke(
        app,
        [
            "queue",
            "rereview",
            uid,
            "--outcome",
            "repair",
            "--note",
            "cite c2",
            "--reviewer",
            "bo",
            "--revision",
            "0",
            *base,
        ],
    )
    assert changed.exit_code == 0, changed.output
    assert "re-reviewed" in changed.output and "revision 1, supersedes revision 0" in changed.output
    stale = runner.invoke(
        app, ["queue", "rereview", uid, "--outcome", "accept", "--reviewer", "cy", "--revision", "0", *base]
    )
    assert stale.exit_code == 2 and "at revision 1" in stale.output
    shown = runner.invoke(app, ["queue", "show", uid, *base])
    assert "resolution  repair at" in shown.output and "by bo" in shown.output
    assert "superseded r0  accept at" in shown.output and "by ana" in shown.output
    as_json = json.loads(runner.invoke(app, ["queue", "show", uid, "--json", *base]).output)
    assert [e["reviewer"] for e in as_json["history"]] == ["ana", "bo"]
    assert as_json["resolution"]["revision"] == 1 and as_json["resolution"]["outcome"] == "repair"
    assert ReviewQueue(db).calibration_samples() == []  # the accept was overturned
    open_one = entry_id(db, "WRONG_CHUNK")
    still_open = runner.invoke(app, ["queue", "rereview", open_one, "--outcome", "accept", "--reviewer", "bo", *base])
    assert still_open.exit_code == 2 and "still open" in still_open.output
    missing = runner.invoke(app, ["queue", "rereview", "ffff0000", "--outcome", "accept", "--reviewer", "bo", *base])
    assert missing.exit_code == 2 and "no queue entry with id 'ffff0000'" in missing.output
