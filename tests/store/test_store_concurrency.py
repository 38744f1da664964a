"""Eight processes opening a NEW database at the same moment: every store's tables are made once, nothing is lost.

Each trial makes a new database (a SQLite file, or a PostgreSQL database created for the trial), releases eight
forked writers at once through a barrier, and each writer opens every store (prompt log, review queue, result
store, verdict cache: each writer in a different order, so different stores race to be created first), logs
its prompt and guards an answer with findings under its own surface. Then the parent counts what was stored
against a reference run of one writer alone. Ten trials per dialect, plus one trial driving the real
``citelock check --db`` command in eight processes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from citelock.cli import app
from citelock.guard import SurfacePolicy
from citelock.store import CachedJudge, PromptLog, ResultStore, ReviewQueue, SqlVerdictCache, make_engine
from citelock.store._engine import to_url
from support.fakes import REVENUE_CHUNKS, KeywordJudge, make_record
from support.guarding import guard_and_store

pytestmark = pytest.mark.slow


PG_URL = os.environ.get("CITELOCK_TEST_POSTGRES_URL")
WRITERS = 8
TRIALS = 10

ANSWER = {
    "claims": [
        {"text": "Operating margins expanded.", "citations": [{"chunk_id": "c1"}]},  # WRONG_CHUNK (c2 supports)
        {"text": "Revenue grew 12%.", "citations": [{"chunk_id": "c-404"}]},  # ID_NOT_IN_PROMPT
        {"text": "Freight costs are billed to the buyer under clause 7."},  # UNCITED_CLAIM
    ]
}


def _open_stores(target: str, worker: int) -> dict[str, Any]:
    openers: list[tuple[str, Callable[[], Any]]] = [
        ("log", lambda: PromptLog(target)),
        ("queue", lambda: ReviewQueue(target)),
        ("results", lambda: ResultStore(target)),
        ("cache", lambda: SqlVerdictCache(target)),
    ]
    shift = worker % len(openers)
    return {name: make() for name, make in openers[shift:] + openers[:shift]}


def _write(target: str, worker: int) -> None:
    stores = _open_stores(target, worker)
    record = make_record("How did 2024 go?", REVENUE_CHUNKS, request_id=f"req-{worker}")
    stores["log"].append(record)
    guard_and_store(
        record,
        ANSWER,
        policy=SurfacePolicy(name=f"w{worker}", stakes="high"),
        judge=CachedJudge(KeywordJudge(), stores["cache"]),
        queue=stores["queue"],
        results=stores["results"],
    )


def _writer(target: str, worker: int, barrier: Any) -> None:
    try:
        barrier.wait(timeout=120)
        _write(target, worker)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def _run_writers(target: str, writers: int) -> list[int | None]:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(writers)
    procs = [ctx.Process(target=_writer, args=(target, w, barrier)) for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    return [p.exitcode for p in procs]


def _counts(target: str, writers: int) -> dict[str, Any]:
    report = PromptLog(target).verify_chain()
    queue = ReviewQueue(target)
    return {
        "log": report.records,
        "chain_ok": report.ok,
        "chain_head": report.head_seq,
        "queue_per_writer": sorted({len(queue.items(surface=f"w{w}")) for w in range(writers)}),
        "queue": len(queue),
        "results": len(ResultStore(target)),
        "verdicts": len(SqlVerdictCache(target)),
    }


@contextmanager
def _new_database(dialect: str, tmp_path: Path, name: str) -> Iterator[str]:
    """A database that does not exist yet (SQLite: a file path) or is empty (PostgreSQL: created here)."""
    if dialect == "sqlite":
        yield str(tmp_path / f"{name}.db")
        return
    assert PG_URL is not None
    database = f"citelock_{name}_{uuid.uuid4().hex[:8]}"
    admin = make_engine(PG_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {database}"))
    try:
        yield make_url(to_url(PG_URL)).set(database=database).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {database} WITH (FORCE)"))
        admin.engine.dispose()


DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _need(dialect: str) -> None:
    if dialect == "postgres" and not PG_URL:
        pytest.skip("CITELOCK_TEST_POSTGRES_URL is not set (scripts/start_postgres.sh starts a server)")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_eight_first_writers_on_a_new_database_lose_nothing(dialect: str, tmp_path: Path) -> None:
    _need(dialect)
    with _new_database(dialect, tmp_path, "ref") as reference:
        assert _run_writers(reference, 1) == [0]
        one = _counts(reference, 1)
    # WRONG_CHUNK, ID_NOT_IN_PROMPT, UNCITED_CLAIM, and OFF_QUESTION for review: at high stakes the slot check
    # routes this short question, and no claim says how 2024 went
    assert one["log"] == 1 and one["results"] == 1 and one["queue"] == 4 and one["verdicts"] >= 1
    per_writer = one["queue"]
    outcomes = []
    for trial in range(TRIALS):
        with _new_database(dialect, tmp_path, f"race{trial}") as target:
            codes = _run_writers(target, WRITERS)
            outcomes.append((codes, _counts(target, WRITERS)))
    expected = {
        "log": WRITERS,
        "chain_ok": True,
        "chain_head": WRITERS,
        "queue_per_writer": [per_writer],
        "queue": WRITERS * per_writer,
        "results": WRITERS,
        "verdicts": one["verdicts"],  # every writer judged the same pairs: one cached verdict per pair
    }
    assert outcomes == [([0] * WRITERS, expected)] * TRIALS


# --- the real command line ------------------------------------------------------------------------------------

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
CLI_ANSWER = {
    "claims": [
        {"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1", "span": "Revenue grew 12%"}]},
        {"text": "Freight is paid by the buyer.", "citations": [{"chunk_id": "c-1"}]},
        {"text": "Revenue grew 12%.", "citations": [{"chunk_id": "c-77"}]},
    ]
}

# Every process imports the command line first, then waits for the start file, so all eight reach the database
# at the same moment; then it runs the `citelock` entry point itself with the given arguments.
_STARTER = """
import os, sys, time
from citelock.cli import main
start = sys.argv[1]
while not os.path.exists(start):
    time.sleep(0.001)
sys.argv = ["citelock", *sys.argv[2:]]
main()
"""


def _check_args(tmp_path: Path, db: str, n: int) -> list[str]:
    prompt = tmp_path / f"p{n}.json"
    prompt.write_text(json.dumps({**PROMPT, "request_id": f"req-{n}"}), encoding="utf-8")
    answer = tmp_path / "a.json"
    answer.write_text(json.dumps(CLI_ANSWER), encoding="utf-8")
    options = ["--judge", "lexical", "--surface", f"s{n}", "--db", db, "--json"]
    return ["check", "--prompt", str(prompt), "--answer", str(answer), *options]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_eight_check_commands_on_a_new_database_lose_nothing(dialect: str, tmp_path: Path) -> None:
    _need(dialect)
    with _new_database(dialect, tmp_path, "cliref") as reference:
        ref = CliRunner().invoke(app, _check_args(tmp_path, reference, 0))
        assert ref.exit_code == 1, ref.output  # findings
        findings = len(json.loads(ref.stdout)["findings"])
        assert findings >= 2 and len(ReviewQueue(reference)) == findings
    start = tmp_path / "start"
    with _new_database(dialect, tmp_path, "cli") as target:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _STARTER, str(start), *_check_args(tmp_path, target, n)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(WRITERS)
        ]
        start.touch()
        runs = [(*p.communicate(timeout=300), p.returncode) for p in procs]
        for out, err, code in runs:
            assert code == 1 and "Traceback" not in err, err
            assert len(json.loads(out)["findings"]) == findings
        report = PromptLog(target).verify_chain()
        assert (report.records, report.ok, report.head_seq) == (WRITERS, True, WRITERS)
        queue = ReviewQueue(target)
        assert [len(queue.items(surface=f"s{n}")) for n in range(WRITERS)] == [findings] * WRITERS
        assert len(ResultStore(target)) == WRITERS
