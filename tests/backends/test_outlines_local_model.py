"""OutlinesBackend on a real model: outlines' llama.cpp model (``outlines.from_llamacpp``) over the bundled SmolLM2
GGUF. Every span policy decodes, parses and verifies over 30 generations each on the example corpus' questions
(injections, missing sources, look-alike ids, quotes, backslashes, non-ASCII), with zero fabricated ids and zero
non-verbatim spans; an engine error provoked mid-decode raises instead of returning an answer marked enforced.

What is asserted is what the constraint guarantees, never the model's choices (it may abstain). Slow (minutes on
two cores); CI runs it (``-m local_model``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import ReasonCode, SchemaOptions
from citelock.constraint._grammar import quote_body
from citelock.text import normalize

pytestmark = pytest.mark.local_model

pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
pytest.importorskip("llguidance", reason="the local extra is not installed: pip install 'citelock[local]'")
outlines = pytest.importorskip(
    "outlines", reason="the outlines extra is not installed: pip install 'citelock[outlines]'"
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORPUS = {
    row["id"]: row
    for row in (json.loads(line) for line in (EXAMPLES / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
}
CASES = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line]
GENERATIONS = 30
POLICIES = ("quote", "quote_sentence", "substring", "sentence", "id")
# One short claim with one citation: 30 generations per policy stay affordable on two cores.
OPTIONS = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=80, max_span_chars=60)
SPAN_REASONS = {
    ReasonCode.SPAN_NOT_IN_CHUNK,
    ReasonCode.SPAN_IN_OTHER_CHUNK,
    ReasonCode.SPAN_ONLY_IN_QUESTION,
    ReasonCode.SPAN_TRUNCATED,
}
ID_REASONS = {ReasonCode.ID_NOT_IN_PROMPT, ReasonCode.FABRICATED_ID, ReasonCode.STALE_ID}


@pytest.fixture(scope="module")
def model() -> Any:
    """outlines' llama.cpp model over the bundled GGUF, built the way a user builds it."""
    import llama_cpp

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
    # outlines resets llama.cpp's state after every call; a prompt cache lets the five policies of one question
    # share its prompt evaluation (llama-cpp-python's own cache: it changes no token the model samples)
    llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=256 << 20))
    return outlines.from_llamacpp(llm)


@pytest.fixture(scope="module")
def backend(model: Any) -> citelock.Backend:
    from citelock.backends import OutlinesBackend

    return OutlinesBackend(model)


@pytest.fixture(scope="module")
def answers(backend: citelock.Backend) -> dict[str, list[tuple[dict[str, Any], citelock.GuardedAnswer]]]:
    """Every policy on each of the first 30 questions, question by question (so the prompt cache is warm)."""
    store = set(CORPUS) | {"c-999"}
    out: dict[str, list[tuple[dict[str, Any], citelock.GuardedAnswer]]] = {p: [] for p in POLICIES}
    for case in CASES[:GENERATIONS]:
        for policy in POLICIES:
            result = citelock.answer(
                case["question"],
                [CORPUS[i] for i in case["chunks"]],
                backend=backend,
                policy=policy,  # type: ignore[arg-type]
                options=OPTIONS,
                known_ids=store,
            )  # raises if the output did not parse or verify: the test then fails
            out[policy].append((case, result))
    return out


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= GENERATIONS


def _check(result: citelock.GuardedAnswer, case: dict[str, Any], policy: str) -> None:
    generation = result.generation
    assert result.backend == "outlines" and generation.enforced
    assert result.span_policy == policy and result.downgrade_reason is None  # small contexts: nothing downgraded
    assert generation.finish_reason == "stop"
    assert generation.completion_tokens is not None and generation.completion_tokens >= 1
    assert generation.first_token_s is not None and 0 <= generation.first_token_s <= generation.latency_s
    reasons = {f.reason for f in result.findings}
    assert not reasons & ID_REASONS, result.model_dump_json(indent=1)
    if policy != "id":  # id constrains only the id; its span is a bounded free string the guard checks
        assert not reasons & SPAN_REASONS, result.model_dump_json(indent=1)
    cited = {c.chunk_id for claim in result.answer.claims for c in claim.citations}
    assert cited <= set(case["chunks"])
    texts = {i: normalize(CORPUS[i]["text"]) for i in case["chunks"]}
    for claim in result.answer.claims:
        assert claim.citations
        for citation in claim.citations:
            span = quote_body(claim.text) if policy in ("quote", "quote_sentence") else citation.span
            if policy != "id":  # id constrains only the id; its span is the guard's to check
                assert normalize(span) in texts[citation.chunk_id], (span, citation.chunk_id)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_decodes_parses_and_verifies(
    answers: dict[str, list[tuple[dict[str, Any], citelock.GuardedAnswer]]], policy: str
) -> None:
    assert len(answers[policy]) == GENERATIONS
    for case, result in answers[policy]:
        _check(result, case, policy)


def test_an_engine_error_mid_decode_raises_and_is_never_enforced(model: Any) -> None:
    """A lexer too small for the span alternatives: llguidance errors once ``{"claims":[`` (forced, whatever the
    model picks next) has been decoded, inside llama.cpp's sampler callback, where an exception would be lost."""
    import llguidance

    from citelock.backends import OutlinesBackend

    starved = OutlinesBackend(model, engine_limits=llguidance.LLParserLimits(max_lexer_states=30))
    case = CASES[0]
    with pytest.raises(citelock.ConstraintViolationError) as raised:
        citelock.answer(
            case["question"], [CORPUS[i] for i in case["chunks"]], backend=starved, policy="substring", options=OPTIONS
        )
    message = str(raised.value)
    assert re.search(r"the constraint engine failed mid-decode after ([2-9]|[1-9][0-9]+) tokens", message), message
    assert "too many states" in message and "not used" in message


def test_the_naive_arm_through_outlines_is_unconstrained_and_not_enforced(model: Any) -> None:
    from citelock.backends import OutlinesBackend

    naive = OutlinesBackend(model, constrain=False)
    case = CASES[0]
    try:
        result = citelock.answer(case["question"], [CORPUS[i] for i in case["chunks"]], backend=naive, max_tokens=40)
    except citelock.UnparsedAnswerError as exc:  # free text may not parse: that is the baseline's failure mode
        generation = exc.generation
        assert exc.generation.backend == "outlines"
    else:
        generation = result.generation
        assert result.span_policy is None and result.backend == "outlines"
    assert not generation.enforced
    assert generation.completion_tokens is not None and 1 <= generation.completion_tokens <= 40
