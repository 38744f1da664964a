"""Guarded streaming over OutlinesBackend on a real model: outlines' llama.cpp model (``outlines.from_llamacpp``)
over the bundled SmolLM2 GGUF, through outlines' ``generate_stream``.

What is asserted is what streaming and the constraint guarantee whatever the model writes (it may abstain): the
deltas are the generation; events come in order and are well formed; every streamed verdict is the final guard's;
nothing that failed its checks is shown under ``after_checks``; the final answer parses, cites only this prompt's
ids, and (``substring``) quotes its chunks verbatim; a cancelled stream stops decoding, releases the model and
persists its log entry, its checked claims and the truncation finding. Slow; CI runs it (``-m local_model``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from citelock import Citelock, Generation, Guard, ReasonCode, SchemaOptions, SurfacePolicy
from citelock._request import Request
from citelock.store import PromptLog, ResultStore, ReviewQueue

pytestmark = pytest.mark.local_model

pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
pytest.importorskip("llguidance", reason="the local extra is not installed: pip install 'citelock[local]'")
outlines = pytest.importorskip(
    "outlines", reason="the outlines extra is not installed: pip install 'citelock[outlines]'"
)

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "The harbour museum opened in 1975. It holds 4,000 maps of the coast."},
]
QUESTION = "When did the Aurora bridge open, and how long is it?"
LOW = SurfacePolicy(name="chat", stakes="low", sample_rate=1.0, on_fail="drop_claim")
# Short claims keep each generation affordable on two cores; no max_tokens: the schema's own output bound, so a
# valid answer is never cut (a cut is TruncatedOutputError, tested without a model).
OPTIONS = SchemaOptions(max_claims=2, max_citations=1, max_text_chars=80, max_span_chars=60)


@pytest.fixture(scope="module")
def backend() -> Any:
    """outlines' llama.cpp model over the bundled GGUF, built the way a user builds it."""
    import llama_cpp

    from citelock.backends import OutlinesBackend
    from citelock.runtime._llama import default_threads, load_llama, locate_model

    threads = default_threads()
    llm = load_llama(
        llama_cpp,
        model_path=str(locate_model("smollm2")),
        n_ctx=4096,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=256 << 20))  # the tests share one prompt's evaluation
    return OutlinesBackend(outlines.from_llamacpp(llm))


def _assert_guaranteed(events: list[Any], *, show: str) -> None:
    """Order and completeness of the events against the stream's own final answer, and the constraint's
    guarantees on that answer (it parsed, as the done event exists; ids from this prompt; substring spans
    verbatim)."""
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done" and not events[-1].cut
    done = events[-1].answer
    claims = done.answer.claims
    checked = [e for e in events if e.type == "claim.checked"]
    assert [e.claim_index for e in checked] == list(range(len(claims)))
    for event in checked:
        assert event.claim == claims[event.claim_index]
        ours = {(f.reason, f.citation_index) for f in event.findings}
        assert ours <= {(f.reason, f.citation_index) for f in done.findings if f.claim_index == event.claim_index}
    texts = {c["id"]: c["text"] for c in CHUNKS}
    for claim in claims:
        for citation in claim.citations:
            assert citation.chunk_id in texts
            if done.span_policy == "substring":
                assert citation.span in texts[citation.chunk_id]
    if show == "immediately":
        for n, claim in enumerate(claims):
            snapshots = [e.snapshot for e in events if e.type == "claim.delta" and e.claim_index == n]
            assert all(claim.text.startswith(s) for s in snapshots)
    else:
        assert not [e for e in events if e.type in ("claim.delta", "citation.delta")]
        passed = {e.claim_index for e in checked if e.passed}
        shown = [e.claim_index for e in events if e.type == "claim.shown"]
        assert set(shown) <= passed and len(shown) == len(set(shown))
    assert done.generation.enforced and done.backend == "outlines"
    assert done.model.endswith(".gguf")


def _lock_is_free(backend: Any) -> None:
    lock = backend._model_lock
    assert lock.acquire(blocking=False)  # decoding stopped and let go of the llama.cpp model
    lock.release()


def test_the_stream_deltas_are_the_verified_generation(backend: Any) -> None:
    client = Citelock(backend, options=OPTIONS)
    prep = client._prepare(Request(QUESTION, tuple(CHUNKS), policy="sentence"), backend)
    assert prep.schema is not None
    items = list(backend.stream(prep.record, prep.schema, max_tokens=prep.max_tokens))
    generation = items[-1]
    assert isinstance(generation, Generation) and all(isinstance(i, str) and i for i in items[:-1])
    assert "".join(items[:-1]) == generation.text
    assert generation.enforced and generation.completion_tokens and generation.completion_tokens <= prep.max_tokens
    prep.schema.parse_output(generation.text)  # raises if the streamed output broke the constraint
    _lock_is_free(backend)


@pytest.mark.parametrize(("policy", "show"), [("substring", "immediately"), ("sentence", "after_checks")])
def test_the_stream_is_well_formed_and_its_verdicts_are_the_guards(
    backend: Any, tmp_path: Path, policy: str, show: str
) -> None:
    log = PromptLog(tmp_path / "log.db")
    client = Citelock(backend, log=log, guard=Guard(LOW), options=OPTIONS)
    events = list(client.stream(QUESTION, CHUNKS, policy=policy, show=show))  # type: ignore[arg-type]
    _assert_guaranteed(events, show=show)
    done = events[-1].answer
    again = Guard(LOW).run(log.get(done.request_id), done.answer)
    assert again.report.findings == done.report.findings and again.decision == done.decision


def test_cancelling_mid_answer_stops_decoding_and_persists_what_was_checked(backend: Any, tmp_path: Path) -> None:
    db = tmp_path / "citelock.db"
    log, queue, results = PromptLog(db), ReviewQueue(db), ResultStore(db)
    client = Citelock(backend, log=log, guard=Guard(LOW), sinks=[queue, results], options=OPTIONS)
    events = client.stream(QUESTION, CHUNKS, request_id="cancel-outlines", policy="substring", show="immediately")
    seen = []
    for event in events:
        seen.append(event)
        if len(seen) == 5:
            break
    events.close()  # type: ignore[attr-defined]
    _lock_is_free(backend)
    assert log.get("cancel-outlines").request_id == "cancel-outlines"
    stored = results.for_request("cancel-outlines")
    assert stored is not None and stored.decision == "block"
    assert len(stored.claims) == len([e for e in seen if e.type == "claim.checked"])
    assert ReasonCode.ANSWER_TRUNCATED in {f.reason for f in stored.report.findings}
    assert ReasonCode.ANSWER_TRUNCATED in {e.reason for e in queue if e.request_id == "cancel-outlines"}


def test_astream(backend: Any) -> None:
    client = Citelock(backend, guard=Guard(LOW), options=OPTIONS)

    async def collect() -> list[Any]:
        return [e async for e in client.astream(QUESTION, CHUNKS, policy="substring")]

    _assert_guaranteed(asyncio.run(collect()), show="immediately")
    _lock_is_free(backend)


def test_an_engine_error_mid_stream_raises_and_persists_the_truncation(backend: Any, tmp_path: Path) -> None:
    """A lexer too small for the span alternatives: llguidance errors inside llama.cpp's sampler callback once
    ``{"claims":[`` is decoded; the stream raises instead of ending with an answer, and the store has the entry."""
    import llguidance

    from citelock.backends import OutlinesBackend
    from citelock.errors import ConstraintViolationError

    starved = OutlinesBackend(backend.model, engine_limits=llguidance.LLParserLimits(max_lexer_states=30))
    db = tmp_path / "citelock.db"
    results = ResultStore(db)
    client = Citelock(starved, log=PromptLog(db), guard=Guard(LOW), sinks=[results], options=OPTIONS)
    seen: list[Any] = []
    with pytest.raises(ConstraintViolationError, match="the constraint engine failed mid-decode"):
        for event in client.stream(QUESTION, CHUNKS, request_id="starved-1", policy="substring"):
            seen.append(event)
    assert "done" not in [e.type for e in seen]
    _lock_is_free(starved)
    stored = results.for_request("starved-1")
    assert stored is not None and stored.decision == "block"
    assert ReasonCode.ANSWER_TRUNCATED in {f.reason for f in stored.report.findings}
