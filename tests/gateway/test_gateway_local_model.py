"""``citelock gateway`` with no upstream answers the README's question through the bundled model (a real process).

What is asserted is what the constraint and the guard guarantee, never the model's wording: the answer is
quote-constrained (no citation can name an id outside this request's chunks), the response carries the decision
header and the ``citelock`` record, a served answer's content is the record's rendered text, and a blocked one is
OpenAI's error envelope. The caller's system prompt is kept: logged after the template's own, in the system message.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from citelock.prompt import lexical_top_k
from citelock.records import Chunk
from citelock.store import PromptLog
from support.gateway_server import gateway_process

pytestmark = pytest.mark.local_model

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "When did the Aurora Bridge open to traffic?"
SYSTEM = "You are the city archive's help desk; answer in one sentence."
FABRICATED = {"ID_NOT_IN_PROMPT", "FABRICATED_ID", "STALE_ID"}


def _chunks() -> list[dict[str, str]]:
    lines = (ROOT / "examples" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    corpus = [Chunk.model_validate_json(line) for line in lines if line.strip()]
    return [{"id": c.id, "text": c.text} for c in lexical_top_k(QUESTION, corpus, 4)]


def test_the_bundled_model_answers_the_readme_question_through_the_gateway(tmp_path: Path) -> None:
    chunks = _chunks()
    ids = {c["id"] for c in chunks}
    args = ["--db", str(tmp_path / "gw.db"), "--surface", "docs", "--stakes", "high", "--on-fail", "drop_claim"]
    with gateway_process(*args, "--policy", "quote") as url:
        models = httpx.get(f"{url}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["citelock-local"]
        # the caller's own system prompt is kept (after the template's), not refused
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        body = {"messages": messages, "citelock": {"chunks": chunks}}
        response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
        assert response.status_code in (200, 400), response.text
        decision = response.headers["x-citelock-decision"]
        if response.status_code == 400:
            assert response.json()["error"]["type"] == "citelock_blocked"  # blocked by the guard, not refused
        logged = PromptLog(tmp_path / "gw.db").get(response.headers["x-citelock-request-id"])
        assert logged.messages[0].role == "system" and logged.messages[0].content.endswith(SYSTEM)
        assert logged.template.version.endswith("+caller-system")
        assert response.headers["x-citelock-surface"] == "docs"
        record = response.json()["citelock"]
        assert record["span_policy"] == "quote" and record["result"]["decision"] == decision
        assert record["generation"]["enforced"] is True
        cited = {c["chunk_id"] for claim in record["answer"]["claims"] for c in claim["citations"]}
        assert cited <= ids  # by construction: only this request's ids
        assert not FABRICATED & {f["reason"] for f in record["result"]["report"]["findings"]}
        if response.status_code == 200:
            assert response.json()["choices"][0]["message"]["content"] == record["rendered"]
        else:
            assert response.json()["error"]["type"] == "citelock_blocked"

        streamed = httpx.post(f"{url}/v1/chat/completions", json={**body, "stream": True}, timeout=300)
        assert streamed.status_code == 200
        data = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
        last = json.loads(data[-2] if data[-1] == "[DONE]" else data[-1])
        assert last["citelock"]["span_policy"] == "quote"
        assert ("error" in last) == (data[-1] != "[DONE]")
