"""Audit samples in the review desk, in a real headless browser (``browser`` marker): the audit view, accept /
reject as the label, the judge's live rates on the metrics page, and the alarm banner.

The desk is seeded by the real guard (a synthetic judge over labeled pairs, a census audit plan) on SQLite; most
audit samples are labeled from the truth beforehand, so the surface's false-pass upper bound is above its target
and the banner must show; two are left open for the browser to label.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from citelock import ReasonCode
from citelock.guard import AuditPlan, Guard, SurfacePolicy
from citelock.review import ReviewDesk, create_account, create_app
from support.fakes import make_record
from support.false_pass_sim import CHUNKS, ROUTING, TruthJudge, claim_texts, traffic
from support.review_desk import PASSWORDS, ROLES, live_server

playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package (dev extra) is not installed")

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CITELOCK_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
CENSUS = AuditPlan(near_pass_rate=1, pass_rate=1, review_rate=1, fail_rate=1, near_band=0.05)


def _seed(db: str) -> tuple[ReviewDesk, list[str]]:
    import numpy as np

    desk = ReviewDesk(db)
    create_account(desk.accounts, "alice", PASSWORDS["alice"], role=ROLES["alice"])  # type: ignore[arg-type]
    yes, scores = traffic(np.random.default_rng(3), 400, 0.3)
    claims = claim_texts(400)
    judge = TruthJudge(dict(zip(claims, (float(s) for s in scores), strict=True)))
    guard = Guard(SurfacePolicy(name="ops", stakes="low", routing=ROUTING, on_fail="mark", audit=CENSUS), judge)
    truth = dict(zip(claims, (bool(y) for y in yes), strict=True))
    for i, claim in enumerate(claims):
        record = make_record("When?", CHUNKS, request_id=f"r{i}")
        desk.log.append(record)
        result = guard.run(record, {"claims": [{"text": claim, "citations": [{"chunk_id": "c1"}]}]})
        desk.results.append(result)
        desk.queue.enqueue_result(result)
    audit = [e for e, _ in desk.queue.items(reason=ReasonCode.AUDIT_SAMPLE)]
    for entry in audit[2:]:
        desk.queue.resolve(entry.id, "accept" if truth[entry.claim] else "reject", reviewer="bob")
    return desk, [e.id for e in audit[:2]]


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[tuple[str, ReviewDesk, list[str]]]:
    desk, open_ids = _seed(str(tmp_path / "desk.db"))
    desk.metrics_ttl = 0.0  # every page recomputes: the banner follows the labels
    with live_server(create_app(desk)) as base:
        yield base, desk, open_ids


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium chromium-driver, or set CITELOCK_CHROMIUM)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


def test_audit_items_are_labeled_in_their_own_view_and_the_rates_and_banner_follow(
    chromium: Any, desk: tuple[str, ReviewDesk, list[str]]
) -> None:
    base, the_desk, open_ids = desk
    context = chromium.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(base + "/audit")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORDS["alice"])
    page.click("form button[type=submit]")
    page.wait_for_load_state()
    assert page.url.startswith(base + "/audit")
    # the banner: the false-pass upper bound is above the 5% target on these labels
    banner = page.locator("#alarm-banner")
    assert banner.is_visible() and "false_pass" in banner.inner_text() and "ops" in banner.inner_text()
    assert page.locator("#audit-open").inner_text() == "2 open"
    rows = page.locator("#audit-items tbody tr")
    assert rows.count() == 2
    assert {rows.nth(i).get_attribute("data-entry") for i in range(2)} == set(open_ids)
    # an audit entry offers accept / reject, not repair / escalate
    rows.first.locator("a").click()
    page.wait_for_load_state()
    entry_id = page.locator("header.entry-head").get_attribute("data-entry")
    assert entry_id in open_ids
    assert page.locator("#audit-meta").is_visible()
    assert page.locator("button[value=reject]").count() == 1 and page.locator("button[value=repair]").count() == 0
    page.click("button[value=reject]")
    page.wait_for_load_state()
    resolution = the_desk.queue.resolution(entry_id or "")
    assert resolution is not None and resolution.outcome == "reject" and resolution.reviewer == "alice"
    page.goto(base + "/audit")
    assert page.locator("#audit-open").inner_text() == "1 open"
    assert page.locator("#audit-labeled li").first.inner_text().find("reject") >= 0
    # the metrics page: the live rates table and the chart
    page.goto(base + "/metrics")
    table = page.locator("#judge-rates")
    assert table.is_visible()
    assert page.locator("tr[data-rate^='ops:false_pass_rate:last']").count() == 1
    row = page.locator("tr[data-rate^='ops:false_pass_rate:last']").inner_text()
    assert "above target" in row and "5.0%" in row
    assert page.locator("figure.chart figcaption", has_text="Live false-pass rate on ops").count() == 1
    assert not errors
    context.close()
