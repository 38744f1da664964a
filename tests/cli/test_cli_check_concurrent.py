"""`check --prompt RECORD --db` logs the record once, in one transaction, whoever else checks it at the same time.

Issue 34, item 11: the membership test and the append were two transactions; 4 processes started behind a barrier
on the same record gave ``InputError: request id ... already in the prompt log`` in 3 of 4. Now the same record
already logged is not an error (a different record under the same id still is).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock import serialize
from citelock.cli import app
from citelock.prompt import assemble
from citelock.store import PromptLog
from citelock.store._chain import KEY_ENV

runner = CliRunner()
WORKERS = 4


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


def _files(tmp_path: Path, body: str = "The Aurora Bridge opened to traffic in 1932.") -> tuple[Path, Path]:
    record = serialize(assemble("When did it open?", [{"id": "c-1", "text": body}]), request_id="shared-1")
    prompt = tmp_path / f"prompt-{len(body)}.json"
    prompt.write_text(record.model_dump_json(), encoding="utf-8")
    answer = tmp_path / "answer.json"
    claim = {"text": "It opened in 1932.", "citations": [{"chunk_id": "c-1", "span": "opened to traffic in 1932"}]}
    answer.write_text(json.dumps({"claims": [claim]}), encoding="utf-8")
    return prompt, answer


def _checker(target: str, prompt: str, answer: str, barrier: Any, out: Any) -> None:
    barrier.wait(timeout=60)
    result = CliRunner().invoke(app, ["check", "--prompt", prompt, "--answer", answer, "--db", target])
    out.put((result.exit_code, result.stderr.strip()[-300:]))
    out.close()
    out.join_thread()  # flushed before the child exits without running the parent's atexit handlers
    os._exit(0)


def test_processes_checking_one_record_at_once_all_pass_and_log_it_once(target: str, tmp_path: Path) -> None:
    prompt, answer = _files(tmp_path)
    PromptLog(target)  # the tables exist: the race under test is on the record, not on creating the schema
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [
        ctx.Process(target=_checker, args=(target, str(prompt), str(answer), barrier, out)) for _ in range(WORKERS)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == [(0, "")] * WORKERS
    log = PromptLog(target)
    assert len(log) == 1 and log.verify_chain().ok


def test_the_same_record_again_passes_and_a_different_one_under_its_id_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    prompt, answer = _files(tmp_path)
    for _ in range(2):
        result = runner.invoke(app, ["check", "--prompt", str(prompt), "--answer", str(answer), "--db", db])
        assert result.exit_code == 0, result.output
    other, _ = _files(tmp_path, body="The Aurora Bridge opened to traffic in 1932, after three years of work.")
    result = runner.invoke(app, ["check", "--prompt", str(other), "--answer", str(answer), "--db", db])
    assert result.exit_code == 2, result.output
    assert "already in the prompt log with a different record" in result.stderr
    assert len(PromptLog(db)) == 1
