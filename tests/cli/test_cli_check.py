import json
import sqlite3

import pytest
from typer.testing import CliRunner

from citelock import PromptLog, ResultStore, assemble, serialize
from citelock.cli import app
from citelock.cli._io import MAX_INPUT_BYTES
from citelock.judges import DEFAULT_JUDGE

runner = CliRunner()

PROMPT = {
    "messages": [
        {"role": "system", "content": "Answer from the context."},
        {
            "role": "user",
            "content": "Context:\n[c-1] Revenue grew 12% in 2023.\n[c-2] Freight is paid by the buyer."
            "\nQuestion: Did revenue grow?",
        },
    ],
    "chunks": [
        {"id": "c-1", "text": "Revenue grew 12% in 2023."},
        {"id": "c-2", "text": "Freight is paid by the buyer."},
    ],
    "question": "Did revenue grow?",
}
GOOD = {
    "claims": [{"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1", "span": "Revenue grew 12%"}]}]
}
BAD = {
    "claims": [
        {"text": "Revenue grew 12%.", "citations": [{"chunk_id": "c-77"}]},
        {"text": "The buyer pays freight."},
    ]
}


def _write(tmp_path, name, data):
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_ok_exits_zero(tmp_path) -> None:
    result = _run(
        "check",
        "--prompt",
        _write(tmp_path, "p.json", PROMPT),
        "--answer",
        _write(tmp_path, "a.json", GOOD),
        "--json",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["ok"] is True and out["findings"] == [] and out["counts"] == {}


def test_findings_exit_one_with_json_shape(tmp_path) -> None:
    store = _write(tmp_path, "s.jsonl", '{"id": "c-77", "text": "old"}\n{"id": "c-1", "text": "x"}\n')
    result = _run(
        "check",
        "--prompt",
        _write(tmp_path, "p.json", PROMPT),
        "--answer",
        _write(tmp_path, "a.json", BAD),
        "--store",
        store,
        "--json",
    )
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["ok"] is False
    assert out["counts"] == {"STALE_ID": 1, "UNCITED_CLAIM": 1}
    first = out["findings"][0]
    assert {"reason", "claim", "chunk_id", "span"} <= first.keys()
    assert first["reason"] == "STALE_ID" and first["chunk_id"] == "c-77" and first["span"] is None


def test_readable_table(tmp_path) -> None:
    result = _run("check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", BAD))
    assert result.exit_code == 1
    assert "ID_NOT_IN_PROMPT" in result.stdout and "UNCITED_CLAIM" in result.stdout and "FAILED" in result.stdout


def test_free_text_answer_and_logged_record(tmp_path) -> None:
    record = serialize(assemble("Did revenue grow?", PROMPT["chunks"]))
    prompt = _write(tmp_path, "rec.json", record.model_dump_json())
    answer = _write(tmp_path, "a.json", {"text": "Revenue grew 12% in 2023 [c-1]."})
    assert _run("check", "--prompt", prompt, "--answer", answer).exit_code == 0


@pytest.mark.parametrize(
    ("prompt", "answer", "message"),
    [
        ("{not json", GOOD, "not valid JSON"),
        ([1, 2], GOOD, "expected a JSON object"),
        ({**PROMPT, "messages": "hi"}, GOOD, "'messages' must be a list"),
        ({**PROMPT, "extra": 1}, GOOD, "unknown fields ['extra']"),
        ({**PROMPT, "chunks": [{"id": "c-1"}]}, GOOD, "chunk #0"),
        ({**PROMPT, "messages": [{"role": "user"}]}, GOOD, "messages[0]"),
        ({**PROMPT, "messages": []}, GOOD, "messages is empty"),
        (PROMPT, {"claims": [{"text": 3}]}, "claims[0].text"),
        (PROMPT, {"claims": [{"text": "x", "bogus": True}]}, "bogus"),
        (PROMPT, "{oops", "not valid JSON"),
        (b"\xff\xfe\x00", GOOD, "not UTF-8"),
        (PROMPT, b'{"text": "caf\xe9"}', "not UTF-8"),
    ],
)
def test_bad_input_exits_two_with_a_clear_message(tmp_path, prompt, answer, message) -> None:
    result = _run(
        "check",
        "--prompt",
        _write(tmp_path, "p.json", prompt),
        "--answer",
        _write(tmp_path, "a.json", answer),
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_missing_and_huge_files(tmp_path) -> None:
    result = _run("check", "--prompt", tmp_path / "nope.json", "--answer", _write(tmp_path, "a.json", GOOD))
    assert result.exit_code == 2 and "cannot read" in result.stderr
    huge = tmp_path / "huge.json"
    with huge.open("wb") as fh:
        fh.truncate(MAX_INPUT_BYTES + 1)
    result = _run("check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", huge)
    assert result.exit_code == 2 and "the limit is" in result.stderr


def test_log_replay_and_failing_call_leaves_log_intact(tmp_path) -> None:
    db = tmp_path / "log.db"
    prompt = _write(tmp_path, "p.json", {**PROMPT, "request_id": "req-42"})
    assert _run("check", "--prompt", prompt, "--answer", _write(tmp_path, "a.json", GOOD), "--db", db).exit_code == 0
    before = sqlite3.connect(db).execute("SELECT request_id, record_sha256 FROM citelock_prompt_log").fetchall()
    bad = _run("check", "--prompt", prompt, "--answer", _write(tmp_path, "b.json", "{oops"), "--db", db)
    assert bad.exit_code == 2
    again = _run("check", "--prompt", prompt, "--answer", _write(tmp_path, "c.json", BAD), "--db", db)
    assert again.exit_code == 1
    after = sqlite3.connect(db).execute("SELECT request_id, record_sha256 FROM citelock_prompt_log").fetchall()
    assert before == after == [("req-42", before[0][1])]
    assert PromptLog(db).verify() == []
    replay = _run("check", "--request-id", "req-42", "--db", db, "--answer", tmp_path / "a.json", "--json")
    assert replay.exit_code == 0 and json.loads(replay.stdout)["request_id"] == "req-42"
    missing = _run("check", "--request-id", "nope", "--db", db, "--answer", tmp_path / "a.json")
    assert missing.exit_code == 2 and "not in the prompt log" in missing.stderr


def test_surface_policy_judges_queues_and_feeds_metrics(tmp_path) -> None:
    db = tmp_path / "team.db"
    wrong = {
        "claims": [
            {"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1", "span": "Revenue grew 12%"}]},
            {"text": "Freight is paid by the buyer.", "citations": [{"chunk_id": "c-1"}]},
        ]
    }
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", wrong)]
    result = _run(*args, "--judge", "lexical", "--surface", "legal", "--db", db, "--json")
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert out["decision"] == "block" and out["surface"] == "legal"
    assert out["accounting"]["judge_calls"] == 2
    wrong_chunk = [f for f in out["findings"] if f["reason"] == "WRONG_CHUNK"]
    assert len(wrong_chunk) == 1 and wrong_chunk[0]["related_chunk_id"] == "c-2"
    listed = _run("queue", "list", "--db", db, "--json")
    assert listed.exit_code == 0, listed.output
    assert "WRONG_CHUNK" in listed.stdout
    metrics = _run("metrics", "--db", db, "--json")
    assert metrics.exit_code == 0, metrics.output
    assert "legal" in metrics.stdout


def test_surface_policy_bad_options(tmp_path) -> None:
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    assert "unknown judge" in _run(*args, "--judge", "oracle").stderr
    result = _run(*args, "--judge", "lexical", "--stakes", "high", "--sample-rate", "0.5")
    assert result.exit_code == 2 and "sample_rate must be 1.0" in result.stderr
    ok = _run(*args, "--judge", "lexical", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["decision"] == "pass"


def test_judge_server_options_need_the_llm_judge(tmp_path) -> None:
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    result = _run(*args, "--judge", "lexical", "--judge-base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == 2 and "need --judge llm" in result.stderr
    result = _run(*args, "--judge-model", "m.gguf")
    assert result.exit_code == 2 and "need --judge llm" in result.stderr


@pytest.mark.server
def test_llm_judge_on_a_real_server_runs_under_the_surface_policy(tmp_path, llama_server) -> None:
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    result = _run(*args, "--judge", "llm", "--judge-base-url", llama_server.base_url, "--surface", "legal", "--json")
    assert result.exit_code in (0, 1), result.output  # the tiny model may or may not say yes: both are verdicts
    out = json.loads(result.stdout)
    cited = sum(len(c["citations"]) for c in GOOD["claims"])
    assert out["surface"] == "legal" and out["accounting"]["judge_calls"] == cited
    assert out["decision"] == ("pass" if result.exit_code == 0 else "block")


@pytest.mark.server
def test_escalation_to_an_llm_judge_on_a_real_server(tmp_path, llama_server) -> None:
    from citelock.judges import LexicalJudge

    # a routing that sends every lexical score to review, so every citation is escalated to the server's judge
    wide = {"pass_at": 1.01, "fail_below": -0.01, "judge": "lexical", "judge_version": LexicalJudge().version}
    calibration = _calibration(tmp_path, {"legal": wide})
    db = tmp_path / "team.db"
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    result = _run(
        *args,
        "--surface", "legal", "--judge", "lexical", "--calibration", calibration,
        "--escalate-base-url", llama_server.base_url, "--db", db, "--json",
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output  # the tiny model may or may not say yes: both are verdicts
    out = json.loads(result.stdout)
    cited = sum(len(c["citations"]) for c in GOOD["claims"])
    accounting = out["accounting"]
    assert accounting["judge_calls"] == cited
    # every lexical score goes to review, so each first-judge call is escalated: the cited pair's, and, when the
    # server fails it, each other chunk's during best-evidence diagnosis (the same two tiers)
    assert accounting["escalations"] == cited + accounting["diagnosis_calls"]
    (stored,) = ResultStore(db).latest(surface="legal")
    (support,) = stored.support
    assert support.escalation_judge is not None and support.escalation_judge.startswith("llm")
    assert support.escalation_label in ("yes", "partial", "no")  # the server's verdict decided the route
    assert out["decision"] == stored.decision


def _calibration(tmp_path, surfaces):
    from citelock.judges._routing import Routing, save_calibration

    path = tmp_path / "calibration.json"
    save_calibration(path, {name: Routing.model_validate(r) for name, r in surfaces.items()})
    return path


def test_surface_options_are_checked_before_anything_is_written(tmp_path) -> None:
    db = tmp_path / "team.db"
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    bad = _run(*args, "--surface", "legal", "--db", db, "--on-fail", "shred")
    assert bad.exit_code == 2 and "--on-fail must be block, drop_claim or mark" in bad.stderr
    other = _calibration(tmp_path, {"*": {"pass_at": 0.8, "fail_below": 0.2, "judge": "llm", "judge_version": "3"}})
    mismatch = _run(*args, "--surface", "legal", "--db", db, "--calibration", other)
    assert mismatch.exit_code == 2
    assert "calibrated for judge llm 3" in mismatch.stderr and f"judge in use is {DEFAULT_JUDGE}" in mismatch.stderr
    lexical = {"pass_at": 0.8, "fail_below": 0.2, "judge": "lexical", "judge_version": "1"}
    named = _calibration(tmp_path, {"chat": lexical})
    missing = _run(*args, "--surface", "legal", "--judge", "lexical", "--db", db, "--calibration", named)
    assert missing.exit_code == 2 and "no routing for surface 'legal'" in missing.stderr
    assert not db.exists()  # nothing was logged, queued or stored
    # --surface without --judge on a high-stakes surface judges with the offline judge
    ok = _run(*args, "--surface", "legal", "--db", db, "--json")
    assert ok.exit_code == 0, ok.output
    out = json.loads(ok.stdout)
    assert out["decision"] == "pass" and out["accounting"]["judge_calls"] == 1
    assert out["routes"][0]["route"] == "pass" and out["outcomes"][0]["action"] == "serve"


def test_on_fail_drop_claim_repairs_and_exits_1(tmp_path) -> None:
    db = tmp_path / "team.db"
    mixed = {"claims": [*GOOD["claims"], {"text": "Revenue grew 40% in 2023.", "citations": [{"chunk_id": "c-1"}]}]}
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", mixed)]
    result = _run(*args, "--surface", "legal", "--judge", "lexical", "--on-fail", "drop_claim", "--db", db, "--json")
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert out["decision"] == "repaired" and out["on_fail"] == "drop_claim"
    assert [(o["action"], o["reasons"]) for o in out["outcomes"]] == [("serve", []), ("drop", ["NUMBER_MISMATCH"])]
    listed = _run("queue", "list", "--db", db, "--json")
    assert "NUMBER_MISMATCH" in listed.stdout  # the dropped claim is still queued
    table = _run(*args, "--surface", "legal", "--judge", "lexical", "--on-fail", "mark")
    assert table.exit_code == 1 and "repaired" in table.stdout and "claim 1 mark: NUMBER_MISMATCH" in table.stdout


def test_a_calibration_routes_by_score(tmp_path) -> None:
    from citelock.judges import LexicalJudge

    version = LexicalJudge().version
    # every lexical score passes at 0: the number-free claim that lexical overlap would fail now passes
    cal = _calibration(
        tmp_path, {"*": {"pass_at": 0.0, "fail_below": 0.0, "judge": "lexical", "judge_version": version}}
    )
    claim = {"claims": [{"text": "The buyer pays.", "citations": [{"chunk_id": "c-1"}]}]}
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", claim)]
    # low stakes: at high stakes the slot check also fails this claim as off-question (it does not say whether
    # revenue grew); this test is about the support calibration alone
    args += ["--stakes", "low"]
    plain = _run(*args, "--judge", "lexical", "--json")
    assert plain.exit_code == 1 and json.loads(plain.stdout)["routes"][0]["route"] == "fail"
    routed = _run(*args, "--judge", "lexical", "--calibration", cal, "--json")
    assert routed.exit_code == 0, routed.output
    assert json.loads(routed.stdout)["routes"][0]["route"] == "pass"


def test_escalation_from_the_command_line(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from citelock import Verdict
    from citelock.cli import _surface_options
    from citelock.judges import LexicalJudge

    asked: list[str] = []

    class Stronger:
        name, version = "llm", "judge.v1/test:strong"

        def judge(self, claim: str, passage: str) -> Verdict:
            asked.append(claim)
            return Verdict(label="yes", raw="yes", judge=self.name, version=self.version)

    real = _surface_options._make_judge

    def make(name, base_url, model):
        return Stronger() if name == "llm" and base_url == "http://strong.test/v1" else real(name, base_url, model)

    monkeypatch.setattr(_surface_options, "_make_judge", make)
    everything_in_review = {
        "pass_at": 2.0,
        "fail_below": -1.0,
        "judge": "lexical",
        "judge_version": LexicalJudge().version,
    }
    cal = _calibration(tmp_path, {"legal": everything_in_review})
    args = ["check", "--prompt", _write(tmp_path, "p.json", PROMPT), "--answer", _write(tmp_path, "a.json", GOOD)]
    queued = _run(*args, "--surface", "legal", "--judge", "lexical", "--calibration", cal, "--json")
    out = json.loads(queued.stdout)
    assert queued.exit_code == 1 and [f["reason"] for f in out["findings"]] == ["UNCERTAIN_SUPPORT"]
    assert out["accounting"]["reviews"] == 1 and out["accounting"]["escalations"] == 0
    flags = ["--surface", "legal", "--judge", "lexical", "--calibration", cal, "--json"]
    escalated = _run(*args, *flags, "--escalate-base-url", "http://strong.test/v1")
    out = json.loads(escalated.stdout)
    assert escalated.exit_code == 0, escalated.output
    assert out["decision"] == "pass" and out["accounting"]["escalations"] == 1 and asked == [GOOD["claims"][0]["text"]]
    alone = _run(*args, "--surface", "legal", "--escalate-base-url", "http://strong.test/v1")
    assert alone.exit_code == 2 and "give --calibration" in alone.stderr
