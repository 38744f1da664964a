"""The gateway ranks its grammar as ``Citelock.answer`` does (issue #35 item 4): a high-stakes ``quote`` surface
whose ranked grammar admits no sentence for a question does not call the upstream at either door, although the
chunks are relevant enough not to abstain on relevance alone; a question the grammar admits a sentence for is sent
with the constraint ``answer`` builds (only the admitted sentence is quotable)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock.gateway import GatewaySurface
from citelock.pipeline import ABSTENTION_TEXT
from support.fake_upstream import Upstream, fake_upstream
from support.gateway_server import served_surface

openai = pytest.importorskip("openai")

PARAGRAPH = (
    "The final was a football game to decide the champion of the league for the 2015 season. "
    "The final was played on February 7, 2016, at Harbor Stadium in Santa Clara, California. "
    "The home side defeated the visitors 24 to 10 to earn their third title."
)
CHUNKS = [
    {"id": "p-2", "text": "The league was founded in 1920. It has thirty-two member clubs across the country."},
    {"id": "p-1", "text": PARAGRAPH},
]
PLAYED = "The final was played on February 7, 2016, at Harbor Stadium in Santa Clara, California."
QUOTED = {"claims": [{"text": PLAYED, "citations": [{"chunk_id": "p-1"}]}]}
SURFACE = GatewaySurface(policy=citelock.SurfacePolicy(name="legal", stakes="high"), span_policy="quote")


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with fake_upstream(replies={"final": json.dumps(QUOTED)}) as up:
        yield up


@pytest.fixture
def gateway(upstream: Upstream, tmp_path: Path) -> Iterator[str]:
    with served_surface(SURFACE, upstream.url, str(tmp_path / "gw.db")) as url:
        yield url


def _create(url: str, question: str, model: str = "good", **extra: Any) -> Any:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    messages = [{"role": "user", "content": question}]
    return client.chat.completions.create(
        model=model, messages=messages, extra_body={"citelock": {"chunks": CHUNKS}}, **extra
    )


def test_a_question_the_ranked_grammar_admits_nothing_for_never_reaches_the_upstream(
    gateway: str, upstream: Upstream
) -> None:
    reply = _create(gateway, "Where did the final take place?")
    chunks = list(_create(gateway, "Where did the final take place?", stream=True))
    assert upstream.seen == []
    assert reply.model_extra["citelock"]["result"]["abstention"] == "pipeline"
    verdict = chunks[-1].model_extra["citelock"]
    assert verdict["result"]["abstention"] == "pipeline" and verdict["rendered"] == ABSTENTION_TEXT


def test_an_admitted_question_is_sent_with_the_ranked_grammar(gateway: str, upstream: Upstream) -> None:
    reply = _create(gateway, "When was the final played?", model="final")
    assert reply.model_extra["citelock"]["result"]["decision"] == "pass"
    assert len(upstream.seen) == 1
    body = upstream.seen[0]
    grammar = body.get("grammar") or body.get("extra_body", {}).get("grammar")
    assert isinstance(grammar, str)
    assert '"played "' in grammar and '"founded "' not in grammar  # only the admitted sentence is quotable
