"""The review desk over HTTP (in-process, and a live server for the races): who may see and do what, the pages,
the JSON API, the exports, and two reviewers resolving one entry at once."""

from __future__ import annotations

import csv
import io
import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from typer.testing import CliRunner

from citelock import InputError, PromptRecord, ReasonCode, assemble, serialize
from citelock.cli import app as cli
from citelock.evals._datasets import read_labels
from citelock.metrics import metrics_from_store
from citelock.metrics._false_pass import live_rates_from_store, statuses_json
from citelock.reasons import REASONS
from citelock.review import FIX_LIST_COLUMNS, create_account, create_app
from citelock.review._security import CONTENT_SECURITY_POLICY
from citelock.review._throttle import SignInThrottle
from citelock.store import QueueFilter
from support.review_desk import (
    BASE,
    FINANCE,
    PASSWORDS,
    Seeded,
    copy_seeded,
    live_server,
    log_and_guard,
    seed_desk,
    sign_in,
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed_desk(str(tmp_path_factory.mktemp("desk") / "desk.db"))


@pytest.fixture
def seeded(template: Seeded, tmp_path: Path) -> Seeded:
    return copy_seeded(template, str(tmp_path / "desk.db"))


@pytest.fixture
def client(seeded: Seeded) -> Iterator[TestClient]:
    with TestClient(create_app(seeded.desk), base_url=BASE) as c:
        yield c


def csrf_of(client: TestClient, path: str = "/") -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert found is not None
    return found.group(1)


def post_outcome(client: TestClient, entry_id: str, csrf: str | None, **fields: str) -> httpx.Response:
    data = {"outcome": "accept", "revision": "", **fields}
    if csrf is not None:
        data["csrf_token"] = csrf
    return client.post(f"/entries/{entry_id}/outcome", data=data, follow_redirects=False)


# --- signed out ---------------------------------------------------------------------------------------------


def test_a_signed_out_visitor_gets_nothing_but_the_sign_in_page(client: TestClient, seeded: Seeded) -> None:
    entry = seeded.ids[ReasonCode.UNSUPPORTED]
    # (the sign-in page carries the path asked for, so the entry id itself may come back in its form)
    secrets_on_pages = ["The seller pays for freight", "billed to the buyer", "Operating margins", "Revenue grew"]
    for path in ["/", f"/entries/{entry}", "/metrics", "/export", "/prompts/req-finance", "/?reason=WRONG_CHUNK"]:
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/login?next=")
        landed = client.get(path)
        assert landed.url.path == "/login" and "Sign in" in landed.text
        assert not any(s in landed.text for s in secrets_on_pages), path
    for path in [
        "/api/v1/queue",
        f"/api/v1/entries/{entry}",
        "/api/v1/metrics",
        "/api/v1/me",
        "/api/openapi.json",
        "/api/v1/export/fixes.csv",
        "/api/v1/export/labels.jsonl",
    ]:
        response = client.get(path)
        assert response.status_code == 401, path
        assert not any(s in response.text for s in secrets_on_pages), path
    for path in ["/docs", "/redoc", "/openapi.json"]:
        assert client.get(path, follow_redirects=False).status_code in (303, 404)
    refused = client.post(f"/entries/{entry}/outcome", data={"outcome": "accept"}, follow_redirects=False)
    assert refused.status_code == 303 and refused.headers["location"] == "/login?next=%2F"  # a post is not replayed
    api = client.post(f"/api/v1/entries/{entry}/outcome", json={"outcome": "accept"})
    assert api.status_code == 401
    assert seeded.desk.queue.history(entry) == []


def test_signing_in_sets_a_strict_httponly_session(client: TestClient) -> None:
    response = sign_in(client, "alice", next_path="/metrics")
    assert response.status_code == 303 and response.headers["location"] == "/metrics"
    cookie = next(c for c in response.headers.get_list("set-cookie") if c.startswith("citelock_review_session="))
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    assert client.get("/").status_code == 200
    me = client.get("/api/v1/me").json()
    assert me == {"username": "alice", "role": "reviewer", "kind": "session"}


@pytest.mark.parametrize(("name", "password"), [("alice", "not-the-password"), ("nobody", "whatever-password")])
def test_a_wrong_name_or_password_gets_one_message(client: TestClient, name: str, password: str) -> None:
    response = sign_in(client, name, password)
    assert response.status_code == 401 and "wrong name or password" in response.text
    assert "citelock_review_session" not in response.headers.get("set-cookie", "")
    assert client.get("/", follow_redirects=False).status_code == 303


def test_password_guessing_is_throttled_per_name_then_allowed_after_the_window(seeded: Seeded) -> None:
    now = [1000.0]
    throttle = SignInThrottle(name_failures=3, address_failures=100, window=60.0, clock=lambda: now[0])
    with TestClient(create_app(seeded.desk, sign_in_throttle=throttle), base_url=BASE) as client:
        for _ in range(3):
            assert sign_in(client, "alice", "not-the-password").status_code == 401
        # the fourth try is refused without checking the password, even the right one
        refused = sign_in(client, "alice")
        assert refused.status_code == 429 and "too many failed sign-ins" in refused.text
        assert refused.headers["retry-after"] == "60"
        assert "citelock_review_session" not in refused.headers.get("set-cookie", "")
        assert sign_in(client, "ALICE ", PASSWORDS["alice"]).status_code == 429  # the same name however typed
        assert sign_in(client, "bob").status_code == 303  # another name is not held up
        now[0] += 61.0
        assert sign_in(client, "alice").status_code == 303  # after the window the right password works


def test_password_guessing_is_throttled_per_client_address(seeded: Seeded) -> None:
    throttle = SignInThrottle(name_failures=100, address_failures=4, window=60.0)
    with TestClient(create_app(seeded.desk, sign_in_throttle=throttle), base_url=BASE) as client:
        for name in ("u1", "u2", "u3", "u4"):  # spraying many names from one address
            assert sign_in(client, name, "whatever-password").status_code == 401
        assert sign_in(client, "alice").status_code == 429


def test_a_successful_sign_in_clears_the_names_failures(seeded: Seeded) -> None:
    throttle = SignInThrottle(name_failures=2, address_failures=100, window=60.0)
    with TestClient(create_app(seeded.desk, sign_in_throttle=throttle), base_url=BASE) as client:
        assert sign_in(client, "alice", "not-the-password").status_code == 401
        assert sign_in(client, "alice").status_code == 303
        assert sign_in(client, "alice", "not-the-password").status_code == 401
        assert sign_in(client, "alice").status_code == 303  # one failure since the success: still allowed


def test_the_sign_in_form_is_csrf_protected(client: TestClient) -> None:
    client.get("/login")
    response = client.post(
        "/login", data={"username": "alice", "password": PASSWORDS["alice"], "login_token": "forged"}
    )
    assert response.status_code == 403 and "Sign-in refused" in response.text


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example", "/\\evil.example", "relative"])
def test_after_signing_in_the_desk_never_redirects_off_site(client: TestClient, target: str) -> None:
    assert sign_in(client, "alice", next_path=target).headers["location"] == "/"


def test_disabling_an_account_ends_its_session_now(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "bob")
    assert client.get("/", follow_redirects=False).status_code == 200
    seeded.desk.accounts.disable("bob")
    assert client.get("/", follow_redirects=False).status_code == 303


def test_signing_out_ends_the_session_server_side(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    cookie = client.cookies.get("citelock_review_session")
    assert cookie and seeded.desk.accounts.credential(cookie, kind="session") is not None
    response = client.post("/logout", data={"csrf_token": csrf_of(client)}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/login"
    assert seeded.desk.accounts.credential(cookie, kind="session") is None


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for response in (client.get("/login"), client.get("/static/review.js"), client.get("/api/v1/me")):
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
    assert client.get("/login").headers["cache-control"] == "no-store"
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY and "script-src 'self'" in CONTENT_SECURITY_POLICY


# --- pages ----------------------------------------------------------------------------------------------------


def test_the_queue_groups_entries_by_reason_with_meaning_and_fix(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    page = client.get("/").text
    for code, entry_id in seeded.ids.items():
        assert f'<section class="group" data-reason="{code.value}">' in page
        assert escape(REASONS[code].description) in page and escape(REASONS[code].fix) in page
        assert f'data-entry="{entry_id}"' in page
    only = client.get("/?reason=WRONG_CHUNK").text
    assert re.findall(r'<section class="group" data-reason="(\w+)">', only) == ["WRONG_CHUNK"]
    support = client.get("/?surface=support").text
    # the warranty answer also misses what its question asks (OFF_QUESTION, the relevance layer)
    assert re.findall(r'<section class="group" data-reason="(\w+)">', support) == ["OFF_QUESTION", "SPAN_TRUNCATED"]
    bad = client.get("/?reason=NOT_A_CODE")
    assert bad.status_code == 400 and "unknown reason code" in bad.text


def test_the_entry_page_marks_the_verified_span(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    entry_id = seeded.ids[ReasonCode.UNSUPPORTED]
    page = client.get(f"/entries/{entry_id}").text
    cited = re.search(r'<section class="chunk-view" id="cited".*?</section>', page, re.S)
    assert cited is not None
    pre = re.search(
        r'<pre class="passage" data-span-start="(\d+)" data-span-end="(\d+)" data-body-start="(\d+)" '
        r'data-message="(\d+)">(.*?)</pre>',
        cited.group(0),
        re.S,
    )
    assert pre is not None
    start, end, body, message = (int(pre.group(i)) for i in range(1, 5))
    content = seeded.records["req-finance"].messages[message].content
    assert content[start:end] == "billed to the buyer"
    before, mark, _ = re.split(r'<mark class="span" data-verified="true">(.*?)</mark>', pre.group(5), maxsplit=1)
    assert mark == "billed to the buyer" and before == content[body:start]
    for needle in ("overlap=", "lexical", "req-finance", "The seller pays for freight.", "decision"):
        assert needle in page
    assert client.get("/entries/" + "0" * 20).status_code == 404


def test_the_prompt_page_shows_the_whole_prompt_as_sent(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    entry_id = seeded.ids[ReasonCode.UNSUPPORTED]
    page = client.get(f"/prompts/req-finance?entry={entry_id}").text
    assert '<mark class="span">billed to the buyer</mark>' in page
    for chunk in ("c1", "c2", "c3"):
        assert f'<span class="chunk" data-chunk="{chunk}"' in page
    assert client.get("/prompts/no-such-request").status_code == 404


def test_resolving_records_who_and_when_and_moves_on(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    entry_id = seeded.ids[ReasonCode.UNSUPPORTED]
    before = datetime.now(UTC)
    response = post_outcome(client, entry_id, csrf_of(client), outcome="repair", note="drop the claim", status="open")
    assert response.status_code == 303
    nxt = seeded.desk.browser.neighbours(entry_id, QueueFilter())[1]
    assert response.headers["location"] == f"/entries/{nxt}?status=open&done={entry_id}"
    (event,) = seeded.desk.queue.history(entry_id)
    assert (event.outcome, event.note, event.reviewer, event.revision) == ("repair", "drop the claim", "alice", 0)
    assert before - timedelta(seconds=1) <= event.resolved_at <= datetime.now(UTC)
    landed = client.get(response.headers["location"]).text
    assert "Recorded <strong>repair</strong>" in landed


def test_csrf_is_required_on_every_state_change(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    entry_id = seeded.ids[ReasonCode.WRONG_CHUNK]
    csrf = csrf_of(client)
    assert post_outcome(client, entry_id, None).status_code == 403
    assert post_outcome(client, entry_id, "forged-token").status_code == 403
    assert post_outcome(client, entry_id, csrf[:-1]).status_code == 403
    foreign = client.post(
        f"/entries/{entry_id}/outcome",
        data={"outcome": "accept", "csrf_token": csrf},
        headers={"Origin": "http://evil.example"},
        follow_redirects=False,
    )
    assert foreign.status_code == 403 and "CSRF" in foreign.text
    assert client.post("/logout", data={}, follow_redirects=False).status_code == 403
    assert seeded.desk.queue.history(entry_id) == []
    same_site = client.post(
        f"/entries/{entry_id}/outcome",
        data={"outcome": "accept", "revision": "", "csrf_token": csrf},
        headers={"Origin": BASE},
        follow_redirects=False,
    )
    assert same_site.status_code == 303
    assert [e.reviewer for e in seeded.desk.queue.history(entry_id)] == ["alice"]


def test_origins_declared_for_a_proxy_pass_the_origin_check(seeded: Seeded) -> None:
    with TestClient(create_app(seeded.desk, origins=["https://Review.Example"]), base_url=BASE) as client:
        sign_in(client, "alice")
        entry_id = seeded.ids[ReasonCode.WRONG_CHUNK]
        csrf = csrf_of(client)
        for origin, status in (
            ("https://evil.example", 403),
            ("http://review.example", 403),
            ("https://review.example", 303),
        ):
            response = client.post(
                f"/entries/{entry_id}/outcome",
                data={"outcome": "accept", "revision": "", "csrf_token": csrf},
                headers={"Origin": origin},
                follow_redirects=False,
            )
            assert response.status_code == status, origin
    with pytest.raises(InputError, match="an origin is scheme://host"):
        create_app(seeded.desk, origins=["review.example/path"])


def test_an_outcome_missing_what_it_needs_is_refused_and_the_note_kept(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    entry_id = seeded.ids[ReasonCode.UNCITED_CLAIM]
    csrf = csrf_of(client)
    repair = post_outcome(client, entry_id, csrf, outcome="repair", note="   ")
    assert repair.status_code == 400 and "a repair needs a note" in repair.text
    escalate = post_outcome(client, entry_id, csrf, outcome="escalate", note="keep me")
    assert escalate.status_code == 400 and "needs a category" in escalate.text and "keep me</textarea>" in escalate.text
    odd = post_outcome(client, entry_id, csrf, outcome="delete")
    assert odd.status_code == 400 and "outcome must be accept, repair or escalate" in odd.text
    assert seeded.desk.queue.history(entry_id) == []


def test_a_second_resolution_is_a_conflict_naming_the_first(client: TestClient, seeded: Seeded) -> None:
    entry_id = seeded.ids[ReasonCode.NUMBER_MISMATCH]
    sign_in(client, "alice")
    alice_csrf = csrf_of(client)
    with TestClient(create_app(seeded.desk), base_url=BASE) as bob:
        sign_in(bob, "bob")
        bob_csrf = csrf_of(bob, f"/entries/{entry_id}")
        assert post_outcome(client, entry_id, alice_csrf, outcome="accept").status_code == 303
        late = post_outcome(bob, entry_id, bob_csrf, outcome="repair", note="fix the number")
    assert late.status_code == 409
    assert "resolved by alice as accept" in late.text and "yours was not recorded" in late.text
    assert [(e.outcome, e.reviewer) for e in seeded.desk.queue.history(entry_id)] == [("accept", "alice")]


def test_re_reviews_follow_roles_and_revisions(client: TestClient, seeded: Seeded) -> None:
    entry_id = seeded.ids[ReasonCode.UNCERTAIN_SUPPORT]
    sign_in(client, "alice")
    assert post_outcome(client, entry_id, csrf_of(client), outcome="accept").status_code == 303
    with (
        TestClient(create_app(seeded.desk), base_url=BASE) as bob,
        TestClient(create_app(seeded.desk), base_url=BASE) as root,
    ):
        sign_in(bob, "bob")
        page = bob.get(f"/entries/{entry_id}").text
        assert "only they or an admin may re-review it" in page and 'id="outcome-form"' not in page
        refused = post_outcome(bob, entry_id, csrf_of(bob), outcome="repair", note="no", revision="0")
        assert refused.status_code == 403 and "re-reviews only their own outcomes" in refused.text
        own = post_outcome(client, entry_id, csrf_of(client), outcome="repair", note="narrow it", revision="0")
        assert own.status_code == 303
        sign_in(root, "root")
        stale = post_outcome(root, entry_id, csrf_of(root), outcome="escalate", category="ranking", revision="0")
        assert stale.status_code == 409 and "revision 1" in stale.text
        admin = post_outcome(root, entry_id, csrf_of(root), outcome="escalate", category="ranking", revision="1")
        assert admin.status_code == 303
    history = seeded.desk.queue.history(entry_id)
    assert [(e.revision, e.outcome, e.reviewer) for e in history] == [
        (0, "accept", "alice"),
        (1, "repair", "alice"),
        (2, "escalate", "root"),
    ]


# --- the JSON API ---------------------------------------------------------------------------------------------


def test_the_api_with_a_bearer_token(client: TestClient, seeded: Seeded) -> None:
    token = seeded.desk.accounts.open("bob", kind="token", lifetime=None)
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/me", headers=auth).json() == {"username": "bob", "role": "reviewer", "kind": "token"}
    page = client.get("/api/v1/queue?limit=2", headers=auth).json()
    assert len(page["rows"]) == 2 and page["next_after"] == page["rows"][-1]["entry"]["id"]
    rest = client.get(f"/api/v1/queue?limit=500&after={page['next_after']}", headers=auth).json()
    assert len(page["rows"]) + len(rest["rows"]) == sum(c["count"] for c in page["counts"]) == len(seeded.ids)
    entry_id = seeded.ids[ReasonCode.UNSUPPORTED]
    detail = client.get(f"/api/v1/entries/{entry_id}", headers=auth).json()
    cited = detail["cited"]
    content = seeded.records["req-finance"].messages[cited["message"]].content
    assert content[cited["span_start"] : cited["span_end"]] == "billed to the buyer"
    assert detail["reason"]["fix"] == REASONS[ReasonCode.UNSUPPORTED].fix
    made = client.post(f"/api/v1/entries/{entry_id}/outcome", json={"outcome": "accept"}, headers=auth)
    assert made.status_code == 201 and made.json()["reviewer"] == "bob" and made.json()["revision"] == 0
    again = client.post(f"/api/v1/entries/{entry_id}/outcome", json={"outcome": "accept"}, headers=auth)
    assert again.status_code == 409 and "resolved by bob" in again.json()["detail"]
    bad = client.post(f"/api/v1/entries/{entry_id}/outcome", json={"outcome": "nope"}, headers=auth)
    assert bad.status_code == 422 and "outcome" in bad.json()["detail"]
    missing = client.post("/api/v1/entries/ffffffff/outcome", json={"outcome": "accept"}, headers=auth)
    assert missing.status_code == 404
    assert client.get("/api/v1/me", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_the_api_with_a_session_needs_the_csrf_header(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    entry_id = seeded.ids[ReasonCode.WRONG_CHUNK]
    url = f"/api/v1/entries/{entry_id}/outcome"
    assert client.post(url, json={"outcome": "accept"}).status_code == 403
    assert client.post(url, json={"outcome": "accept"}, headers={"X-CSRF-Token": "forged"}).status_code == 403
    ok = client.post(url, json={"outcome": "accept"}, headers={"X-CSRF-Token": csrf_of(client)})
    assert ok.status_code == 201


def test_the_openapi_description_is_for_signed_in_accounts(client: TestClient) -> None:
    sign_in(client, "alice")
    spec = client.get("/api/openapi.json").json()
    outcome = spec["paths"]["/api/v1/entries/{entry_id}/outcome"]["post"]
    assert {"201", "401", "403", "404", "409"} <= set(outcome["responses"])
    assert set(spec["paths"]) >= {"/api/v1/queue", "/api/v1/entries/{entry_id}", "/api/v1/metrics"}
    assert not any(path in spec["paths"] for path in ("/", "/login", "/metrics"))


# --- metrics and exports --------------------------------------------------------------------------------------


def test_metrics_are_what_citelock_metrics_computes(client: TestClient, seeded: Seeded) -> None:
    sign_in(client, "alice")
    api = client.get("/api/v1/metrics").json()
    judge = statuses_json(live_rates_from_store(seeded.db))  # the judge's live rates and alarms, as the CLI
    assert api == {**metrics_from_store(seeded.db).to_json(), "judge": judge}
    cli_run = CliRunner().invoke(cli, ["metrics", "--db", seeded.db, "--json"])
    assert cli_run.exit_code == 0 and json.loads(cli_run.stdout) == api
    page = client.get("/metrics").text
    report = metrics_from_store(seeded.db)
    for name in ("citation_precision", "citation_recall", "pass_rate"):
        assert report.get(name).formatted() in page
    assert page.count("<svg") == 4 and page.count('<rect class="bar-') >= 8


def test_exports_read_back(client: TestClient, seeded: Seeded, tmp_path: Path) -> None:
    formula = log_and_guard(
        seeded.desk,
        _formula_record(),
        {"claims": [{"text": '=HYPERLINK("http://evil.example","click") sales rose.', "citations": []}]},
        surface="finance",
    )
    sign_in(client, "alice")
    csrf = csrf_of(client)
    judged = seeded.ids[ReasonCode.UNSUPPORTED]
    post_outcome(client, judged, csrf, outcome="accept")
    post_outcome(client, seeded.ids[ReasonCode.SPAN_TRUNCATED], csrf, outcome="escalate", category="truncation")
    post_outcome(client, formula[0], csrf, outcome="repair", note="-drop it", chunk_id="c2")
    rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/export/fixes.csv").text)))
    assert tuple(rows[0]) == FIX_LIST_COLUMNS and len(rows) == 3
    by_id = {r["entry_id"]: r for r in rows}
    assert by_id[formula[0]]["claim"].startswith("'=HYPERLINK") and by_id[formula[0]]["note"] == "'-drop it"
    assert by_id[formula[0]]["better_chunk_id"] == "c2" and by_id[formula[0]]["reviewer"] == "alice"
    assert by_id[seeded.ids[ReasonCode.SPAN_TRUNCATED]]["category"] == "truncation"
    lines = [json.loads(line) for line in client.get("/api/v1/export/fixes.jsonl").text.splitlines()]
    assert {r["entry_id"]: r["claim"] for r in lines}[formula[0]].startswith("=HYPERLINK")  # JSON keeps it exact
    only_repairs = client.get("/api/v1/export/fixes.jsonl?status=repair").text.splitlines()
    assert [json.loads(r)["entry_id"] for r in only_repairs] == [formula[0]]
    labels = tmp_path / "labels.jsonl"
    labels.write_text(client.get("/api/v1/export/labels.jsonl").text, encoding="utf-8")
    dataset = read_labels(labels)
    assert [(i.id, i.claim, i.label) for i in dataset.items] == [(judged, "The seller pays for freight.", "yes")]
    run = CliRunner().invoke(cli, ["calibrate", "--format", "labels", str(labels), "--json", "--bootstrap", "10"])
    assert run.exit_code == 0, run.output
    report = json.loads(run.stdout)
    assert report["n"] == 1 and report["confusion"]["yes"]["no"] == 1  # humans: yes; the judge: no
    page = client.get("/export").text
    assert "3 reviewed entries" in page and "1 label<" in page


def _formula_record() -> PromptRecord:
    return serialize(assemble("Sales?", FINANCE), request_id="req-formula")


# --- two reviewers, one entry, at once ------------------------------------------------------------------------


def _race(base: str, entry_id: str, clients: list[httpx.Client], csrfs: list[str]) -> list[int]:
    barrier = threading.Barrier(len(clients))
    codes: list[int] = [0] * len(clients)

    def go(i: int) -> None:
        barrier.wait()
        response = clients[i].post(
            f"{base}/entries/{entry_id}/outcome",
            data={"outcome": "accept", "revision": "", "csrf_token": csrfs[i], "note": f"by {i}"},
            follow_redirects=False,
        )
        codes[i] = response.status_code

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return codes


@pytest.mark.slow
def test_concurrent_resolutions_one_wins_the_rest_conflict(target: str) -> None:
    seeded = seed_desk(target, accounts=False)
    names = [f"rev{i}" for i in range(6)]
    for name in names:
        create_account(seeded.desk.accounts, name, f"{name}-password-x")
    entry_id = seeded.ids[ReasonCode.WRONG_CHUNK]
    with live_server(create_app(seeded.desk)) as base:
        clients = [httpx.Client(base_url=base, timeout=30) for _ in names]
        try:
            csrfs = []
            for c, name in zip(clients, names, strict=True):
                token = re.search(r'name="login_token" value="([^"]+)"', c.get("/login").text)
                assert token is not None
                c.post(
                    "/login", data={"username": name, "password": f"{name}-password-x", "login_token": token.group(1)}
                )
                found = re.search(r'name="csrf_token" value="([^"]+)"', c.get(f"/entries/{entry_id}").text)
                assert found is not None
                csrfs.append(found.group(1))
            codes = _race(base, entry_id, clients, csrfs)
            api_codes = _api_race(base, seeded, seeded.ids[ReasonCode.UNCITED_CLAIM], names)
        finally:
            for c in clients:
                c.close()
    assert sorted(codes) == [303] + [409] * 5
    (event,) = seeded.desk.queue.history(entry_id)
    assert event.reviewer == names[codes.index(303)] and event.note == f"by {codes.index(303)}"
    assert sorted(api_codes) == [201] + [409] * 5
    assert len(seeded.desk.queue.history(seeded.ids[ReasonCode.UNCITED_CLAIM])) == 1
    counts = seeded.desk.browser.outcome_counts(QueueFilter(status="all"))
    assert counts["accept"] == 2  # nothing double-counted


def _api_race(base: str, seeded: Seeded, entry_id: str, names: list[str]) -> list[int]:
    tokens = [seeded.desk.accounts.open(name, kind="token", lifetime=None) for name in names]
    barrier = threading.Barrier(len(names))
    codes = [0] * len(names)

    def go(i: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as c:
            barrier.wait()
            codes[i] = c.post(
                f"/api/v1/entries/{entry_id}/outcome",
                json={"outcome": "accept"},
                headers={"Authorization": f"Bearer {tokens[i]}"},
            ).status_code

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(names))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return codes
