"""The LLM judge over an OpenAI-compatible server: unit tests on a scripted transport, then a real local server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.errors import BackendRefusalError, UsageError
from citelock.judges import JudgeOutputError, LLMJudge, OpenAICompleter, make_judge
from citelock.runtime import ManagedServer

pytest.importorskip("openai")
from support.openai_transport import Server, completion, scripted_client

CLAIM = "The plant opened in 1998."
PASSAGE = "The plant opened in 1998. It makes glass bottles."


def _completion(content: str | None, *, refusal: str | None = None, tool_args: str | None = None) -> dict[str, Any]:
    return completion(content, refusal=refusal, tool_args=tool_args, tool_name="verdict", completion_tokens=6)


def _completer(server: Server, kind: str = "llama-cpp-python", delivery: str | None = None) -> OpenAICompleter:
    return OpenAICompleter.from_client(scripted_client(server), model="m", server=kind, delivery=delivery)


def test_verdict_is_constrained_by_the_servers_schema_delivery() -> None:
    script = Server(_completion('{"verdict": "partial"}'))
    judge = LLMJudge(_completer(script))
    verdict = judge.judge(CLAIM, PASSAGE)
    assert verdict.label == "partial" and verdict.raw == "partial"
    assert verdict.version.endswith("llama-cpp-python:m")
    sent = script.bodies[0]
    assert sent["response_format"]["type"] == "json_object"
    assert sent["response_format"]["schema"]["properties"]["verdict"]["enum"] == ["yes", "partial", "no"]
    assert sent["max_tokens"] > judge.max_tokens  # room for the JSON around the word
    # the judge sees the claim and the passage and nothing else
    assert sent["messages"] == judge.prompt.messages(CLAIM, PASSAGE)


def test_openai_profile_uses_strict_json_schema() -> None:
    script = Server(_completion('{"verdict": "yes"}'))
    assert LLMJudge(_completer(script, "openai")).judge(CLAIM, PASSAGE).label == "yes"
    sent = script.bodies[0]
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["strict"] is True
    assert "max_completion_tokens" in sent


def test_tool_call_delivery_reads_the_arguments() -> None:
    script = Server(_completion(None, tool_args='{"verdict": "no"}'))
    assert LLMJudge(_completer(script, delivery="tool_call")).judge(CLAIM, PASSAGE).label == "no"
    assert script.bodies[0]["tool_choice"]["function"]["name"] == "verdict"


@pytest.mark.parametrize("output", ['{"verdict": "maybe"}', "Yes, it does.", '{"verdict": "yes", "why": "x"}', "{"])
def test_an_unenforced_output_is_reported_not_guessed(output: str) -> None:
    with pytest.raises(JudgeOutputError) as caught:
        LLMJudge(_completer(Server(_completion(output)))).judge(CLAIM, PASSAGE)
    assert output in str(caught.value)


def test_refusal_is_typed() -> None:
    with pytest.raises(BackendRefusalError, match="cannot help"):
        LLMJudge(_completer(Server(_completion(None, refusal="I cannot help")))).judge(CLAIM, PASSAGE)


def test_make_judge_rejects_arguments_that_do_not_fit() -> None:
    with pytest.raises(UsageError, match="not both"):
        make_judge("llm", model=Path("m.gguf"), base_url="http://127.0.0.1:1/v1")
    with pytest.raises(UsageError, match="base_url too"):
        make_judge("llm", api_model="m")
    with pytest.raises(UsageError, match="for the llm judge"):
        make_judge("offline", base_url="http://127.0.0.1:1/v1")


@pytest.mark.server
def test_real_server_judge_answers_one_of_three_words_and_sees_only_the_pair(llama_server: ManagedServer) -> None:
    completer = OpenAICompleter(base_url=llama_server.base_url, timeout=300)
    judge = LLMJudge(completer)
    pairs = [
        (CLAIM, PASSAGE),
        ("The plant employs 4,000 people.", "The plant employs 40 people."),
        ("Glass bottles are made at the plant.", PASSAGE),
        ("The river floods every spring.", "The bakery sells bread and cakes."),
    ]
    for claim, passage in pairs:
        verdict = judge.judge(claim, passage)
        assert verdict.label in ("yes", "partial", "no")
        assert verdict.version == f"judge.v1/llama-cpp-python:{llama_server.model_name}"  # the request profile
        assert completer.provider == "openai-compatible"  # not named, and llama-cpp-python's listing names none
        sent = completer.last_request
        assert sent["messages"] == judge.prompt.messages(claim, passage)
        text = json.dumps(sent["messages"])
        others = [c for c, _ in pairs if c not in (claim, passage) and c not in passage]
        assert others and all(other not in text for other in others)


@pytest.mark.server
def test_calibrate_cli_runs_the_llm_judge_on_a_server(llama_server: ManagedServer, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    rows = [
        {"claim": CLAIM, "passage": PASSAGE, "label": "yes"},
        {"claim": "The plant employs 4,000 people.", "passage": "The plant employs 40 people.", "label": "no"},
        {"claim": "It opened in 1998 and employs 90.", "passage": PASSAGE, "label": "partial"},
    ]
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["calibrate", str(labels), "--format", "labels", "--judge", "llm", "--base-url", llama_server.base_url]
    result = CliRunner().invoke(app, [*args, "--json", "--bootstrap", "20"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["n"] == 3
    assert sum(sum(row.values()) for row in report["confusion"].values()) == 3
