"""Property: on the same output, ``Citelock.stream``'s result equals ``Citelock.answer``'s (issue #36).

Random answers over two chunks (supported claims, wrong numbers, uncited claims, off-question claims, fabricated
ids, spans from the wrong chunk), on every kind of surface and show policy, from a backend that ignored the
constraint (so nothing is refused before the guard) with ``on_diverge="continue"`` (the stream runs to the end).
The stream checks each claim once as it completes and assembles its result from those checks; ``answer`` runs
the guard over the whole answer: the two must be the same value.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citelock import Citelock, FakeBackend, Guard, GuardedAnswer, SchemaOptions, SurfacePolicy
from citelock.judges import LexicalJudge

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023. Rents rose faster."},
]
TEXTS = [
    "The bridge spans 880 meters.",
    "It opened in 1932.",
    "It opened in 1931.",
    "Prices rose 5% in 2023.",
    "Prices rose 9% in 2023.",
    "Rents rose faster.",
    "Thanks for asking!",
    "The bridge is painted blue.",
]
CITES = [
    {"chunk_id": "c-1", "span": "spans 880 meters"},
    {"chunk_id": "c-1", "span": "opened in 1932"},
    {"chunk_id": "c-2", "span": "rose 5% in 2023"},
    {"chunk_id": "c-2", "span": "spans 880 meters"},  # the other chunk's text
    {"chunk_id": "c-9", "span": "spans 880 meters"},  # fabricated id
]
SURFACES: list[SurfacePolicy | None] = [
    None,
    SurfacePolicy(name="chat", stakes="low", sample_rate=0.5, on_fail="drop_claim"),
    SurfacePolicy(name="notes", stakes="low", sample_rate=1.0, on_fail="mark"),
    SurfacePolicy(name="legal", stakes="high", on_fail="drop_claim"),
    SurfacePolicy(name="strict", stakes="high", on_fail="block"),
]
TIMING = {"generation": {"latency_s", "first_token_s", "tokens_per_s", "schema_build_ms"}}

claims = st.lists(
    st.tuples(st.sampled_from(TEXTS), st.lists(st.sampled_from(CITES), max_size=2)), min_size=0, max_size=5
)


def _dump(answer: GuardedAnswer) -> dict[str, Any]:
    return answer.model_dump(exclude=TIMING)  # type: ignore[arg-type]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=claims,
    surface=st.sampled_from(SURFACES),
    show=st.sampled_from(["immediately", "after_checks", "after_judge"]),
    question=st.sampled_from(["How long is the Aurora bridge?", "What happened to prices in Zürich?"]),
)
def test_the_streams_result_equals_answers_on_the_same_output(
    answer: list[tuple[str, list[dict[str, str]]]], surface: SurfacePolicy | None, show: str, question: str
) -> None:
    output = json.dumps({"claims": [{"text": t, "citations": c} for t, c in answer]}, ensure_ascii=False)
    guard = Guard(surface, LexicalJudge()) if surface is not None else Guard()
    client = Citelock(FakeBackend([output, output], enforced=False), guard=guard, options=SchemaOptions(max_claims=5))
    events = list(client.stream(question, CHUNKS, request_id="p-1", show=show, on_diverge="continue"))  # type: ignore[arg-type]
    whole = client.answer(question, CHUNKS, request_id="p-1")
    assert events[-1].type == "done" and not events[-1].cut
    assert _dump(events[-1].answer) == _dump(whole)
    checked = [e.claim_index for e in events if e.type == "claim.checked"]
    assert checked == list(range(len(whole.answer.claims)))  # every claim checked once, in order
