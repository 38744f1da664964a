"""Two gateway workers on one PostgreSQL database, 500 requests at 32 concurrent (``@pytest.mark.postgres``).

``citelock gateway --workers 2`` (a real process, two uvicorn workers) in front of the fake upstream; a fifth of
the answers cite an id that was never in the prompt. Afterwards the store holds exactly what was sent: one
prompt-log record and one result per request, one queue entry per failing finding, nothing lost or doubled,
and ``citelock log verify`` walks an intact hash chain (appends from both workers are serialized by an advisory
lock).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from citelock.store import PromptLog, ResultStore, ReviewQueue, make_engine
from support.fake_upstream import CHUNKS, fake_upstream
from support.gateway_server import gateway_process

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PG_URL = os.environ.get("CITELOCK_TEST_POSTGRES_URL")
REQUESTS = 500
CONCURRENCY = 32


@pytest.fixture
def pg_schema() -> Iterator[str]:
    if not PG_URL:
        pytest.skip("CITELOCK_TEST_POSTGRES_URL is not set (scripts/start_postgres.sh starts a server)")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


async def _send_all(url: str) -> list[httpx.Response]:
    gate = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one(n: int) -> httpx.Response:
            body = {
                "model": "fabricate" if n % 5 == 0 else "good",
                "messages": [{"role": "user", "content": f"When does the ferry leave Arden? (request {n})"}],
                "citelock": {"chunks": CHUNKS},
            }
            async with gate:
                return await client.post("/v1/chat/completions", json=body)

        return await asyncio.gather(*(one(n) for n in range(REQUESTS)))


def test_two_workers_on_postgresql_keep_one_complete_record(pg_schema: str) -> None:
    with fake_upstream() as upstream:
        args = ["--workers", "2", "--db", pg_schema, "--upstream", upstream.url, "--server", "llama.cpp"]
        with gateway_process(*args, "--surface", "support", "--stakes", "low", "--on-fail", "block") as url:
            responses = asyncio.run(_send_all(url))
        assert len(upstream.seen) == REQUESTS
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: REQUESTS - REQUESTS // 5, 400: REQUESTS // 5}, statuses
    records: list[dict[str, Any]] = [r.json()["citelock"] for r in responses]
    sent = {rec["request_id"] for rec in records}
    assert len(sent) == REQUESTS
    log = PromptLog(pg_schema)
    assert len(log) == REQUESTS
    with log.engine.connect() as conn:
        logged = {row[0] for row in conn.execute(text("SELECT request_id FROM citelock_prompt_log"))}
    assert logged == sent
    results = ResultStore(pg_schema)
    assert len(results) == REQUESTS
    assert {r.report.request_id for r in results.latest(surface="support")} == sent
    failing = Counter(rec["request_id"] for rec in records for _ in rec["result"]["report"]["findings"])
    queued = Counter(entry.request_id for entry, _ in ReviewQueue(pg_schema).items())
    assert queued == failing and sum(queued.values()) > 0
    verify = subprocess.run(
        [sys.executable, "-m", "citelock", "log", "verify", "--db", pg_schema],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"{REQUESTS} records" in verify.stdout and "intact" in verify.stdout
