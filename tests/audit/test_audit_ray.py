"""The Ray engine of ``citelock audit`` on a real Ray cluster: a head node on 127.0.0.1 with two CPUs, started here.

The cluster is a real ``ray start --head`` process (session-scoped: started once, stopped at the end); every audit
connects to it by address, as it would to a remote cluster. Each test checks the Ray engine against the local
engine on the same input: identical report rows (byte for byte, once sorted by key), identical summary figures,
the same queue entries and results, and resumption through the sink.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock.audit import AuditSettings, AuditSink, read_report, run_audit
from citelock.cli import app
from citelock.errors import BackendConnectionError, UsageError
from citelock.store import ResultStore, ReviewQueue
from support.audit_rows import JudgeServer, bad_lines, make_row, make_rows, write_jsonl

pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
# A loopback-only cluster without token authentication: Ray maps 127.0.0.1 to the machine's address unless told
# this is a single-machine cluster (the variable's name is historical), and the driver must agree on both.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _pythonpath() -> str:
    """This checkout's sources first, for the Ray workers and the CLI subprocess."""
    return os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A Ray head node on 127.0.0.1 with two CPUs (``ray start --head --block``), stopped after the session."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="clray-")  # short: Ray's socket paths live under it
    env = {
        **os.environ,
        **RAY_ENV,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block"]
    command += ["--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "2"]
    command += ["--object-store-memory", str(300 * 1024 * 1024), "--include-dashboard", "false"]
    command += ["--dashboard-port", str(_free_port())]
    command += ["--dashboard-agent-listen-port", str(_free_port()), "--disable-usage-stats", "--temp-dir", temp]
    head = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    started = threading.Event()
    output: list[str] = []

    def watch() -> None:
        assert head.stdout is not None
        for line in head.stdout:  # keep draining, so the head never blocks on a full pipe
            output.append(line)
            if "Ray runtime started" in line:
                started.set()

    threading.Thread(target=watch, daemon=True).start()
    patch = pytest.MonkeyPatch()
    for name, value in RAY_ENV.items():  # for the CLI subprocesses
        patch.setenv(name, value)
    # ... and this process, which imported Ray already (Ray reads the variable once, at import)
    patch.setattr("ray._private.ray_constants.ENABLE_RAY_CLUSTER", False)
    try:
        deadline = time.monotonic() + 120
        while not started.wait(0.2):
            assert head.poll() is None, "ray start --head exited:\n" + "".join(output[-30:])
            assert time.monotonic() < deadline, "ray start --head did not start in 120 s:\n" + "".join(output[-30:])
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)  # --block: the head stops every process it started, gracefully
        try:
            head.wait(timeout=10)
        except subprocess.TimeoutExpired:  # not quickly enough: end its whole process group (its own session)
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        patch.undo()
        shutil.rmtree(temp, ignore_errors=True)


def _sorted_bytes(out: Path) -> list[str]:
    """The report's rows as JSON text, sorted by key (the engines commit in different orders)."""
    return [json.dumps(row, ensure_ascii=False) for row in sorted(read_report(out), key=lambda row: row["key"])]


def _stored(db: Path) -> tuple[list[str], int]:
    """The queue's entry ids (stable hashes of what each is about) and the number of stored results."""
    return sorted(entry.id for entry, _ in ReviewQueue(str(db)).items()), len(ResultStore(str(db)))


def _cited_in_the_lost_part(i: int) -> dict[str, Any]:
    """Row ``i`` of the mix with a chunk cut short in the prompt (``i % 8 == 4``), cited in the part that was cut."""
    row = make_row(i)
    cut = row["chunks"][-1]
    span = cut["text"][80:140]
    claim = row["answer"]["claims"][0]["text"]  # the row's own on-question claim: only the span is in the lost part
    row["answer"] = {"claims": [{"text": claim, "citations": [{"chunk_id": cut["id"], "span": span}]}]}
    return row


def _ray_audit(path: str, out: Path, db: Path | None, settings: AuditSettings, address: str, **kw: Any) -> Any:
    return run_audit(
        [path], out=out, db=str(db) if db else None, settings=settings, engine="ray", address=address, **kw
    )


@pytest.mark.parametrize(
    "settings",
    [
        AuditSettings(),
        AuditSettings(surface="support", judge="offline"),
        AuditSettings(surface="support", judge="lexical", stakes="low", sample_rate=0.5, on_fail="drop_claim"),
    ],
    ids=["free-checks", "offline-judge", "lexical-judge-low-stakes"],
)
def test_ray_and_local_engines_write_identical_rows(tmp_path: Path, ray_address: str, settings: AuditSettings) -> None:
    # The mix: clean answers, a fabricated id, a number mismatch, an uncited claim, a chunk cut short in the prompt
    # (truncated) cited inside what survived, free text, an answer that cannot be parsed; then lines that are not
    # rows at all (broken JSON, an array, a row without chunks).
    rows = make_rows(40)
    rows += [_cited_in_the_lost_part(i) for i in (4, 12)]
    path = str(write_jsonl(tmp_path / "rows.jsonl", rows, bad_lines()))
    local = run_audit([path], out=tmp_path / "local", db=str(tmp_path / "local.db"), settings=settings, processes=1)
    ray = _ray_audit(path, tmp_path / "ray", tmp_path / "ray.db", settings, ray_address, batch_size=3, commit_rows=10)
    lines = _sorted_bytes(tmp_path / "ray")
    assert lines == _sorted_bytes(tmp_path / "local")  # byte for byte
    assert len(lines) == 45 and ray.run_rows == 45 and ray.complete
    assert ray.figures == local.figures
    assert ray.parts >= 4  # committed as it came back, in parts of at least 10 rows
    report = read_report(tmp_path / "ray")
    reasons = {finding["reason"] for row in report for finding in row["findings"]}
    assert {"ID_NOT_IN_PROMPT", "NUMBER_MISMATCH", "UNCITED_CLAIM", "SPAN_TRUNCATED"} <= reasons
    by_row = {row["row"]: row for row in report}
    for survived in (by_row[5], by_row[13]):  # truncated chunks, cited inside what survived: the span passes
        # (their fixture answers a question about another figure of the same table: the slot check's near miss,
        # OFF_QUESTION at high stakes, an answer-level finding and not the span's)
        assert not survived["error"] and set(survived["counts"]) <= {"OFF_QUESTION"}
    for lost in (by_row[41], by_row[42]):  # ... and in what was lost: the span is diagnosed, nothing else of it
        # a claim about another topic's figure may also be OFF_QUESTION (an answer-level finding, not the span's)
        assert lost["counts"].get("SPAN_TRUNCATED") == 1 and set(lost["counts"]) <= {"SPAN_TRUNCATED", "OFF_QUESTION"}
    errors = sorted(number for number, row in by_row.items() if row["error"])
    assert errors == [8, 16, 24, 32, 40, 43, 44, 45]  # unparseable answers, then broken JSON, an array, no chunks
    if settings.runs_policy:
        entries, results = _stored(tmp_path / "ray.db")
        assert (entries, results) == _stored(tmp_path / "local.db")
        assert entries and results == 37  # every answer that could be audited, once
        assert any(row["routes"] for row in report)  # the support judge ran
    else:
        assert not (tmp_path / "ray.db").exists()  # the free checks store nothing


def test_ray_engine_resumes_without_redoing_committed_answers(tmp_path: Path, ray_address: str) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(30)))
    settings = AuditSettings(surface="support", judge="lexical")
    clean = run_audit([path], out=tmp_path / "clean", db=str(tmp_path / "clean.db"), settings=settings, processes=1)

    done: list[int] = []

    def stop_after_12(count: int) -> None:
        done.append(count)
        if sum(done) >= 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # a first run, stopped after 12 answers (committed in parts of 4)
        run_audit(
            [path], out=tmp_path / "out", db=str(tmp_path / "out.db"), settings=settings, processes=1,
            batch_size=4, commit_rows=4, on_progress=stop_after_12,
        )  # fmt: skip
    committed = [row["key"] for row in read_report(tmp_path / "out")]
    assert len(committed) == 12

    progress: list[int] = []
    resumed = _ray_audit(
        path, tmp_path / "out", tmp_path / "out.db", settings, ray_address, on_progress=progress.append
    )
    assert sum(progress) == 18 and resumed.run_rows == 18  # only the 18 answers not committed went to Ray
    assert resumed.resumed and resumed.complete and resumed.figures == clean.figures
    assert _sorted_bytes(tmp_path / "out") == _sorted_bytes(tmp_path / "clean")
    assert _stored(tmp_path / "out.db") == _stored(tmp_path / "clean.db")

    again = _ray_audit(path, tmp_path / "out", tmp_path / "out.db", settings, ray_address)
    assert again.run_rows == 0 and again.figures == clean.figures  # nothing left: nothing redone, nothing added
    assert _stored(tmp_path / "out.db") == _stored(tmp_path / "clean.db")


def test_a_killed_ray_audit_resumes_exactly_once(tmp_path: Path, ray_address: str) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", make_rows(200), bad_lines())
    args = ["audit", str(path), "--surface", "support", "--judge", "offline", "--quiet", "--batch-size", "2"]
    args += ["--commit-every", "4", "--db", "audit.db", "--out", "out"]
    run_audit(
        [str(path)], out=tmp_path / "clean", db=str(tmp_path / "clean.db"), processes=1,
        settings=AuditSettings(surface="support", judge="offline"),
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    command = [sys.executable, "-m", "citelock", *args, "--engine", "ray", "--address", ray_address]
    run = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (tmp_path / "out" / "part-000002.jsonl").exists():
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no part was committed in time"
        time.sleep(0.01)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL
    stopped_at = [row["key"] for row in read_report(tmp_path / "out")]
    assert 0 < len(stopped_at) < 203 and len(set(stopped_at)) == len(stopped_at)

    rerun = subprocess.run([*command, "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 2, rerun.stderr  # bad rows: exit 2
    summary = json.loads(rerun.stdout)
    assert summary["complete"] and summary["run"]["resumed"] and summary["run"]["rows"] == 203 - len(stopped_at)
    assert _sorted_bytes(tmp_path / "out") == _sorted_bytes(tmp_path / "clean")  # every answer exactly once
    assert _stored(tmp_path / "audit.db") == _stored(tmp_path / "clean.db")  # queue entries unchanged in number


# -- a judge behind an OpenAI-compatible server ------------------------------------------------------------------


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    server = JudgeServer()
    yield server
    server.close()


def test_a_judge_server_gets_concurrent_calls_and_the_rows_match_local(
    tmp_path: Path, ray_address: str, judge_server: JudgeServer
) -> None:
    settings = AuditSettings(surface="support", judge="llm", judge_base_url=judge_server.url)
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(24)))
    local = run_audit([path], out=tmp_path / "local", settings=settings, processes=1)
    calls = judge_server.calls
    assert calls > 0 and judge_server.most_in_flight == 1  # one process: one call at a time
    judge_server.most_in_flight = 0
    ray = _ray_audit(path, tmp_path / "ray", None, settings, ray_address, batch_size=6)
    assert judge_server.calls == 2 * calls  # every judged citation once more, from the Ray workers
    assert judge_server.most_in_flight > 1  # the judge actor kept several calls in flight
    assert _sorted_bytes(tmp_path / "ray") == _sorted_bytes(tmp_path / "local")
    assert ray.figures == local.figures
    labels = {route["route"] for row in read_report(tmp_path / "ray") for route in row["routes"]}
    assert len(labels) > 1  # the server's verdicts differ by citation, and they arrived where they belong


def test_a_judge_server_that_goes_away_stops_the_ray_audit(
    tmp_path: Path, ray_address: str, judge_server: JudgeServer
) -> None:
    settings = AuditSettings(surface="support", judge="llm", judge_base_url=judge_server.url)
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(8)))
    judge_server.down = True  # it still lists its model, but answers no judge call
    with pytest.raises(BackendConnectionError):
        _ray_audit(path, tmp_path / "out", None, settings, ray_address)
    assert read_report(tmp_path / "out") == []  # nothing judged by nobody was committed


def test_ray_engine_options_and_connection_errors(tmp_path: Path, ray_address: str) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(2)))
    with pytest.raises(UsageError, match="processes= sizes the local engine"):
        run_audit([path], out=tmp_path / "a", engine="ray", processes=2)
    with pytest.raises(BackendConnectionError, match=r"could not connect to the Ray cluster at 127\.0\.0\.1:1"):
        _ray_audit(path, tmp_path / "b", None, AuditSettings(), "127.0.0.1:1")
    from citelock.audit._ray import run_ray

    with AuditSink(tmp_path / "c", manifest={}) as sink, pytest.raises(UsageError, match="batch_size must be"):
        run_ray(iter(()), AuditSettings(), sink, address=ray_address, batch_size=0)


def test_the_cli_runs_the_ray_engine(tmp_path: Path, ray_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(8)))
    result = CliRunner().invoke(
        app, ["audit", path, "--out", str(tmp_path / "out"), "--engine", "ray", "--address", ray_address, "--json"]
    )
    assert result.exit_code == 2, result.output  # row 8 cannot be parsed: a bad row
    summary = json.loads(result.stdout)
    assert summary["engine"] == {"engine": "ray"} and summary["answers"] == 7 and summary["bad_rows"] == 1
    # Without --address, Ray's own rules: here RAY_ADDRESS names the cluster.
    monkeypatch.setenv("RAY_ADDRESS", ray_address)
    again = CliRunner().invoke(app, ["audit", path, "--out", str(tmp_path / "again"), "--engine", "ray", "--json"])
    assert again.exit_code == 2, again.output
    assert read_report(tmp_path / "again") == read_report(tmp_path / "out")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # nothing there: exit 4, at once
    gone = CliRunner().invoke(app, ["audit", path, "--out", str(tmp_path / "gone"), "--engine", "ray"])
    assert gone.exit_code == 4 and "could not connect to the Ray cluster at 127.0.0.1:1" in gone.stderr


# -- input order, edited inputs, workers that cannot build the guard ---------------------------------------------


def _parts_in_order(out: Path, order: list[str]) -> list[list[tuple[int, int]]]:
    """(input number, row) of each part's rows as written, with ``order`` the input file names as given."""
    parts = []
    for path in sorted(out.glob("part-*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        parts.append([(order.index(Path(row["source"]).name), row["row"]) for row in rows])
    return parts


def test_ray_rows_come_out_in_input_order_and_an_edited_input_reruns_like_local(
    tmp_path: Path, ray_address: str
) -> None:
    settings = AuditSettings(surface="support", judge="lexical")
    first = tmp_path / "z-first.jsonl"  # named last, given first
    second = str(write_jsonl(tmp_path / "a-second.jsonl", make_rows(10, start=30)))
    rows = make_rows(14)
    write_jsonl(first, rows, bad_lines())
    inputs = [str(first), second]

    def both() -> tuple[Any, Any]:
        local = run_audit(
            inputs, out=tmp_path / "local", db=str(tmp_path / "local.db"), settings=settings, processes=1,
            batch_size=3, commit_rows=5,
        )  # fmt: skip
        ray = run_audit(
            inputs, out=tmp_path / "ray", db=str(tmp_path / "ray.db"), settings=settings, engine="ray",
            address=ray_address, batch_size=3, commit_rows=5,
        )  # fmt: skip
        assert read_report(tmp_path / "ray") == read_report(tmp_path / "local")  # the same rows, in input order
        assert _sorted_bytes(tmp_path / "ray") == _sorted_bytes(tmp_path / "local")
        assert ray.figures == local.figures and ray.superseded == local.superseded
        assert _stored(tmp_path / "ray.db") == _stored(tmp_path / "local.db")
        for part in _parts_in_order(tmp_path / "ray", [first.name, Path(second).name]):
            assert part == sorted(part)  # each part in input order, whatever order Ray returned its rows in
        return local, ray

    _, ray = both()
    report = read_report(tmp_path / "ray")
    assert [Path(r["source"]).name for r in report] == [first.name] * 17 + [Path(second).name] * 10
    assert ray.figures.bad_rows == 6  # row 8 and 3 bad lines in the first input, rows 2 and 10 in the second

    edited = [*rows]
    edited[3] = {**rows[3], "answer": rows[0]["answer"]}  # one answer changed
    write_jsonl(first, edited[:12])  # ... and the last two rows and the three bad lines deleted
    _, ray = both()
    assert ray.superseded == 6 and ray.run_rows == 1  # the changed row audited again; 5 rows retired
    assert ray.figures.bad_rows == 3 and ray.figures.answers + ray.figures.bad_rows == 22
    assert len(read_report(tmp_path / "ray")) == 22


def test_a_ray_worker_that_cannot_build_the_guard_stops_the_audit(tmp_path: Path, ray_address: str) -> None:
    from citelock.cli._app import EXIT_INPUT, classify
    from citelock.errors import InputError
    from citelock.judges import make_judge
    from citelock.judges._routing import Routing, save_calibration

    lexical = make_judge("lexical")
    calibration = tmp_path / "calibration.json"
    routing = {"pass_at": 0.8, "fail_below": 0.2, "judge": lexical.name, "judge_version": lexical.version}
    save_calibration(calibration, {"*": Routing.model_validate(routing)})
    settings = AuditSettings(surface="support", judge="lexical", calibration=str(calibration))
    guard = settings.build_guard()  # built here, as `citelock audit` does to check its options ...
    calibration.unlink()  # ... and the file is not where the workers look (another node, a relative path)
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(6)))
    with pytest.raises(InputError) as raised:
        _ray_audit(path, tmp_path / "out", tmp_path / "out.db", settings, ray_address, guard=guard)
    message = str(raised.value)
    assert message.startswith("a Ray worker on ") and "could not build the guard" in message
    assert f"calibration file {calibration}: cannot read it" in message
    assert classify(raised.value)[0] == EXIT_INPUT  # the CLI's exit code: unusable options, 2
    assert read_report(tmp_path / "out") == [] and _stored(tmp_path / "out.db") == ([], 0)  # nothing committed
    assert json.loads((tmp_path / "out" / "_summary.json").read_text())["complete"] is False
    # without the guard built here, the driver builds one first: the same missing file stops it before Ray
    with pytest.raises(InputError, match=r"calibration file .*: cannot read it") as driver:
        _ray_audit(path, tmp_path / "out", tmp_path / "out.db", settings, ray_address)
    assert "Ray worker" not in str(driver.value)


def test_a_ray_worker_that_cannot_reach_the_judge_server_stops_the_audit(
    tmp_path: Path, ray_address: str, judge_server: JudgeServer
) -> None:
    from citelock.cli._app import EXIT_UNREACHABLE, classify

    settings = AuditSettings(surface="support", judge="llm", judge_base_url=judge_server.url)
    guard = settings.build_guard()  # the server answers the driver ...
    judge_server.close()  # ... and is gone when the judge actors build their guards
    path = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(6)))
    with pytest.raises(BackendConnectionError) as raised:
        _ray_audit(path, tmp_path / "out", None, settings, ray_address, guard=guard)
    assert "a Ray worker on " in str(raised.value) and "could not build the guard" in str(raised.value)
    assert classify(raised.value)[0] == EXIT_UNREACHABLE  # exit 4
    assert read_report(tmp_path / "out") == []
