"""The judged relevance check against a real OpenAI-compatible server (llama-cpp-python on 127.0.0.1).

Asserted: the plumbing (the request carries the rigid prompt with the question and the claims and nothing else,
the verdict is parsed as one of three words, the route and the finding follow the label), never the tiny
model's competence (which label it picks).
"""

from __future__ import annotations

import json

import pytest

from citelock import Guard, ReasonCode, SurfacePolicy, assemble, serialize
from citelock.judges import OpenAICompleter, RelevanceJudge
from citelock.records import Layer
from citelock.runtime import ManagedServer

pytestmark = pytest.mark.server

CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-3", "text": "Harlow's city council voted 7 to 2 to raise the bridge toll to $3.50 in 2023."},
]
ROUTES = {"yes": "pass", "partial": "review", "no": "fail"}


def test_the_relevance_judge_over_a_real_server(llama_server: ManagedServer) -> None:
    completer = OpenAICompleter(base_url=llama_server.base_url, timeout=300)
    judge = RelevanceJudge(completer)
    policy = SurfacePolicy(name="docs", stakes="low", sample_rate=0.0, relevance="judged")
    guard = Guard(policy, relevance_judge=judge)
    question = "How long is the Aurora Bridge?"
    claim = "The Aurora Bridge opened to traffic in 1932."
    record = serialize(assemble(question, CHUNKS))
    answer = {"claims": [{"text": claim, "citations": [{"chunk_id": "c-1", "span": claim}]}]}
    result = guard.run(record, answer)
    check = result.relevance
    assert check is not None and check.judge_label in ROUTES
    assert check.route == ROUTES[check.judge_label]
    assert check.judge_version == f"relevance.v1/llama-cpp-python:{llama_server.model_name}"
    sent = completer.last_request
    assert sent["messages"] == judge.messages(question, [claim])
    text = json.dumps(sent["messages"])
    assert "880 meters" not in text and "toll" not in text  # no passage, no other chunk
    off = [f for f in result.report.findings if f.reason is ReasonCode.OFF_QUESTION]
    assert len(off) == (check.route != "pass")
    for finding in off:
        assert finding.layer is Layer.RELEVANCE and finding.verdicts["relevance_judge"] == check.judge_label
        assert finding.judge_raw == check.judge_raw
    assert not [f for f in result.report.findings if f.reason is ReasonCode.CHECK_ERROR]
