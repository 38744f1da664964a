"""A false fact dressed as talk never passes: a property test over generated dressings, through every door.

The generator (``scripts/fuzz_inputs.py``: ``dressed``) wraps a false statement about the chunk in up to three
prefixes (greetings, hedges, lead-ins: "Sure,", "You should know that", "Let me explain:"), two suffixes (a
final colon or question mark, tag questions, pleasantries) and markup (emphasis, headings, bullets, quotes), in
every combination. None of them passes :func:`citelock.check`, :meth:`citelock.Guard.run` on a high-stakes
surface, ``citelock check`` or ``citelock.wrap`` (plain and streamed, against a real HTTP server on 127.0.0.1).
Lines that hold nothing to check stay non-factual in any markup.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import citelock
from citelock import ReasonCode, record_from_messages
from citelock._wrap import BLOCKED_TEXT
from citelock.cli import app
from citelock.guard import check_coverage
from citelock.judges import LexicalJudge
from citelock.text import classify_claim
from support.scripts_loader import load_script

inputs = load_script("fuzz_inputs")

CHUNK = {"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932. It is made of steel."}
QUESTION = "When did the Aurora Bridge open?"
MESSAGES = [
    {"role": "system", "content": "Answer from the sources."},
    {"role": "user", "content": f"Sources:\n[c-1] {CHUNK['text']}\n\nQuestion: {QUESTION}"},
]
WRONG_NUMBERS = ["The Aurora Bridge opened to traffic in 1933", "The Aurora Bridge opened in 1931"]
FALSE_FACTS = [
    *WRONG_NUMBERS,
    "The Aurora Bridge never opened",
    "The Aurora Bridge is made of wood",
    "the bridge was never built",
    "The Aurora Bridge sank",  # a verb in no closed list, dressed as a heading or behind a label
    "Engineers rebuilt the Aurora Bridge in wood",
]
TRUE_CLAIM = {
    "text": "The Aurora Bridge opened to traffic in 1932.",
    "citations": [{"chunk_id": "c-1", "span": "The Aurora Bridge opened to traffic in 1932."}],
}
HIGH = citelock.SurfacePolicy(name="legal", stakes="high", on_fail="block")
DROP = citelock.SurfacePolicy(name="legal-drop", stakes="high", on_fail="drop_claim")
RECORD = record_from_messages(MESSAGES, [CHUNK], question=QUESTION, request_id="dressed-1")
FAST = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))

DRESSED = inputs.dressed(FALSE_FACTS)


def _numeric(line: str) -> bool:
    return any(fact.split()[-1] in line for fact in WRONG_NUMBERS)


@FAST
@given(DRESSED, st.booleans())
@example("You should know To answer your question, the Aurora Bridge never opened", False)  # was "advice"
@example("You should know to answer your question: the Aurora Bridge never opened", True)
def test_no_dressed_false_fact_passes_the_guard(line: str, structured: bool) -> None:
    answer: Any = {"claims": [{"text": line, "citations": []}]} if structured else line
    report = citelock.check(RECORD, answer)
    reasons = {f.reason for f in report.findings}
    assert not report.ok and ReasonCode.UNCITED_CLAIM in reasons, (line, reasons)
    if _numeric(line):  # a number in no chunk: a finding of its own, whatever coverage says
        assert ReasonCode.NUMBER_MISMATCH in reasons, (line, reasons)
    for policy in (HIGH, DROP):
        result = citelock.Guard(policy, LexicalJudge()).run(RECORD, answer)
        assert result.decision == "block" and not result.served, (line, policy.on_fail, result.decision)


@FAST
@given(DRESSED)
def test_a_dressed_false_fact_beside_a_true_claim_is_never_served(line: str) -> None:
    answer = {"claims": [TRUE_CLAIM, {"text": line, "citations": []}]}
    result = citelock.Guard(DROP, LexicalJudge()).run(RECORD, answer)
    outcome = result.claims[1]
    assert outcome.action == "drop" and ReasonCode.UNCITED_CLAIM in outcome.reasons, (line, outcome)


@FAST
@given(DRESSED)
def test_a_dressed_false_fact_above_a_true_claim_is_factual_in_context(line: str) -> None:
    """Coverage of the whole answer, where a marked or standalone line can read as a heading over the rest."""
    true_line = "The Aurora Bridge opened to traffic in 1932 [c-1]."
    structured = citelock.parse_answer({"claims": [{"text": line, "citations": []}, TRUE_CLAIM]})
    assert check_coverage(structured)[0].factual, (line, check_coverage(structured)[0])
    free = citelock.parse_answer(f"{line}\n{true_line}")  # the line may be more than one sentence ("Sure! It ...")
    kinds = [k for k, claim in zip(check_coverage(free), free.claims, strict=True) if (claim.start or 0) < len(line)]
    assert any(k.factual for k in kinds), (line, kinds)


@FAST
@given(inputs.dressed_non_factual())
def test_lines_with_nothing_to_check_stay_non_factual(line: str) -> None:
    assert not classify_claim(line).factual, (line, classify_claim(line))
    report = citelock.check(RECORD, {"claims": [TRUE_CLAIM, {"text": line, "citations": []}]})
    assert report.ok, (line, [f.reason for f in report.findings])


@pytest.mark.parametrize(
    "line",
    [
        "Sure, the Aurora Bridge opened to traffic in 1933.",
        "**The Aurora Bridge opened to traffic in 1933.**",
        "The Aurora Bridge opened to traffic in 1933:",
        "The Aurora Bridge opened to traffic in 1933?",
        "You should know that the Aurora Bridge opened to traffic in 1933.",
        "Let me explain: the Aurora Bridge opened to traffic in 1933.",
        "Okay, the Aurora Bridge opened to traffic in 1933.",
    ],
)
def test_the_issues_examples_are_blocked(line: str) -> None:
    """The variants of issue 34 item 1, each of which was served as ``pass``."""
    result = citelock.Guard(HIGH, LexicalJudge()).run(RECORD, {"claims": [{"text": line, "citations": []}]})
    assert result.decision == "block"
    assert {ReasonCode.UNCITED_CLAIM, ReasonCode.NUMBER_MISMATCH} <= {f.reason for f in result.report.findings}


# A heading or a label is no hiding place: whether a line is a heading does not depend on a closed list of verbs.
# "sank", "rebuilt", "broke", "bore" are in no such list; a sentence-case line states what it says.
HEADINGS_WITH_A_FACT = [
    "## The Aurora Bridge sank",
    "**The Aurora Bridge sank**",
    "### Engineers rebuilt the Aurora Bridge in wood",
    "## Acme bought the Aurora Bridge",
    "Key point: the Aurora Bridge sank",
    "**Key point:** the bridge deck broke",
    "Bottom line: the steel deck bore no traffic",
    "Key point: the dose is 5 mg",
]
TOPIC_HEADINGS = ["## Key Benefits", "### Side Effects of Aspirin", "## Overview", "**Side effects:**", "# History"]


@pytest.mark.parametrize("structured", [True, False])
@pytest.mark.parametrize("line", HEADINGS_WITH_A_FACT)
def test_a_heading_or_label_hides_no_fact_whatever_its_verb(line: str, structured: bool) -> None:
    """Beside a true cited claim (a heading over an answer, not a one-line answer), structured or free text."""
    assert classify_claim(line).factual and classify_claim(line, standalone_line=True).factual, line
    true_line = "The Aurora Bridge opened to traffic in 1932 [c-1]."
    answer: Any = {"claims": [{"text": line, "citations": []}, TRUE_CLAIM]} if structured else f"{line}\n{true_line}"
    result = citelock.Guard(DROP, LexicalJudge()).run(RECORD, answer)
    outcome = result.claims[0]
    assert outcome.action == "drop" and ReasonCode.UNCITED_CLAIM in outcome.reasons, (line, outcome)


@pytest.mark.parametrize("line", TOPIC_HEADINGS)
def test_a_topic_heading_stays_non_factual(line: str) -> None:
    """A heading over an answer (coverage of the whole answer; the guard checks each claim alone, as it streams)."""
    assert not classify_claim(line).factual and not classify_claim(line, standalone_line=True).factual, line
    for answer in ({"claims": [{"text": line, "citations": []}, TRUE_CLAIM]}, f"{line}\nIt opened in 1932 [c-1]."):
        assert not check_coverage(citelock.parse_answer(answer))[0].factual, (line, answer)


def test_the_real_non_factual_lines_stay_non_factual() -> None:
    for line in ("Here is what the sources say:", "I hope this helps!", "In summary:", "There are three cases:"):
        assert not classify_claim(line).factual, line


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dressed-cli")
    prompt = {"messages": MESSAGES, "chunks": [CHUNK], "question": QUESTION, "request_id": "dressed-cli"}
    (folder / "prompt.json").write_text(json.dumps(prompt), encoding="utf-8")
    return folder


@settings(FAST, max_examples=30)
@given(DRESSED, st.booleans())
def test_citelock_check_exits_1_on_every_dressed_false_fact(cli_files: Path, line: str, structured: bool) -> None:
    answer: Any = {"claims": [{"text": line, "citations": []}]} if structured else {"text": line}
    path = cli_files / "answer.json"
    path.write_text(json.dumps(answer), encoding="utf-8")
    args = ["check", "--prompt", str(cli_files / "prompt.json"), "--answer", str(path), "--json"]
    result = CliRunner().invoke(app, [*args, "--surface", "legal", "--stakes", "high", "--judge", "lexical"])
    assert result.exit_code == 1, (line, result.stdout[-400:], result.stderr[-400:])
    shown = json.loads(result.stdout)
    assert shown["decision"] == "block" and "UNCITED_CLAIM" in {f["reason"] for f in shown["findings"]}, line


class _Reply(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server that ignores every constraint and answers ``body`` (plain or as SSE)."""

    protocol_version = "HTTP/1.0"
    body = ""

    def do_GET(self) -> None:
        self._json({"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if not request.get("stream"):
            message = {"role": "assistant", "content": self.body}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
            self._json(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [choice],
                    "usage": usage,
                }
            )
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        pieces = [self.body[n : n + 7] for n in range(0, len(self.body), 7)]
        for n, piece in enumerate(pieces):
            finish = "stop" if n == len(pieces) - 1 else None
            chunk = {"id": "s", "object": "chat.completion.chunk", "created": 0, "model": "m",
                     "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": finish}]}  # fmt: skip
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def _json(self, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, type[_Reply]]]:
    handler = type("Handler", (_Reply,), {"body": ""})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def _client(url: str) -> Any:
    openai = pytest.importorskip("openai")
    http_client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
    return citelock.wrap(http_client, server="vllm", guard=citelock.Guard(HIGH, LexicalJudge()))


@settings(FAST, max_examples=15)
@given(DRESSED)
def test_wrap_never_serves_a_dressed_false_fact(server: tuple[str, type[_Reply]], line: str) -> None:
    url, handler = server
    handler.body = json.dumps({"claims": [{"text": line, "citations": []}]})
    response = _client(url).chat.completions.create(model="m", messages=[{"role": "user", "content": QUESTION}],
                                                   chunks=[CHUNK])  # fmt: skip
    assert not response.citelock.served and response.citelock.decision == "block", line
    assert response.choices[0].message.content == BLOCKED_TEXT


@settings(FAST, max_examples=10)
@given(DRESSED)
def test_wrap_stream_never_shows_a_dressed_false_fact(server: tuple[str, type[_Reply]], line: str) -> None:
    url, handler = server
    handler.body = json.dumps({"claims": [{"text": line, "citations": []}]})
    events = list(
        _client(url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": QUESTION}], chunks=[CHUNK], stream=True
        )
    )
    assert not [e for e in events if e.type == "claim.shown"], line
    done = events[-1]
    assert done.type == "done" and not done.answer.served and done.answer.decision == "block", line
