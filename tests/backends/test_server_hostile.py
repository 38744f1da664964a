"""Hostile chunk texts and spans by construction through the real llama.cpp server (``@pytest.mark.server``).

- Every span policy through the grammar delivery, and the JSON Schema deliveries, on chunks holding backslashes,
  quotes, control characters, astral characters, RTL marks, GBNF and Lark metacharacters, injected JSON and a
  10,000-character chunk: the server never dies, every answer parses or fails with a typed error, a constraint
  is never dropped without a recorded reason, and every enforced answer cites only the prompt, verbatim.
- The ``substring`` policy through the server's ``grammar`` parameter on the example questions: zero fabricated
  ids and zero non-verbatim spans, every output re-verified here from its raw text.
- Requests that would have killed an unguarded llama-cpp-python server (a grammar that does not parse, a schema
  whose enum holds a quote) are refused or answered, and the server keeps serving.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock.backends._openai import OpenAIBackend
from citelock.constraint import POLICY_ORDER, SchemaOptions
from citelock.runtime import PROFILES, ManagedServer
from citelock.text import normalize
from support.hostile import SERVER_QUESTIONS, chunks_for

pytestmark = pytest.mark.server
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

OPTS = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=40, max_span_chars=40)
MUST_ANSWER = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=40, max_span_chars=40, min_claims=1)
MAX_TOKENS = 64
FABRICATED = {"ID_NOT_IN_PROMPT", "FABRICATED_ID", "STALE_ID"}
NOT_VERBATIM = {"SPAN_NOT_IN_CHUNK", "SPAN_TRUNCATED", "SPAN_ONLY_IN_QUESTION", "SPAN_IN_OTHER_CHUNK"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Capture:
    """Records every chat-completions body the client sends."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> None:
        if request.url.path.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))

    def client(self, server: ManagedServer) -> Any:
        http = openai.DefaultHttpxClient(event_hooks={"request": [self]})
        return openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=300, http_client=http)


def _literals(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [v for v in node.get("enum", []) if isinstance(v, str)] + (
            [node["const"]] if isinstance(node.get("const"), str) else []
        )
        return own + [x for v in node.values() for x in _literals(v)]
    if isinstance(node, list):
        return [x for v in node for x in _literals(v)]
    return []


def _sent_schema(body: dict[str, Any]) -> Any:
    if "response_format" in body:
        return body["response_format"]["schema"]
    return body["tools"][0]["function"]["parameters"]


RUNS = [("grammar", policy) for policy in POLICY_ORDER] + [
    ("json_object_schema", "substring"),
    ("tool_call", "sentence"),
]


def test_hostile_chunks_never_kill_the_server_nor_drop_a_constraint(llama_server: ManagedServer) -> None:
    pid = llama_server.pid
    outcomes: Counter[str] = Counter()
    capture = Capture()
    backends = {
        delivery: OpenAIBackend.from_client(
            capture.client(llama_server), server="llama-cpp-python", delivery=delivery, temperature=0.8, seed=11
        )
        for delivery in {d for d, _ in RUNS}
    }
    # question by question, every run in a row: the server reuses the prompt's prefix (the 10,000-character chunk
    # is read once, not once per run)
    for question, ids in SERVER_QUESTIONS:
        chunks = chunks_for(ids)
        for delivery, policy in RUNS:
            backend = backends[delivery]
            sent_before = len(capture.bodies)
            try:
                result = citelock.answer(
                    question,
                    chunks,
                    backend=backend,
                    policy=policy,
                    options=OPTS,
                    max_tokens=MAX_TOKENS,  # type: ignore[arg-type]
                )
            except citelock.CitelockError as exc:
                # typed, and never the server going away
                assert not isinstance(exc, citelock.BackendConnectionError), (delivery, policy, ids, exc)
                assert isinstance(exc, citelock.TruncatedOutputError | citelock.UsageError), (delivery, policy, exc)
                outcomes[f"{type(exc).__name__}"] += 1
                continue
            finally:
                assert llama_server.running and llama_server.pid == pid, f"the server died on {delivery}/{policy}/{ids}"
            outcomes["answered"] += 1
            # a weaker policy than asked always says why
            assert (result.span_policy == policy) == (result.downgrade_reason is None), result.downgrade_reason
            body = capture.bodies[sent_before]
            if delivery == "grammar":
                assert result.span_policy == policy and body["grammar"].startswith("root ::= ")
            else:  # nothing the server's converter mis-escapes is ever sent to it
                unsafe = [v for v in _literals(_sent_schema(body)) if any(c in v for c in '"\\\x01\x07\x7f🦉😀')]
                assert unsafe == [], unsafe
            if not result.generation.enforced:  # reported, never trusted
                assert any(n.startswith("constraint not enforced") for n in result.generation.notes)
                continue
            codes = {f.reason.value for f in result.findings}
            forbidden = FABRICATED if result.span_policy == "id" else FABRICATED | NOT_VERBATIM  # id: free spans
            assert not codes & forbidden, (delivery, policy, ids, codes, result.answer.raw)
    print(f"\n[server] hostile corpus: {dict(outcomes)} over {len(RUNS) * len(SERVER_QUESTIONS)} requests")
    assert outcomes["answered"] >= len(RUNS) * len(SERVER_QUESTIONS) * 0.8, outcomes


def test_substring_spans_by_construction_through_the_grammar_parameter(
    llama_server: ManagedServer, tmp_path: Path
) -> None:
    corpus = {
        row["id"]: row for row in map(json.loads, (EXAMPLES / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
    }
    questions = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    capture = Capture()
    backend = OpenAIBackend.from_client(
        capture.client(llama_server), server="llama-cpp-python", temperature=0.8, seed=5
    )
    log = citelock.PromptLog(tmp_path / "log.db")
    stats: Counter[str] = Counter()
    for item in questions:
        chunks = [corpus[i] for i in item["chunks"]]
        try:
            result = citelock.answer(
                item["question"],
                chunks,
                backend=backend,
                policy="substring",
                options=MUST_ANSWER,  # the GBNF has no abstention: every answer writes a span, by construction
                log=log,  # max_tokens: the schema's bound, so a whole answer fits whatever the model writes
            )
        except citelock.TruncatedOutputError:
            stats["truncated"] += 1
            continue
        stats["answers"] += 1
        assert result.span_policy == "substring" and result.generation.enforced
        assert capture.bodies[-1]["grammar"] and "response_format" not in capture.bodies[-1]
        codes = Counter(f.reason.value for f in result.findings)
        stats["fabricated"] += sum(codes[c] for c in FABRICATED)
        stats["non_verbatim"] += sum(codes[c] for c in NOT_VERBATIM)
        # re-verified here, from the raw output alone: every id is in this prompt, every span verbatim in its chunk
        texts = {c["id"]: normalize(c["text"]) for c in chunks}
        for claim in json.loads(result.answer.raw)["claims"]:
            stats["claims"] += 1
            for cite in claim["citations"]:
                stats["citations"] += 1
                assert cite["chunk_id"] in texts, cite
                assert cite["span"].strip() and cite["span"] in texts[cite["chunk_id"]], cite
                assert len(cite["span"]) <= OPTS.max_span_chars
        stats["abstained"] += result.answer.abstained
    print(f"\n[server] substring via grammar: {dict(stats)}")
    assert stats["answers"] >= 30 and stats["fabricated"] == 0 and stats["non_verbatim"] == 0, stats
    assert stats["abstained"] == 0 and stats["citations"] >= stats["answers"], stats  # min_claims=1 held


def test_requests_that_killed_the_unguarded_server_are_refused_or_answered(llama_server: ManagedServer) -> None:
    url = f"{llama_server.base_url}/chat/completions"
    messages = [{"role": "user", "content": "Answer."}]
    pid = llama_server.pid
    bad = httpx.post(url, json={"messages": messages, "max_tokens": 8, "grammar": 'root ::= "unterminated'}, timeout=60)
    assert bad.status_code == 500 and "failed to parse grammar" in bad.json()["error"]["message"]
    value = 'She said "hi" in C:\\Users\\notes'
    schema = {"type": "object", "properties": {"v": {"enum": [value]}}, "required": ["v"]}
    ok = httpx.post(
        url,
        json={
            "messages": messages,
            "max_tokens": 40,
            "temperature": 0,
            "response_format": {"type": "json_object", "schema": schema},
        },
        timeout=60,
    )
    assert ok.status_code == 200
    assert json.loads(ok.json()["choices"][0]["message"]["content"]) == {"v": value}  # escaped right, not just alive
    assert llama_server.running and llama_server.pid == pid
    # and through citelock's transport: a refused grammar is a typed, non-retryable error
    backend = OpenAIBackend(base_url=llama_server.base_url, server="llama-cpp-python")
    payload = backend.transport.payload(messages, max_tokens=8, temperature=0.0) | {"grammar": 'root ::= "x'}
    with pytest.raises(citelock.SchemaRejectedError) as info:
        backend.transport.complete(payload)
    assert info.value.status == 500 and not info.value.retryable
    assert llama_server.running and llama_server.pid == pid


def test_a_json_schema_delivery_downgrades_what_the_converter_mis_escapes(llama_server: ManagedServer) -> None:
    capture = Capture()
    backend = OpenAIBackend.from_client(
        capture.client(llama_server), server="llama-cpp-python", delivery="json_object_schema"
    )
    result = citelock.answer(
        "What did she say?",
        chunks_for(["dq", "bs"]),
        backend=backend,
        policy="sentence",
        options=OPTS,
        max_tokens=MAX_TOKENS,
    )
    assert result.requested_policy == "sentence" and result.span_policy == "id"
    reason = result.downgrade_reason or ""
    assert "sentence schema: the value" in reason and "which this server's schema converter mis-escapes" in reason
    assert PROFILES["llama-cpp-python"].limits.unsafe_literal_chars is not None
    assert llama_server.running
