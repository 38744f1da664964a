"""citelock.wrap against a real llama-cpp-python server on 127.0.0.1 (``@pytest.mark.server``).

The application's own call: its own system prompt, a three-turn history, this turn's passages in its own user
message in its own format. Over ``CITELOCK_WRAP_REQUESTS`` (default 25) generations per span policy (substring,
sentence: 50 in all) plus five async ones, what the constraint and the wrapper guarantee is asserted: no
fabricated id, no non-verbatim span, every HTTP request body carries exactly the caller's messages and the
injected grammar, and the logged record holds exactly those messages and that constraint. Which chunk the model
cites, how many claims it makes or whether it abstains is never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock._wrap import BLOCKED_TEXT
from citelock.reasons import codes_in
from citelock.runtime._server import ManagedServer

pytestmark = pytest.mark.server
openai = pytest.importorskip("openai")

REQUESTS = int(os.environ.get("CITELOCK_WRAP_REQUESTS", "25"))
OPTS = citelock.SchemaOptions(max_claims=1, max_citations=1, max_text_chars=40, max_span_chars=60)
FABRICATED = {"ID_NOT_IN_PROMPT", "FABRICATED_ID", "STALE_ID"}
NOT_VERBATIM = {code.value for code in codes_in("span")}
SYSTEM = "You are the help desk of the Harlow county archive. Answer briefly and only from the passages."
_THINGS = ["bridge", "library", "museum", "harbour", "station", "plant", "tower", "school", "market", "theatre"]
_TOWNS = ["Arden", "Belmont", "Corran", "Dunmore", "Elsby", "Fenwick", "Garrow", "Hollin", "Ivel", "Jarrow"]


def case(n: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The caller's messages (system, three earlier turns, this turn with its passages) and this turn's chunks."""
    rng = random.Random(n)
    chunks = []
    for k in range(rng.choice([2, 3])):
        thing, town = rng.choice(_THINGS), rng.choice(_TOWNS)
        year, staff = rng.randint(1900, 2020), rng.randint(5, 400)
        chunks.append({"id": f"doc{n}-{k}", "text": f"The {town} {thing} opened in {year}. It employs {staff} people."})
    first = chunks[0]["text"].split(" opened")[0].removeprefix("The ")
    passages = "\n".join(f"#{c['id']} | {c['text']}" for c in chunks)
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hello, can you help me with local history?"},
        {"role": "assistant", "content": "Of course. Ask me about any building in the county."},
        {"role": "user", "content": f"I am researching the {first}."},
        {"role": "assistant", "content": "Good choice; the archive has a file on it."},
        {"role": "user", "content": "Is it still open today?"},
        {"role": "assistant", "content": "The file does not say whether it is open today."},
        {"role": "user", "content": f"Passages:\n{passages}\n\nWhen did the {first} open?"},
    ]
    return messages, chunks


class Capture:
    """Records every chat-completions request body the client sends."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> None:
        if request.url.path.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))

    async def acall(self, request: Any) -> None:
        self(request)


def check_call(response: Any, messages: list[dict[str, str]], body: dict[str, Any], log: citelock.PromptLog) -> None:
    """What the wrapper guarantees about one call, whatever the model chose."""
    guarded = response.citelock
    assert body["messages"] == messages  # the caller's messages exactly: every chunk was in them
    record = log.get(guarded.request_id)
    assert [{"role": m.role, "content": m.content} for m in record.messages] == messages
    injected = record.metadata["wrap"]
    assert injected["context_message"] is None
    assert injected["constraint"] == {key: body[key] for key in injected["constraint"]} and "grammar" in body
    assert all(pc.status == "complete" for pc in record.chunks)
    assert guarded.generation.enforced
    shown = guarded.rendered if guarded.served else BLOCKED_TEXT
    assert response.choices[0].message.content == shown


def run(client: Any, capture: Capture, log: citelock.PromptLog, policy: str, offset: int) -> Counter[str]:
    reasons: Counter[str] = Counter()
    for n in range(offset, offset + REQUESTS):
        messages, chunks = case(n)
        response = client.chat.completions.create(
            model="local", messages=messages, chunks=chunks, temperature=0.7, seed=n, citelock_policy=policy
        )
        check_call(response, messages, capture.bodies[-1], log)
        assert response.citelock.span_policy == policy
        reasons.update(f.reason.value for f in response.citelock.findings)
    return reasons


@pytest.mark.parametrize("policy", ["substring", "sentence"])
def test_wrap_never_fabricates_on_the_real_server(llama_server: ManagedServer, tmp_path: Path, policy: str) -> None:
    capture = Capture()
    http = openai.DefaultHttpxClient(event_hooks={"request": [capture]})
    own = openai.OpenAI(base_url=llama_server.base_url, api_key="local", max_retries=0, timeout=300, http_client=http)
    log = citelock.PromptLog(tmp_path / "log.db")
    client = citelock.wrap(own, server="llama-cpp-python", log=log, options=OPTS)
    reasons = run(client, capture, log, policy, offset=0 if policy == "substring" else 1000)
    print(f"\n[wrap] {policy}: {REQUESTS} generations, findings {dict(reasons)}")
    assert len(capture.bodies) == REQUESTS and len(log) == REQUESTS
    assert sum(reasons[r] for r in FABRICATED) == 0, reasons
    assert sum(reasons[r] for r in NOT_VERBATIM) == 0, reasons


def test_wrap_async_on_the_real_server(llama_server: ManagedServer, tmp_path: Path) -> None:
    capture = Capture()
    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [capture.acall]})
    own = openai.AsyncOpenAI(
        base_url=llama_server.base_url, api_key="local", max_retries=0, timeout=300, http_client=http
    )
    log = citelock.PromptLog(tmp_path / "log.db")
    client = citelock.wrap(own, server="llama-cpp-python", log=log, options=OPTS, policy="substring")

    async def main() -> list[tuple[Any, list[dict[str, str]]]]:
        out = []
        for n in range(2000, 2005):
            messages, chunks = case(n)
            response = await client.chat.completions.create(model="local", messages=messages, chunks=chunks)
            out.append((response, messages))
        return out

    results = asyncio.run(main())
    for (response, messages), body in zip(results, capture.bodies, strict=True):
        check_call(response, messages, body, log)
        reasons = {f.reason.value for f in response.citelock.findings}
        assert not reasons & (FABRICATED | NOT_VERBATIM), reasons


ROOT = Path(__file__).resolve().parents[2]


def _example(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(ROOT / "examples" / name), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_wrap_example_runs_against_the_real_server(llama_server: ManagedServer, tmp_path: Path) -> None:
    out = _example("wrap_example.py", "--base-url", llama_server.base_url, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    decision = out.stdout.strip().splitlines()[-2]
    assert decision.startswith("decision: ") and "enforced: True" in decision
    assert (tmp_path / ".citelock" / "citelock.db").is_file()


@pytest.mark.parametrize("how", ["instructor", "sdk"])
def test_the_own_call_example_runs_against_the_real_server(
    llama_server: ManagedServer, tmp_path: Path, how: str
) -> None:
    if how == "instructor":
        pytest.importorskip("instructor", reason='the instructor extra is missing: pip install "citelock[instructor]"')
    args = ["--base-url", llama_server.base_url, *(["--sdk"] if how == "sdk" else [])]
    out = _example("own_call_example.py", *args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("span policy: sentence; findings: ")
    findings = json.loads(last.split("findings: ", 1)[1].replace("'", '"'))
    assert not set(findings) & (FABRICATED | NOT_VERBATIM), findings  # the schema admits only these ids, sentences
