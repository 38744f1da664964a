"""Test helpers for the review desk: a database seeded through the real pipeline pieces, and a live server.

The seeded database is what a deployment holds: prompts assembled and serialized by citelock and appended to
the prompt log, answers guarded by the shipped lexical judge on high-stakes surfaces, results in the result
store and every finding in the review queue. Nothing is hand-made except the answers (a model's stand-in).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import select

from citelock import Chunk, PromptRecord, assemble, record_from_messages, serialize
from citelock.guard import Guard, SurfacePolicy
from citelock.judges import make_judge
from citelock.records import ReasonCode
from citelock.review import ReviewDesk, create_account
from citelock.store import AccountStore
from citelock.store._accounts import _sessions

__all__ = [
    "BASE",
    "PASSWORDS",
    "Clock",
    "Seeded",
    "copy_seeded",
    "digest",
    "live_server",
    "log_and_guard",
    "seed_desk",
    "sign_in",
    "stored",
]

PASSWORDS = {"alice": "alice-password-1", "bob": "bob-password-22", "root": "root-password-333"}
ROLES = {"alice": "reviewer", "bob": "reviewer", "root": "admin"}

FINANCE = [
    Chunk(id="c1", text="Revenue grew 12% in 2024, driven by subscriptions in Europe.", rank=1, strategy="sentence"),
    Chunk(
        id="c2", text="Operating margins expanded to 30% in 2024 as freight costs fell.", rank=2, strategy="paragraph"
    ),
    Chunk(
        id="c3",
        text="Freight costs are billed to the buyer under clause 7 of the master agreement.",
        rank=3,
        strategy="paragraph",
    ),
]

WARRANTY = Chunk(
    id="d1",
    text="The warranty covers parts for two years. Labour is covered for the first year only. After that, repairs "
    "are billed at the standard hourly rate of the service centre.",
    rank=1,
    strategy="paragraph",
)
WARRANTY_PROMPT = [
    {"role": "system", "content": "Answer from the sources."},
    {
        "role": "user",
        "content": "Sources:\n[d1] The warranty covers parts for two years. Labour is covered for the first year "
        "only.\n\nQuestion: what does the warranty cover?",
    },
]


@dataclass
class Seeded:
    """The seeded database and the ids of the entries tests look at."""

    db: str
    desk: ReviewDesk
    ids: dict[ReasonCode, str] = field(default_factory=dict)
    records: dict[str, PromptRecord] = field(default_factory=dict)


def log_and_guard(desk: ReviewDesk, record: PromptRecord, answer: Mapping[str, Any], *, surface: str) -> list[str]:
    """Log the prompt, guard the answer, store the result and queue the findings (what the pipeline does)."""
    desk.log.append(record)
    result = Guard(SurfacePolicy(name=surface, stakes="high"), make_judge("lexical")).run(record, answer)
    desk.results.append(result)
    entries = desk.queue.enqueue_result(result)
    return [e.id for e in entries]


def seed_desk(db: str, *, accounts: bool = True) -> Seeded:
    """A desk database with one entry of each kind the pages must show, on two surfaces and two ISO weeks."""
    desk = ReviewDesk(db)
    seeded = Seeded(db=db, desk=desk)
    if accounts:
        for name, password in PASSWORDS.items():
            create_account(desk.accounts, name, password, role=ROLES[name])  # type: ignore[arg-type]
    last_week = datetime.now(UTC) - timedelta(days=7)
    finance = serialize(assemble("How did the company do in 2024?", FINANCE), request_id="req-finance")
    finance = finance.model_copy(update={"created_at": last_week})
    answer = {
        "claims": [
            {"text": "Operating margins expanded as freight costs fell.", "citations": [{"chunk_id": "c1"}]},
            {"text": "Revenue grew in 2024 thanks to subscriptions in Asia.", "citations": [{"chunk_id": "c1"}]},
            {"text": "The seller pays for freight.", "citations": [{"chunk_id": "c3", "span": "billed to the buyer"}]},
            {"text": "Revenue grew 15% in 2024.", "citations": [{"chunk_id": "c1"}]},
            # uncited, and without a number (an uncited number in no chunk is a NUMBER_MISMATCH entry too)
            {"text": "The company has employees in Berlin.", "citations": []},
            {"text": "Margins expanded to 30%.", "citations": [{"chunk_id": "c1", "span": "expanded to 30%"}]},
        ]
    }
    log_and_guard(desk, finance, answer, surface="finance")
    warranty = record_from_messages(
        WARRANTY_PROMPT, [WARRANTY], question="what does the warranty cover?", request_id="req-warranty"
    )
    claims = {
        "claims": [
            {
                "text": "Repairs are billed at the standard hourly rate.",
                "citations": [{"chunk_id": "d1", "span": "billed at the standard hourly rate"}],
            }
        ]
    }
    log_and_guard(desk, warranty, claims, surface="support")
    # Answers that pass, over three ISO weeks: the metrics have something to divide.
    clean = [
        ({"text": "Revenue grew 12% in 2024.", "citations": [{"chunk_id": "c1", "span": "Revenue grew 12% in 2024"}]}),
        ({"text": "Operating margins expanded to 30% in 2024.", "citations": [{"chunk_id": "c2"}]}),
    ]
    for n, days in enumerate((14, 7, 0)):
        record = serialize(assemble("How did the company do in 2024?", FINANCE), request_id=f"req-clean-{n}")
        record = record.model_copy(update={"created_at": datetime.now(UTC) - timedelta(days=days)})
        log_and_guard(desk, record, {"claims": clean}, surface="finance" if n % 2 == 0 else "support")
    seeded.records = {finance.request_id: finance, warranty.request_id: warranty}
    for entry in desk.queue:
        seeded.ids.setdefault(entry.reason, entry.id)
    return seeded


def copy_seeded(template: Seeded, db: str) -> Seeded:
    """A fresh copy of a seeded SQLite database (seeding hashes three passwords: copying is faster)."""
    with template.desk.engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(template.db, db)
    return Seeded(db=db, desk=ReviewDesk(db), ids=dict(template.ids), records=dict(template.records))


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port in a thread; yields its base URL."""
    import uvicorn

    sock = _free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the review desk did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


BASE = "http://desk.test"


def sign_in(client: TestClient, name: str, password: str | None = None, *, next_path: str = "/") -> httpx.Response:
    """Sign in through the login form (its one-use token included); returns the form post's response."""
    page = client.get("/login")
    token = re.search(r'name="login_token" value="([^"]+)"', page.text)
    assert token is not None
    return client.post(
        "/login",
        data={
            "username": name,
            "password": password or PASSWORDS[name],
            "login_token": token.group(1),
            "next": next_path,
        },
        follow_redirects=False,
    )


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def digest(token: str) -> str:
    """The SHA-256 a session or token is stored under (computed here, not by the store, so the test checks it)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def stored(accounts: AccountStore) -> set[str]:
    """The digests of every stored session and token."""
    with accounts.engine.connect() as conn:
        return {str(d) for d in conn.execute(select(_sessions.c.token_sha256)).scalars()}
