"""The review desk in a real headless browser: Debian's chromium driven by Playwright (``browser`` marker).

Playwright is pointed at the system executable (``$CITELOCK_CHROMIUM``, default ``/usr/bin/chromium``); no
browser is downloaded. Playwright refuses a ``--user-data-dir`` flag on ``launch`` and gives every launch a
fresh temporary profile itself, so each run starts with no cookies, cache or history.

``CITELOCK_REVIEW_SCREENSHOTS=docs/review`` makes the screenshot test write the review desk guide's pictures there.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock import Finding, Layer, ReasonCode, assemble, serialize
from citelock.cli import app as cli
from citelock.evals._datasets import read_labels
from citelock.metrics import metrics_from_store
from citelock.records import Chunk
from citelock.review import FIX_LIST_COLUMNS, create_app
from citelock.store import QueueFilter
from support.review_desk import PASSWORDS, Seeded, copy_seeded, live_server, log_and_guard, seed_desk

playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package (dev extra) is not installed")

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CITELOCK_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HIGHLIGHT = "rgb(255, 226, 122)"  # --mark in review.css


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium chromium-driver, or set CITELOCK_CHROMIUM)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed_desk(str(tmp_path_factory.mktemp("browser") / "desk.db"))


@pytest.fixture
def seeded(template: Seeded, tmp_path: Path) -> Seeded:
    return copy_seeded(template, str(tmp_path / "desk.db"))


@pytest.fixture
def desk_url(seeded: Seeded) -> Iterator[str]:
    with live_server(create_app(seeded.desk)) as base:
        yield base


class Watched:
    """A page and everything it did that it should not have: dialogs, CSP violations, page errors."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.add_init_script(
            "window.__violations = [];"
            "document.addEventListener('securitypolicyviolation', e => window.__violations.push(e.violatedDirective));"
        )

    def violations(self) -> list[str]:
        return list(self.page.evaluate("window.__violations || []"))


@pytest.fixture
def new_page(chromium: Any) -> Iterator[Callable[..., Watched]]:
    contexts: list[Any] = []

    def make(**options: Any) -> Watched:
        context = chromium.new_context(viewport={"width": 1280, "height": 860}, **options)
        contexts.append(context)
        return Watched(context.new_page())

    yield make
    for context in contexts:
        context.close()


def sign_in(watched: Watched, base: str, name: str = "alice", path: str = "/") -> None:
    page = watched.page
    page.goto(base + path)
    assert page.url.startswith(base + "/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORDS[name])
    page.click("form button[type=submit]")
    page.wait_for_load_state()
    assert not page.url.startswith(base + "/login"), page.content()[:500]


# --- sign in, the queue, an entry -----------------------------------------------------------------------------


def test_sign_in_list_by_reason_and_open_an_entry(
    new_page: Callable[..., Watched], desk_url: str, seeded: Seeded
) -> None:
    w = new_page()
    sign_in(w, desk_url)
    page = w.page
    groups = page.eval_on_selector_all("section.group", "els => els.map(e => e.dataset.reason)")
    assert sorted(groups) == sorted(code.value for code in seeded.ids)
    page.click("table.reasons a.code:text-is('WRONG_CHUNK')")
    page.wait_for_url(re.compile(r".*reason=WRONG_CHUNK.*"))
    assert page.eval_on_selector_all("section.group", "els => els.map(e => e.dataset.reason)") == ["WRONG_CHUNK"]
    page.click("section.group a")
    page.wait_for_url(re.compile(r".*/entries/.*"))
    assert page.inner_text("header.entry-head .code") == "WRONG_CHUNK"
    assert page.inner_text("#related h3 code") == "c2"
    assert "Operating margins expanded to 30% in 2024" in page.inner_text("#related pre.passage")
    assert page.inner_text("#claim") == "Operating margins expanded as freight costs fell."
    assert w.dialogs == [] and w.errors == [] and w.violations() == []


def test_the_span_is_highlighted_in_place(new_page: Callable[..., Watched], desk_url: str, seeded: Seeded) -> None:
    w = new_page()
    entry_id = seeded.ids[ReasonCode.UNSUPPORTED]
    sign_in(w, desk_url, path=f"/entries/{entry_id}")
    found = w.page.evaluate(
        """() => {
        const pre = document.querySelector('#cited pre.passage');
        const mark = pre.querySelector('mark.span');
        const range = document.createRange();
        range.setStart(pre, 0);
        range.setEndBefore(mark);
        const box = mark.getBoundingClientRect(), outer = pre.getBoundingClientRect();
        return {
            marked: mark.textContent, before: range.toString(), start: +pre.dataset.spanStart,
            end: +pre.dataset.spanEnd, body: +pre.dataset.bodyStart, message: +pre.dataset.message,
            background: getComputedStyle(mark).backgroundColor, marks: pre.querySelectorAll('mark').length,
            inside: box.width > 0 && box.left >= outer.left && box.right <= outer.right && box.top >= outer.top,
        };
    }"""
    )
    content = seeded.records["req-finance"].messages[found["message"]].content
    assert found["marked"] == "billed to the buyer" == content[found["start"] : found["end"]]
    assert found["before"] == content[found["body"] : found["start"]]
    assert found["marks"] == 1 and found["inside"] and found["background"] == HIGHLIGHT
    # a cut chunk: the cut mark, then the unsent text with the span in it
    w.page.goto(f"{desk_url}/entries/{seeded.ids[ReasonCode.SPAN_TRUNCATED]}")
    assert w.page.is_visible("#cited .cut-mark")
    assert w.page.inner_text("#cited mark.cut-span") == "billed at the standard hourly rate"
    assert "after 84 characters" in w.page.inner_text("#cited p.note")


# --- the keyboard ---------------------------------------------------------------------------------------------


def test_resolve_with_the_keyboard(new_page: Callable[..., Watched], desk_url: str, seeded: Seeded) -> None:
    w = new_page()
    sign_in(w, desk_url)
    page, queue = w.page, seeded.desk.queue
    order = [r.entry.id for r in seeded.desk.browser.page(QueueFilter(), limit=50).rows]
    page.keyboard.press("j")
    assert page.get_attribute("tr.row.selected", "data-entry") == order[0]
    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(f".*/entries/{order[0]}.*"))
    assert page.is_visible("text=a accept") and page.inner_text("#shortcuts").count("escalate") == 1

    page.keyboard.press("a")  # accept, and on to the next open entry
    page.wait_for_url(re.compile(f".*/entries/{order[1]}.*"))
    assert "Recorded accept" in page.inner_text("p.done")
    assert [(e.outcome, e.reviewer) for e in queue.history(order[0])] == [("accept", "alice")]

    page.keyboard.press("r")  # a repair needs a note: the note field gets the focus
    assert page.evaluate("document.activeElement.id") == "note"
    assert "needs a note" in page.inner_text("#hint")
    page.keyboard.type("narrow it to Europe")
    page.keyboard.press("Escape")
    page.keyboard.press("r")
    page.wait_for_url(re.compile(f".*/entries/{order[2]}.*"))
    assert [(e.outcome, e.note) for e in queue.history(order[1])] == [("repair", "narrow it to Europe")]

    page.keyboard.press("e")  # an escalation needs a category
    assert page.evaluate("document.activeElement.id") == "category"
    page.keyboard.press("Escape")
    page.keyboard.press("c")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.input_value("#category") == "truncation"
    page.keyboard.press("Escape")
    page.keyboard.press("e")
    page.wait_for_url(re.compile(f".*/entries/{order[3]}.*"))
    assert [(e.outcome, e.category) for e in queue.history(order[2])] == [("escalate", "truncation")]

    page.keyboard.press("k")  # the previous *open* entry: the three just resolved have left the open list
    page.wait_for_url(re.compile(f".*/entries/{order[3]}.*"))
    page.keyboard.press("?")
    assert page.is_visible("#shortcuts")
    page.keyboard.press("u")  # back to the queue
    page.wait_for_url(re.compile(r".*/(\?.*)?$"))
    listed = page.eval_on_selector_all("tr.row", "rows => rows.map(r => r.dataset.entry)")
    assert listed == order[3:]
    page.goto(f"{desk_url}/entries/{order[2]}?status=all")
    assert "escalate" in page.inner_text("#history") and "alice" in page.inner_text("#history")
    assert w.dialogs == [] and w.errors == [] and w.violations() == []


def test_two_reviewers_on_one_entry(new_page: Callable[..., Watched], desk_url: str, seeded: Seeded) -> None:
    alice, bob = new_page(), new_page()
    entry_id = seeded.ids[ReasonCode.UNCERTAIN_SUPPORT]
    sign_in(alice, desk_url, "alice", f"/entries/{entry_id}")
    sign_in(bob, desk_url, "bob", f"/entries/{entry_id}")
    alice.page.keyboard.press("a")
    alice.page.wait_for_url(re.compile(r".*done=.*"))
    with bob.page.expect_response(re.compile(f".*/entries/{entry_id}/outcome")) as answer:
        bob.page.keyboard.press("a")
    assert answer.value.status == 409
    bob.page.wait_for_load_state()
    problem = bob.page.inner_text("#problem")
    assert "resolved by alice as accept" in problem and "yours was not recorded" in problem
    assert "by alice" in bob.page.inner_text("#history")
    assert [(e.outcome, e.reviewer) for e in seeded.desk.queue.history(entry_id)] == [("accept", "alice")]


# --- metrics and export ---------------------------------------------------------------------------------------


def test_the_metrics_page(new_page: Callable[..., Watched], desk_url: str, seeded: Seeded) -> None:
    w = new_page()
    sign_in(w, desk_url, path="/metrics")
    page = w.page
    assert page.locator("figure.chart svg").count() == 4
    report = metrics_from_store(seeded.db)
    precision = report.get("citation_precision")
    assert page.inner_text("#metrics-all tr[data-metric=citation_precision] td.num") == precision.formatted()
    tips = page.eval_on_selector_all("figure.chart rect title", "els => els.map(e => e.textContent)")
    assert f"citation precision — all: {precision.formatted()}" in tips
    heights = page.eval_on_selector_all("rect.bar-0", "els => els.map(e => e.getBoundingClientRect().height)")
    assert heights and max(heights) > 50  # drawn, not empty
    page.select_option("select[name=surface]", "support")
    page.click("form.filters button")
    page.wait_for_url(re.compile(r".*surface=support.*"))
    assert "surface support" in page.inner_text("h1")
    assert w.dialogs == [] and w.errors == [] and w.violations() == []


def test_export_the_fix_list_and_the_labels(
    new_page: Callable[..., Watched], desk_url: str, seeded: Seeded, tmp_path: Path
) -> None:
    w = new_page(accept_downloads=True)
    judged = seeded.ids[ReasonCode.UNSUPPORTED]
    sign_in(w, desk_url, path=f"/entries/{judged}")
    w.page.keyboard.press("a")
    w.page.wait_for_url(re.compile(r".*done=.*"))
    w.page.goto(desk_url + "/export")
    files = {}
    for link in ("#export-csv", "#export-jsonl", "#export-labels"):
        with w.page.expect_download() as download:
            w.page.click(link)
        path = tmp_path / download.value.suggested_filename
        download.value.save_as(path)
        files[link] = path
    rows = list(csv.DictReader(io.StringIO(files["#export-csv"].read_text(encoding="utf-8"))))
    assert tuple(rows[0]) == FIX_LIST_COLUMNS
    assert [(r["entry_id"], r["outcome"], r["reviewer"]) for r in rows] == [(judged, "accept", "alice")]
    lines = [json.loads(line) for line in files["#export-jsonl"].read_text(encoding="utf-8").splitlines()]
    assert [line["claim"] for line in lines] == ["The seller pays for freight."]
    labels = read_labels(files["#export-labels"])
    assert [(i.claim, i.label) for i in labels.items] == [("The seller pays for freight.", "yes")]
    run = CliRunner().invoke(
        cli, ["calibrate", "--format", "labels", str(files["#export-labels"]), "--json", "--bootstrap", "10"]
    )
    assert run.exit_code == 0, run.output
    report = json.loads(run.stdout)
    # the human said yes where the judge said no: the sample calibration needs
    assert report["n"] == 1 and report["confusion"]["yes"]["no"] == 1


# --- who may see what, CSRF -----------------------------------------------------------------------------------


def test_a_signed_out_visitor_sees_only_the_sign_in_page(
    new_page: Callable[..., Watched], desk_url: str, seeded: Seeded
) -> None:
    w = new_page()
    entry_id = seeded.ids[ReasonCode.WRONG_CHUNK]
    for path in ["/", f"/entries/{entry_id}", "/metrics", "/export", "/prompts/req-finance"]:
        w.page.goto(desk_url + path)
        assert w.page.url.startswith(desk_url + "/login")
        assert w.page.locator("form input[name=password]").count() == 1
        text = w.page.inner_text("body")
        assert "Sign in" in text and "Operating margins" not in text and "freight" not in text
        assert w.page.locator("a[href='/metrics'], a[href='/export']").count() == 0
    response = w.page.goto(desk_url + "/api/v1/queue")
    assert response is not None and response.status == 401
    assert "freight" not in w.page.inner_text("body")


def _attacker(target: str, entry_id: str) -> Any:
    """An ASGI app serving a page that silently posts an outcome to the desk when opened."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    html = (
        f'<form id="f" method="post" action="{target}/entries/{entry_id}/outcome">'
        '<input name="outcome" value="accept"><input name="revision" value=""></form>'
        "<script>document.getElementById('f').submit()</script>"
    )

    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse(html)

    return Starlette(routes=[Route("/", page)])


def test_csrf_without_a_token_is_refused(new_page: Callable[..., Watched], desk_url: str, seeded: Seeded) -> None:
    w = new_page()
    entry_id = seeded.ids[ReasonCode.WRONG_CHUNK]
    sign_in(w, desk_url, path=f"/entries/{entry_id}")
    # 1. a form on the desk's own origin without the token (e.g. injected by a browser extension)
    with w.page.expect_navigation():
        w.page.evaluate(
            """id => { const f = document.createElement('form'); f.method = 'post';
            f.action = '/entries/' + id + '/outcome';
            for (const [k, v] of [['outcome', 'accept'], ['revision', '']]) {
                const i = document.createElement('input'); i.name = k; i.value = v; f.appendChild(i); }
            document.body.appendChild(f); f.submit(); }""",
            entry_id,
        )
    assert "Request refused (CSRF)" in w.page.inner_text("h1")
    # 2. another site's page posting to the desk: the SameSite=Strict cookie is not even sent
    # 3. the same site on another port: the cookie is sent, the Origin is not the desk's
    port = desk_url.rsplit(":", 1)[1]
    for host, status_text in (("localhost", "Sign in"), ("127.0.0.1", "Request refused (CSRF)")):
        with live_server(_attacker(desk_url, entry_id)) as evil:
            w.page.goto(evil.replace("127.0.0.1", host) + "/")
            w.page.wait_for_url(re.compile(f".*:{port}/.*"))
            w.page.wait_for_load_state()
            assert status_text in w.page.inner_text("h1"), host
    assert seeded.desk.queue.history(entry_id) == []


# --- untrusted text -------------------------------------------------------------------------------------------

PAYLOADS = [
    "<script>window.__xss=(window.__xss||0)+1;alert('script')</script>",
    "<img src=x onerror=\"window.__xss=1;alert('img')\">",
    "<svg onload=alert('svg')>",
    "<svg><script>alert('svg-script')</script></svg>",
    '"><script>alert("attr-break")</script>',
    "'><img src=x onerror=alert('single-quote-break')>",
    "<a href=\"javascript:alert('link')\">click me</a>",
    "javascript:alert('bare-url')",
    "<iframe src=\"javascript:alert('iframe')\"></iframe>",
    "<body onload=alert('body')>",
    "<details open ontoggle=alert('details')>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert('mxss')>",
    "<style>*{display:none}</style>",
    "</textarea><script>alert('textarea-break')</script>",
    "</title><script>alert('title-break')</script>",
    "<input autofocus onfocus=alert('autofocus')>",
    "<object data=\"javascript:alert('object')\"></object>",
    "<embed src=\"javascript:alert('embed')\">",
    "<form action=\"javascript:alert('form')\"><button>go</button></form>",
    "{{ 7*7 }} {% if true %}ssti{% endif %}",
    "<!-- unclosed comment",
    "<div style=\"background:url(javascript:alert('css'))\">styled</div>",
    "&lt;script&gt;alert('entity')&lt;/script&gt;",
    "<scr<script>ipt>alert('nested')</scr</script>ipt>",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(\'meta\')">',
    "<base href=\"javascript:alert('base')//\">",
    "<template><img src=x onerror=alert('template')></template>",
    "<noscript><p title=\"</noscript><img src=x onerror=alert('noscript')>\">",
]


def _seed_payloads(seeded: Seeded) -> list[str]:
    """Payloads in claims, passages, spans, chunk ids, surfaces, details, judge answers and the answer itself."""
    desk = seeded.desk
    chunks = [Chunk(id=f"x{i}", text=f"Passage {i}: {p} Revenue grew.", rank=i) for i, p in enumerate(PAYLOADS)]
    chunks.append(Chunk(id="\"><svg/onload=alert('chunk-id')>", text="A chunk with a hostile id. Revenue grew."))
    record = serialize(assemble("<script>alert('question')</script>?", chunks), request_id="req-xss")
    claims = [
        {"text": f"Claim {i}: {p}", "citations": [{"chunk_id": f"x{i}", "span": p}]} for i, p in enumerate(PAYLOADS)
    ]
    claims.append({"text": "The hostile id says so.", "citations": [{"chunk_id": chunks[-1].id}]})
    log_and_guard(desk, record, {"claims": claims}, surface="<img src=x onerror=alert('surface')>")
    findings = [
        Finding(
            request_id="req-xss",
            prompt_sha256=record.sha256,
            reason=ReasonCode.UNSUPPORTED,
            layer=Layer.SUPPORT,
            claim_index=i,
            claim=f"Direct {i}: {p}",
            citation_index=0,
            chunk_id=f"x{i}",
            span=p,
            passage=chunks[i].text,
            related_chunk_id=chunks[-1].id,
            detail=f"detail {p}",
            verdicts={"support": p, p[:30]: "no"},
            judge_raw=f"no — {p}",
            judge_version=f"judge {p}",
        )
        for i, p in enumerate(PAYLOADS)
    ]
    desk.queue.enqueue(findings, surface=PAYLOADS[4])
    return [e.id for e, _ in desk.queue.items()]


XSS_PROBE = """() => ({
    xss: window.__xss || 0,
    scripts: [...document.scripts].map(s => s.getAttribute('src')),
    handlers: [...document.querySelectorAll('*')].flatMap(
        e => [...e.attributes].filter(a => a.name.startsWith('on')).map(a => e.tagName + '[' + a.name + ']')),
    jsLinks: [...document.querySelectorAll('[href],[src],[action],[data]')].filter(
        e => /^\\s*javascript:/i.test(e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action')
            || e.getAttribute('data') || '')).length,
    foreign: document.querySelectorAll(
        'iframe,object,embed,base,meta[http-equiv],template,noscript,math,details').length,
    styles: document.querySelectorAll('style,[style]').length,
    text: document.body.innerText,
})"""


def _strip_csp(route: Any) -> None:
    response = route.fetch(max_redirects=0)
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-security-policy"}
    route.fulfill(response=response, headers=headers)


@pytest.mark.parametrize("csp", ["kept", "stripped"])
def test_an_xss_corpus_executes_nothing(
    new_page: Callable[..., Watched], desk_url: str, seeded: Seeded, csp: str
) -> None:
    """Escaping alone must hold: the second run strips the Content Security Policy from every response."""
    assert len(PAYLOADS) >= 20
    ids = _seed_payloads(seeded)
    w = new_page()
    if csp == "stripped":
        w.page.route("**/*", _strip_csp)
    sign_in(w, desk_url)
    token = seeded.desk.accounts.open("bob", kind="token", lifetime=None)
    # notes: typed into the page by a reviewer, and sent through the API
    first, second = ids[0], ids[1]
    w.page.goto(f"{desk_url}/entries/{first}")
    w.page.fill("#note", PAYLOADS[0] + PAYLOADS[1])
    w.page.fill("#chunk_id", PAYLOADS[2])
    w.page.click("button.repair")
    w.page.wait_for_load_state()
    api = w.page.request.post(
        f"{desk_url}/api/v1/entries/{second}/outcome",
        data=json.dumps({"outcome": "repair", "note": PAYLOADS[5] + PAYLOADS[13], "chunk_id": PAYLOADS[14]}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert api.status == 201
    pages = [
        "/?status=all",
        "/metrics",
        "/export?status=resolved",
        "/prompts/req-xss",
        f"/prompts/req-xss?entry={first}",
    ]
    pages += [f"/entries/{entry_id}?status=all" for entry_id in ids]
    entry_text = {}
    for path in pages:
        w.page.goto(desk_url + path)
        w.page.wait_for_load_state()
        probe = w.page.evaluate(XSS_PROBE)
        if path.startswith("/entries/"):
            entry_text[path.split("/")[2].split("?")[0]] = probe["text"]
        assert probe["xss"] == 0, path
        assert probe["scripts"] == ["/static/review.js"], path
        assert probe["handlers"] == [] and probe["jsLinks"] == 0 and probe["foreign"] == 0, (path, probe)
        assert probe["styles"] == 0, path
    # every payload is shown as the text it is
    everything = "\n".join(entry_text.values())
    for payload in PAYLOADS:
        assert payload in everything, payload
    assert PAYLOADS[0] + PAYLOADS[1] in entry_text[first] and PAYLOADS[5] + PAYLOADS[13] in entry_text[second]
    assert w.dialogs == [] and w.errors == []
    if csp == "kept":
        assert w.violations() == []  # nothing even tried to run


# --- pictures for the docs ------------------------------------------------------------------------------------


def test_screenshots(new_page: Callable[..., Watched], desk_url: str, seeded: Seeded, tmp_path: Path) -> None:
    out = Path(os.environ.get("CITELOCK_REVIEW_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    w = new_page()
    w.page.set_viewport_size({"width": 1200, "height": 760})
    sign_in(w, desk_url)
    shots = {
        "queue.png": "/",
        "entry.png": f"/entries/{seeded.ids[ReasonCode.UNSUPPORTED]}",
        "metrics.png": "/metrics",
    }
    for name, path in shots.items():
        w.page.goto(desk_url + path)
        w.page.wait_for_load_state()
        w.page.screenshot(path=str(out / name), full_page=False)
        _shrink(out / name)
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and 8_000 < len(data) < 400_000, (name, len(data))


def _shrink(path: Path) -> None:
    """A 64-colour palette PNG: a third of the size, and the docs' pictures stay small (Pillow, if present)."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib (the eval extra)
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
