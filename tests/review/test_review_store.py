"""The review desk's store pieces: accounts, sessions and tokens; paged, filtered reads of the queue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect

from citelock import Finding, InputError, Layer, ReasonCode
from citelock.store import AccountStore, QueueBrowser, QueueEntry, QueueFilter, ReviewQueue

# --- accounts -------------------------------------------------------------------------------------------------


def test_accounts_add_get_and_refuse_duplicates(target: str) -> None:
    accounts = AccountStore(target)
    made = accounts.add("alice", role="reviewer", password_hash="h1")
    assert (made.username, made.role, made.disabled) == ("alice", "reviewer", False)
    assert accounts.get("alice") == made
    with pytest.raises(InputError, match="already exists"):
        accounts.add("alice", role="admin", password_hash="h2")
    with pytest.raises(KeyError):
        accounts.get("nobody")
    assert [a.username for a in accounts.accounts()] == ["alice"]


@pytest.mark.parametrize("name", ["", "-lead", "has space", "a" * 65, "<script>", "x/y"])
def test_account_names_are_restricted(tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="account name"):
        AccountStore(tmp_path / "a.db").add(name, role="reviewer", password_hash="h")


def test_unknown_role_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    accounts = AccountStore(tmp_path / "a.db")
    with pytest.raises(InputError, match="role must be reviewer or admin"):
        accounts.add("bob", role="owner", password_hash="h")  # type: ignore[arg-type]
    accounts.add("bob", role="reviewer", password_hash="h")
    with pytest.raises(InputError, match="role must be"):
        accounts.set_role("bob", "root")  # type: ignore[arg-type]


def test_sessions_store_only_a_hash_and_expire(target: str) -> None:
    accounts = AccountStore(target)
    accounts.add("alice", role="reviewer", password_hash="h")
    token = accounts.open("alice", lifetime=timedelta(hours=1))
    cred = accounts.credential(token, kind="session")
    assert cred is not None and (cred.username, cred.role, cred.kind) == ("alice", "reviewer", "session")
    assert len(cred.csrf) >= 40
    assert accounts.credential(token, kind="token") is None  # a session is not an API token
    assert accounts.credential(token + "x", kind="session") is None
    with accounts.engine.connect() as conn:
        stored = conn.exec_driver_sql("SELECT token_sha256 FROM citelock_review_sessions").scalars().all()
    assert token not in stored and len(stored) == 1 and len(stored[0]) == 64
    expired = accounts.open("alice", lifetime=timedelta(seconds=-1))
    assert accounts.credential(expired, kind="session") is None
    assert accounts.purge_expired() == 1
    accounts.close(token)
    assert accounts.credential(token, kind="session") is None


def test_role_change_applies_to_open_sessions(target: str) -> None:
    accounts = AccountStore(target)
    accounts.add("bob", role="reviewer", password_hash="h")
    token = accounts.open("bob")
    accounts.set_role("bob", "admin")
    cred = accounts.credential(token, kind="session")
    assert cred is not None and cred.role == "admin"


def test_disable_ends_sessions_and_tokens(target: str) -> None:
    accounts = AccountStore(target)
    accounts.add("carol", role="admin", password_hash="h")
    session = accounts.open("carol")
    api = accounts.open("carol", kind="token", lifetime=None, label="ci")
    assert accounts.credential(api, kind="token") is not None
    accounts.disable("carol")
    assert accounts.credential(session, kind="session") is None
    assert accounts.credential(api, kind="token") is None
    assert accounts.password_hash("carol") is None
    with pytest.raises(InputError, match="disabled"):
        accounts.open("carol")
    accounts.enable("carol")
    assert accounts.password_hash("carol") == "h"
    assert accounts.credential(session, kind="session") is None  # ended for good
    with pytest.raises(KeyError):
        accounts.disable("nobody")


def test_a_browser_session_needs_a_lifetime(tmp_path) -> None:  # type: ignore[no-untyped-def]
    accounts = AccountStore(tmp_path / "a.db")
    accounts.add("dan", role="reviewer", password_hash="h")
    with pytest.raises(InputError, match="needs a lifetime"):
        accounts.open("dan", kind="session", lifetime=None)
    assert accounts.revoke_tokens("dan") == 0


# --- paged queue reads ----------------------------------------------------------------------------------------

START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)  # a Monday: ISO week 2025-W10
REASONS = [ReasonCode.UNSUPPORTED, ReasonCode.WRONG_CHUNK, ReasonCode.UNCITED_CLAIM]


def _entry(n: int) -> QueueEntry:
    reason = REASONS[n % 3]
    finding = Finding(
        request_id=f"req-{n}",
        prompt_sha256="cd" * 32,
        reason=reason,
        layer=Layer.COVERAGE if reason == ReasonCode.UNCITED_CLAIM else Layer.SUPPORT,
        claim_index=0,
        claim=f"Claim {n}.",
        chunk_id=None if reason == ReasonCode.UNCITED_CLAIM else "c1",
        passage=None if reason == ReasonCode.UNCITED_CLAIM else "Revenue grew.",
    )
    moment = START + timedelta(weeks=n // 10, minutes=n)
    return QueueEntry.from_finding(finding, surface="chat" if n % 2 else "search", created_at=moment)


@pytest.fixture
def browser(target: str) -> QueueBrowser:
    queue = ReviewQueue(target)
    queue.add(_entry(n) for n in range(30))
    return QueueBrowser(queue)


def _order(entries: list[QueueEntry]) -> list[str]:
    return [e.id for e in sorted(entries, key=lambda e: (e.reason.value, e.created_at, e.id))]


def test_pages_walk_the_queue_order_both_ways(browser: QueueBrowser) -> None:
    expected = _order([_entry(n) for n in range(30)])
    seen: list[str] = []
    page = browser.page(QueueFilter(), limit=7)
    assert page.prev_before is None
    pages = [page]
    while True:
        seen += [r.entry.id for r in page.rows]
        if page.next_after is None:
            break
        page = browser.page(QueueFilter(), after=page.next_after, limit=7)
        pages.append(page)
    assert seen == expected
    assert [len(p.rows) for p in pages] == [7, 7, 7, 7, 2]
    # and back again from the last page
    back = browser.page(QueueFilter(), before=pages[-1].prev_before, limit=7)
    assert [r.entry.id for r in back.rows] == [r.entry.id for r in pages[-2].rows]
    first = browser.page(QueueFilter(), before=pages[1].prev_before, limit=7)
    assert first.prev_before is None and first.next_after == pages[0].next_after


def test_filters_counts_and_neighbours(browser: QueueBrowser) -> None:
    queue = browser.queue
    everything = [_entry(n) for n in range(30)]
    chat_wrong = [e for e in everything if e.surface == "chat" and e.reason == ReasonCode.WRONG_CHUNK]
    page = browser.page(QueueFilter(surface="chat", reason=ReasonCode.WRONG_CHUNK))
    assert [r.entry.id for r in page.rows] == _order(chat_wrong)
    counts = browser.counts(QueueFilter(surface="chat"))
    assert {c.reason: c.count for c in counts} == {
        r: sum(e.surface == "chat" and e.reason == r for e in everything) for r in REASONS
    }
    week = everything[25].week
    assert week != everything[0].week
    assert {r.entry.id for r in browser.page(QueueFilter(week=week, status="all"), limit=500).rows} == {
        e.id for e in everything if e.week == week
    }
    order = _order(everything)
    middle = order[10]
    assert browser.neighbours(middle, QueueFilter()) == (order[9], order[11])
    assert browser.neighbours(order[0], QueueFilter())[0] is None
    # resolving moves an entry out of the open list, and its neighbours stay where they were
    queue.resolve(middle, "accept", reviewer="alice")
    assert middle not in [r.entry.id for r in browser.page(QueueFilter(), limit=500).rows]
    assert browser.neighbours(middle, QueueFilter()) == (order[9], order[11])
    with pytest.raises(KeyError):
        browser.neighbours("0" * 20, QueueFilter())


def test_status_and_reviewer_follow_the_latest_event(browser: QueueBrowser) -> None:
    queue = browser.queue
    ids = _order([_entry(n) for n in range(30)])
    queue.resolve(ids[0], "accept", reviewer="alice")
    queue.resolve(ids[1], "repair", note="drop it", reviewer="bob")
    queue.resolve(ids[2], "escalate", category="ranking", reviewer="alice")
    queue.rereview(ids[0], "repair", note="on second look", reviewer="bob", revision=0)
    by = {s: {r.entry.id for r in browser.page(QueueFilter(status=s), limit=500).rows} for s in ("accept", "repair")}
    assert by == {"accept": set(), "repair": {ids[0], ids[1]}}
    mine = browser.page(QueueFilter(status="resolved", reviewer="alice"), limit=500).rows
    assert [r.entry.id for r in mine] == [ids[2]]
    assert mine[0].resolution is not None and mine[0].resolution.category == "ranking"
    assert len(browser.page(QueueFilter(status="open"), limit=500).rows) == 27
    assert browser.outcome_counts(QueueFilter()) == {"open": 27, "repair": 2, "escalate": 1, "escalate:ranking": 1}
    reviewed = list(browser.reviewed(QueueFilter()))
    assert [(e.id, r.outcome, r.revision) for e, r in reviewed] == [
        (ids[1], "repair", 0),
        (ids[2], "escalate", 0),
        (ids[0], "repair", 1),
    ]
    facets = browser.facets()
    assert facets.surfaces == ("chat", "search") and facets.reviewers == ("alice", "bob")
    assert list(facets.weeks) == sorted({e.week for e in map(_entry, range(30))}, reverse=True)


def test_the_browse_index_is_created_once(target: str) -> None:
    queue = ReviewQueue(target)
    QueueBrowser(queue)
    QueueBrowser(queue)
    with queue.engine.connect() as conn:
        names = [ix["name"] for ix in inspect(conn).get_indexes("citelock_queue")]
    assert names.count("citelock_queue_browse") == 1


def test_filter_parsing_names_what_is_wrong() -> None:
    assert QueueFilter.parse(reason="WRONG_CHUNK", surface="", status="").model_dump() == {
        "reason": ReasonCode.WRONG_CHUNK,
        "surface": None,
        "week": None,
        "status": "open",
        "reviewer": None,
    }
    with pytest.raises(InputError, match="unknown reason code 'NOPE'"):
        QueueFilter.parse(reason="NOPE")
    with pytest.raises(InputError, match="status must be one of"):
        QueueFilter.parse(status="closed")
    assert QueueFilter(surface="a b&c").query() == {"status": "open", "surface": "a b&c"}


def test_page_arguments_are_checked(browser: QueueBrowser) -> None:
    some = browser.page(QueueFilter(), limit=1).rows[0].entry.id
    with pytest.raises(InputError, match="after or before"):
        browser.page(QueueFilter(), after=some, before=some)
    with pytest.raises(InputError, match="limit must be"):
        browser.page(QueueFilter(), limit=0)
    with pytest.raises(KeyError):
        browser.page(QueueFilter(), after="f" * 20)
