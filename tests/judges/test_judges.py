from __future__ import annotations

import json
from pathlib import Path

import pytest

from citelock import Verdict
from citelock.judges import (
    Judge,
    JudgeOutputError,
    LexicalJudge,
    LLMJudge,
    OfflineJudge,
    choices_grammar,
    default_judge,
    lexical_overlap,
    load_judge_prompt,
    make_judge,
)
from citelock.judges._features import FEATURE_NAMES, extract_features, numbers_in
from citelock.judges._params import PARAMS_DIR
from citelock.store import CachedJudge, MemoryVerdictCache, SqlVerdictCache, cache_key

PASSAGE = (
    "Acme Corp reported its annual results on Tuesday. Revenue grew 12% in 2023 to 4.1 billion dollars, "
    "driven by strong demand for its industrial robots. The company opened a new plant in Ohio."
)


class CountingJudge:
    name = "counting"
    version = "7"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def judge(self, claim: str, passage: str) -> Verdict:
        self.calls.append((claim, passage))
        label = "yes" if claim in passage else "partial"
        return Verdict(label=label, raw=label, judge=self.name, version=self.version)


class FakeCompleter:
    model_id = "fake-1"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.requests: list[tuple[list[dict[str, str]], list[str] | None, int]] = []

    def complete(self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int) -> str:
        self.requests.append((messages, choices, max_tokens))
        return self.answer


# --- offline judge sanity -------------------------------------------------------------------------------


def test_default_judge_is_the_calibrated_lexical_judge_and_satisfies_protocol() -> None:
    # the trained offline judge did not beat lexical overlap on held-out data (see judges._registry)
    judge = default_judge()
    assert isinstance(judge, LexicalJudge)
    assert isinstance(judge, Judge)
    assert judge.name == "lexical"
    assert isinstance(make_judge("offline"), OfflineJudge)
    assert judge.version


def test_offline_verbatim_claim_passes() -> None:
    verdict = OfflineJudge().judge("Revenue grew 12% in 2023 to 4.1 billion dollars [2].", PASSAGE)
    assert verdict.label == "yes"
    assert verdict.passed
    assert verdict.judge == "offline"
    assert verdict.raw == "verbatim" and verdict.score == 1.0


def test_offline_reordered_supported_claim_passes_through_the_model() -> None:
    verdict = OfflineJudge().judge("In 2023 Acme revenue grew 12% to 4.1 billion dollars.", PASSAGE)
    assert verdict.label == "yes"
    assert "p_yes=" in verdict.raw
    assert verdict.score is not None and 0.0 <= verdict.score <= 1.0


def test_offline_wrong_number_is_not_yes() -> None:
    verdict = OfflineJudge().judge("Revenue grew 15% in 2023 to 4.1 billion dollars.", PASSAGE)
    assert verdict.label != "yes"
    assert "num_missing" in verdict.raw


def test_offline_negated_claim_is_not_yes() -> None:
    verdict = OfflineJudge().judge("Revenue did not grow in 2023.", PASSAGE)
    assert verdict.label != "yes"
    assert "neg_mismatch_win1" in verdict.raw


def test_offline_unrelated_claim_is_not_yes() -> None:
    verdict = OfflineJudge().judge("The Eiffel Tower was painted blue by Gustave Klimt.", PASSAGE)
    assert verdict.label in ("no", "partial")
    assert not verdict.passed


def test_offline_long_passage_uses_best_sentence_window() -> None:
    filler = "\n".join(f"Unrelated sentence number {i} about gardening and tulips." for i in range(80))
    long_passage = filler + "\n" + PASSAGE + "\n" + filler
    judge = OfflineJudge()
    feats = extract_features("Acme opened a new plant in Ohio.", long_passage).as_dict()
    assert feats["cov_win3"] == 1.0
    assert judge.judge("Acme opened a new plant in Ohio.", long_passage).score is not None


def test_offline_is_deterministic_and_threshold_override_changes_version() -> None:
    a = OfflineJudge().judge("Acme opened a plant in Ohio.", PASSAGE)
    b = OfflineJudge().judge("Acme opened a plant in Ohio.", PASSAGE)
    assert a == b
    strict = OfflineJudge(yes_threshold=0.999)
    assert strict.version != OfflineJudge().version
    assert strict.judge("Acme opened a plant in Ohio.", PASSAGE).label != "yes"


def test_shipped_parameters_match_feature_set() -> None:
    params = json.loads((PARAMS_DIR / "offline.v1.json").read_text(encoding="utf-8"))
    assert tuple(params["features"]) == FEATURE_NAMES
    assert len(params["coef"]) == 3
    assert all(len(row) == len(FEATURE_NAMES) for row in params["coef"])
    assert 0.0 < params["yes_threshold"] < 1.0


def test_numbers_are_normalized() -> None:
    assert numbers_in("It cost 1,000 dollars, up 12.50% [3].") == ["1000", "12.5"]


# --- lexical baseline -----------------------------------------------------------------------------------


def test_lexical_overlap_and_thresholds() -> None:
    assert lexical_overlap("Acme opened a plant in Ohio.", PASSAGE) == 1.0
    assert lexical_overlap("Zebras migrate yearly.", PASSAGE) == 0.0
    judge = LexicalJudge(yes_threshold=0.9, partial_threshold=0.4)
    assert judge.judge("Acme opened a plant in Ohio.", PASSAGE).label == "yes"
    assert judge.judge("Acme opened a plant in Texas.", PASSAGE).label == "partial"
    assert judge.judge("Zebras migrate yearly.", PASSAGE).label == "no"
    assert judge.version != LexicalJudge().version


def test_lexical_rejects_inverted_thresholds() -> None:
    from citelock import UsageError

    with pytest.raises(UsageError, match="partial_threshold"):
        LexicalJudge(yes_threshold=0.3, partial_threshold=0.6)


# --- cache and isolation --------------------------------------------------------------------------------


def test_cached_judge_hits_and_partial_fails() -> None:
    inner = CountingJudge()
    cached = CachedJudge(inner)
    first = cached.judge("plant in Ohio", PASSAGE)
    second = cached.judge("plant in Ohio", PASSAGE)
    assert second == first.model_copy(update={"cached": True}) and first.passed
    assert not first.cached and second.cached  # a cache hit says so on the verdict
    assert len(inner.calls) == 1 and cached.hits == 1 and cached.misses == 1
    partial = cached.judge("a plant in Texas", PASSAGE)
    assert partial.label == "partial" and not partial.passed
    assert cached.name == "counting" and cached.version == "7"


def test_cache_key_separates_judge_versions() -> None:
    inner = CountingJudge()
    cache = MemoryVerdictCache()
    CachedJudge(inner, cache).judge("plant in Ohio", PASSAGE)
    inner.version = "8"
    CachedJudge(inner, cache).judge("plant in Ohio", PASSAGE)
    assert len(inner.calls) == 2
    assert len(cache) == 2
    assert cache_key("a", "b", "j", "1") != cache_key("a", "b", "j", "2")
    assert cache_key("a", "b", "j", "1") != cache_key("b", "a", "j", "1")


def test_sqlite_cache_persists_across_instances(tmp_path: Path) -> None:
    db = tmp_path / "verdicts.sqlite"
    inner = CountingJudge()
    v1 = CachedJudge(inner, db).judge("plant in Ohio", PASSAGE)
    again = CachedJudge(inner, SqlVerdictCache(db))
    v2 = again.judge("plant in Ohio", PASSAGE)
    assert v2 == v1.model_copy(update={"cached": True}) and v2.cached
    assert len(inner.calls) == 1 and again.hits == 1


def test_isolation_verdict_depends_only_on_claim_and_passage() -> None:
    """Whatever surrounds a pair (other pairs judged before, another cache, another request), same verdict."""
    claim = "Acme opened a new plant in Ohio."
    alone = OfflineJudge().judge(claim, PASSAGE)
    busy = CachedJudge(OfflineJudge())
    for other_claim, other_passage in [
        ("Revenue fell sharply.", "Costs rose in Texas."),
        (claim, "A completely different passage about Ohio farming."),
        ("Acme was founded in 1901.", PASSAGE),
    ]:
        busy.judge(other_claim, other_passage)
    in_context = busy.judge(claim, PASSAGE)
    assert in_context == alone
    hit = busy.judge(claim, PASSAGE)
    assert hit.cached and hit.model_copy(update={"cached": False}) == alone  # served from the cache, still identical


# --- LLM judge over a fake completer ---------------------------------------------------------------------


def test_llm_judge_prompt_and_constraint() -> None:
    completer = FakeCompleter("partial")
    judge = LLMJudge(completer)
    verdict = judge.judge("Acme opened a plant.", "Acme {braces} opened a plant in Ohio.")
    assert verdict.label == "partial" and not verdict.passed
    assert verdict.raw == "partial"
    assert verdict.version == "judge.v1/fake-1"
    messages, choices, max_tokens = completer.requests[0]
    assert choices == ["yes", "partial", "no"]
    assert max_tokens >= 1
    assert messages[0] == {"role": "system", "content": "You are checking one citation. You have no other information."}
    user = messages[1]["content"]
    assert "PASSAGE:\nAcme {braces} opened a plant in Ohio.\n\nCLAIM:\nAcme opened a plant." in user
    assert user.endswith("Answer with exactly one word: yes, partial, or no.")


def test_llm_judge_accepts_case_and_whitespace_only() -> None:
    assert LLMJudge(FakeCompleter(" Yes\n")).judge("a", "b").label == "yes"
    with pytest.raises(JudgeOutputError) as info:
        LLMJudge(FakeCompleter("yes, it does")).judge("a", "b")
    assert info.value.raw == "yes, it does"
    from citelock import RuntimeFailure

    assert isinstance(info.value, RuntimeFailure)


def test_llm_judge_claim_that_contains_placeholder_text() -> None:
    completer = FakeCompleter("no")
    LLMJudge(completer).judge("literal {passage} in claim", "the passage")
    user = completer.requests[0][0][1]["content"]
    assert "PASSAGE:\nthe passage\n\nCLAIM:\nliteral {passage} in claim\n" in user


def test_choices_grammar_and_prompt_file() -> None:
    assert choices_grammar(["yes", "partial", "no"]) == 'root ::= "yes" | "partial" | "no"'
    prompt = load_judge_prompt("1")
    assert prompt.choices == ("yes", "partial", "no")
    assert "Does the PASSAGE alone entail the CLAIM?" in prompt.user


# --- quote plus addition (partial support) -------------------------------------------------------------


def test_offline_quote_with_added_clause_is_not_yes() -> None:
    from citelock.judges._features import quote_addition

    claim = "The company opened a new plant in Ohio, and its margins expanded sharply."
    assert quote_addition(claim, PASSAGE)
    verdict = OfflineJudge().judge(claim, PASSAGE)
    assert verdict.label != "yes" and not verdict.passed
    assert "quote_addition" in verdict.raw


def test_quote_addition_needs_a_quoted_sentence_and_an_uncovered_rest() -> None:
    from citelock.judges._features import quote_addition

    assert not quote_addition("The company opened a new plant in Ohio.", PASSAGE)  # the quote alone
    assert not quote_addition("The company opened a new plant in Ohio, driven by demand for robots.", PASSAGE)
    assert not quote_addition("Acme built a factory in Ohio and sells industrial robots.", PASSAGE)  # no whole quote
