"""The gateway's early abstention: on a high-stakes surface a request whose chunks hold nothing relevant to the
question is answered without calling the upstream (the fake upstream keeps every request body it receives).

Both doors ask the wrapped client's runner: the streamed one through its stream job, the whole-answer one before
it sends."""

from __future__ import annotations

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

CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-3", "text": "Harlow's city council voted 7 to 2 to raise the bridge toll to $3.50 in 2023."},
]
MESSAGES = [{"role": "user", "content": "What is the population of Harlow?"}]
SURFACE = GatewaySurface(policy=citelock.SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim"))


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with fake_upstream() as up:
        yield up


@pytest.fixture
def gateway(upstream: Upstream, tmp_path: Path) -> Iterator[str]:
    with served_surface(SURFACE, upstream.url, str(tmp_path / "gw.db")) as url:
        yield url


def _client(url: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)


def test_a_streamed_request_with_nothing_relevant_never_reaches_the_upstream(gateway: str, upstream: Upstream) -> None:
    stream = _client(gateway).chat.completions.create(
        model="good", messages=MESSAGES, stream=True, extra_body={"citelock": {"chunks": CHUNKS}}
    )
    chunks = list(stream)
    assert upstream.seen == []
    verdict = chunks[-1].model_extra["citelock"]
    assert verdict["result"]["abstention"] == "pipeline"
    assert verdict["rendered"] == ABSTENTION_TEXT


def test_a_whole_request_with_nothing_relevant_never_reaches_the_upstream(gateway: str, upstream: Upstream) -> None:
    reply = _client(gateway).chat.completions.create(
        model="good", messages=MESSAGES, extra_body={"citelock": {"chunks": CHUNKS}}
    )
    assert upstream.seen == []
    assert reply.model_extra["citelock"]["result"]["abstention"] == "pipeline"
