"""The review desk on a large queue: p50 / p99 of the queue page and the entry page, and where the time goes.

Builds a queue of ``--entries`` entries (default 100,000) the way the pipeline does: ``--prompts`` prompts are
assembled, serialized and appended to the hash-chained prompt log, each answer is guarded by the lexical judge
on a high-stakes surface, and its findings are queued on ``--surfaces`` surfaces over 26 ISO weeks (the same
finding on another surface is another entry). A fifth of the entries get an outcome by one of four reviewers
(bulk-inserted as events, to keep the set-up short). Then every page is requested through the ASGI app
in-process (routing, the session check, the queries, the template, the security headers; no network) by a
signed-in reviewer, and the parts are timed alone to show where the time goes.

SQLite always; PostgreSQL too when ``$CITELOCK_TEST_POSTGRES_URL`` is set (a fresh schema, dropped after).

    python benchmarks/bench_review.py [--entries 100000] [--requests 200]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from rich.console import Console
from rich.table import Table
from sqlalchemy import insert, text

from citelock import Chunk, assemble, serialize
from citelock.guard import Guard, SurfacePolicy
from citelock.judges import make_judge
from citelock.metrics import metrics_from_store
from citelock.review import ReviewDesk, create_account, create_app
from citelock.review._views import entry_view
from citelock.store import QueueEntry, QueueFilter, make_engine
from citelock.store._queue import _events  # bulk-loading the outcome events of the set-up only

WORDS = (
    "revenue margin freight buyer seller clause warranty labour repair subscription europe asia growth cost "
    "agreement invoice quarter dividend supplier contract liability refund shipment customs tariff"
).split()
REVIEWERS = ("alice", "bob", "carol", "dan")
PASSWORD = "bench-password-1"


def _chunks(rng: random.Random, n: int) -> list[Chunk]:
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 60)))
        out.append(Chunk(id=f"c{i}", text=f"In {2020 + i} the {words} rose {rng.randint(2, 40)}%.", rank=i + 1))
    return out


def _answer(rng: random.Random, chunks: list[Chunk]) -> dict[str, Any]:
    claims = []
    for k in range(7):
        cited = rng.choice(chunks)
        words = cited.text.split()
        if k == 0:
            claims.append({"text": "The company employs 4,000 people in Berlin.", "citations": []})
        elif k % 2:
            start = rng.randint(0, len(words) - 6)
            span = " ".join(words[start : start + 5])
            claims.append(
                {
                    "text": f"The {rng.choice(WORDS)} changed: {span}.",
                    "citations": [{"chunk_id": cited.id, "span": span}],
                }
            )
        else:
            claims.append(
                {"text": f"The {rng.choice(WORDS)} {rng.choice(WORDS)} fell.", "citations": [{"chunk_id": cited.id}]}
            )
    return {"claims": claims}


def build(target: str, *, entries: int, prompts: int, surfaces: int, seed: int, console: Console) -> ReviewDesk:
    rng = random.Random(seed)
    desk = ReviewDesk(target)
    for name in REVIEWERS:
        create_account(desk.accounts, name, PASSWORD)
    judge = make_judge("lexical")
    names = [f"surface-{i:02d}" for i in range(surfaces)]
    start = datetime.now(UTC) - timedelta(weeks=26)
    started = time.perf_counter()
    queued = 0
    batch: list[QueueEntry] = []
    for p in range(prompts):
        if queued >= entries:
            break
        record = serialize(assemble("What happened this year?", _chunks(rng, 6)), request_id=f"bench-{p}")
        moment = start + timedelta(minutes=int(26 * 7 * 24 * 60 * p / prompts))
        record = record.model_copy(update={"created_at": moment})
        desk.log.append(record)
        answer = _answer(rng, [pc.chunk for pc in record.chunks])
        result = Guard(SurfacePolicy(name=names[0], stakes="high"), judge).run(record, answer)
        desk.results.append(result)
        for surface in names:
            for finding in result.report.findings:
                if queued >= entries:
                    break
                batch.append(QueueEntry.from_finding(finding, surface=surface, created_at=moment, week=result.week))
                queued += 1
        if len(batch) >= 5000:
            desk.queue.add(batch)
            batch = []
    desk.queue.add(batch)
    loaded = time.perf_counter() - started
    everything = _all_ids(desk)
    resolved = rng.sample(everything, len(everything) // 5)
    outcomes = ("accept", "repair", "escalate")
    rows = []
    for i, entry_id in enumerate(resolved):
        outcome = outcomes[i % 3]
        rows.append(
            {
                "entry_id": entry_id,
                "revision": 0,
                "outcome": outcome,
                "category": "ranking" if outcome == "escalate" else None,
                "note": "bench" if outcome == "repair" else None,
                "chunk_id": None,
                "reviewer": REVIEWERS[i % len(REVIEWERS)],
                "resolved_at": datetime.now(UTC),
            }
        )
    with desk.engine.begin() as conn:
        for at in range(0, len(rows), 5000):
            conn.execute(insert(_events), rows[at : at + 5000])
    console.print(
        f"  loaded {len(desk.queue):,} entries from {min(p + 1, prompts):,} logged prompts in {loaded:.0f} s; "
        f"{len(resolved):,} outcomes"
    )
    return desk


def _all_ids(desk: ReviewDesk) -> list[str]:
    with desk.engine.connect() as conn:
        return [str(i) for i in conn.execute(text("SELECT id FROM citelock_queue")).scalars()]


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return p50 * 1000, p99 * 1000


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    fn()  # warm
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def measure(desk: ReviewDesk, *, requests: int, seed: int) -> list[tuple[str, float, float]]:
    rng = random.Random(seed)
    client = TestClient(create_app(desk), base_url="http://bench")
    token = re.search(r'name="login_token" value="([^"]+)"', client.get("/login").text)
    assert token is not None
    client.post("/login", data={"username": "alice", "password": PASSWORD, "login_token": token.group(1)})
    everything = _all_ids(desk)
    session = client.cookies.get("citelock_review_session") or ""
    deep = desk.browser.page(QueueFilter(), limit=500)
    for _ in range(60):  # ~ page 600 of 50
        if deep.next_after is None:
            break
        deep = desk.browser.page(QueueFilter(), after=deep.next_after, limit=500)
    after = deep.next_after or ""

    def get(path: str) -> Callable[[], Any]:
        def call() -> None:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)

        return call

    def entry_page() -> None:
        response = client.get(f"/entries/{rng.choice(everything)}?status=open")
        assert response.status_code == 200

    where = QueueFilter()
    sample = desk.queue.get(rng.choice(everything))
    rows: list[tuple[str, float, float]] = []
    for label, fn in [
        ("queue page: open, first page", get("/")),
        ("queue page: one reason", get("/?reason=UNCITED_CLAIM")),
        ("queue page: one surface", get("/?surface=surface-03")),
        ("queue page: page ~600 (keyset)", get(f"/?after={after}")),
        ("queue page: resolved by one reviewer", get("/?status=resolved&reviewer=bob")),
        ("entry page (random entry)", entry_page),
        ("  part: counts per reason", lambda: desk.browser.counts(where)),
        ("  part: one page of 50", lambda: desk.browser.page(where)),
        ("  part: facets (the desk reuses them 30 s)", desk.browser.facets),
        ("  part: entry + history", lambda: (desk.queue.get(sample.id), desk.queue.history(sample.id))),
        ("  part: logged prompt read + re-hash", lambda: desk.log.get(sample.request_id)),
        ("  part: entry view (prompt, span check, answer)", lambda: entry_view(sample, [], desk.log, desk.results)),
        ("  part: next / previous", lambda: desk.browser.neighbours(sample.id, where)),
        ("  part: queue template alone", _queue_render(desk)),
        ("  part: session check", lambda: desk.accounts.credential(session, kind="session")),
        ("  floor: a static file through the same stack", get("/static/review.css")),
    ]:
        p50, p99 = _quantiles(_timed(fn, requests))
        rows.append((label, p50, p99))
    metrics = _timed(lambda: metrics_from_store(desk.engine), 2)
    rows.append(("metrics report (the metrics page, once a minute)", *_quantiles(metrics)))
    return rows


def _queue_render(desk: ReviewDesk) -> Callable[[], Any]:
    """Render the queue page's template with a ready context: the cost of the HTML alone."""
    from citelock.reasons import REASONS
    from citelock.review._pages import _groups
    from citelock.review._web import templates

    where = QueueFilter()
    page = desk.browser.page(where)
    context = {
        "user": desk.accounts.credential(desk.accounts.open("alice"), kind="session"),
        "csrf": "x",
        "now": datetime.now(UTC),
        "where": where,
        "params": where.query(),
        "counts": desk.browser.counts(where),
        "total": 0,
        "page": page,
        "groups": _groups(page.rows),
        "facets": desk.browser.facets(),
        "reasons": REASONS,
        "done": None,
        "alarms": (),  # the base template shows the judge's live alarms; none here
    }
    template = templates.env.get_template("queue.html")
    return lambda: template.render(context)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--prompts", type=int, default=2_000)
    parser.add_argument("--surfaces", type=int, default=12)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    console = Console(width=150)
    results: dict[str, list[tuple[str, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        console.print("SQLite:")
        desk = build(
            str(Path(tmp) / "bench.db"),
            entries=args.entries,
            prompts=args.prompts,
            surfaces=args.surfaces,
            seed=args.seed,
            console=console,
        )
        results["SQLite"] = measure(desk, requests=args.requests, seed=args.seed)
        desk.engine.dispose()
    url = os.environ.get("CITELOCK_TEST_POSTGRES_URL")
    if url:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        admin = make_engine(url)
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        try:
            console.print("PostgreSQL:")
            sep = "&" if "?" in url else "?"
            desk = build(
                f"{url}{sep}options=-csearch_path%3D{schema}",
                entries=args.entries,
                prompts=args.prompts,
                surfaces=args.surfaces,
                seed=args.seed,
                console=console,
            )
            results["PostgreSQL"] = measure(desk, requests=args.requests, seed=args.seed)
            desk.engine.dispose()
        finally:
            with admin.begin() as conn:
                conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
            admin.dispose()
    backends = list(results)
    table = Table(
        "request / part",
        *(f"{b} p50 ms" for b in backends),
        *(f"{b} p99 ms" for b in backends),
        "p50 vs first queue page" if len(backends) == 1 else "PostgreSQL / SQLite p50",
        title=f"review desk, {args.entries:,} queue entries, {args.requests} requests each (metrics report: 2)",
    )
    first = results[backends[0]][0][1]
    for i, (label, *_) in enumerate(results[backends[0]]):
        p50s = [results[b][i][1] for b in backends]
        p99s = [results[b][i][2] for b in backends]
        ratio = p50s[0] / first if len(backends) == 1 else p50s[1] / p50s[0]
        table.add_row(label, *(f"{v:.1f}" for v in p50s), *(f"{v:.1f}" for v in p99s), f"{ratio:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
