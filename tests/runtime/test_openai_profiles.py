"""Server capability profiles: schema adaptation and limit-driven downgrades (pure, no server)."""

from __future__ import annotations

import pytest

import citelock
from citelock.constraint import SchemaOptions, build_schema, fit_schema
from citelock.runtime import PROFILES, ServerProfile, get_profile


def context_with_sentences(per_chunk: int, chunks: int = 1, width: int = 60) -> citelock.Context:
    out = []
    for c in range(chunks):
        sentences = [
            f"Item {c}-{n} is described here with enough words {'x' * (width - 50)}." for n in range(per_chunk)
        ]
        out.append({"id": f"c{c}", "text": " ".join(sentences)})
    return citelock.assemble("What is described?", out)


def test_openai_large_enum_quota_downgrades_sentence_to_id() -> None:
    # one chunk, 300 sentences of ~60 chars: one enum of >250 values totalling >15,000 chars
    context = context_with_sentences(300)
    schema = fit_schema(context, "sentence", PROFILES["openai"].limits)
    assert schema.policy == "id" and schema.requested_policy == "sentence"
    assert schema.downgrade_reason is not None and "15,000" in schema.downgrade_reason


def test_openai_enum_count_limit_downgrades() -> None:
    context = context_with_sentences(120, chunks=10, width=55)  # 1,200 sentences over 10 chunks
    schema = fit_schema(context, "sentence", PROFILES["openai"].limits)
    assert schema.policy == "id"
    assert schema.downgrade_reason is not None and "1,000" in schema.downgrade_reason


def test_small_context_keeps_sentence_policy() -> None:
    schema = fit_schema(context_with_sentences(5), "substring", PROFILES["openai"].limits)
    assert schema.policy == "sentence"
    assert "substring" in (schema.downgrade_reason or "")


def test_even_id_over_limits_is_a_usage_error() -> None:
    tight = PROFILES["openai"].with_limits(max_enum_values=1)
    with pytest.raises(citelock.UsageError, match="no span policy fits"):
        fit_schema(context_with_sentences(2, chunks=3), "sentence", tight.limits)


def test_openai_adapt_drops_length_keywords_and_records_them() -> None:
    schema = build_schema(context_with_sentences(2), "id", SchemaOptions(max_text_chars=50))
    sent, removed = PROFILES["openai"].adapt(schema.json_schema)
    text = sent["properties"]["claims"]["items"]["properties"]["text"]
    assert text == {"type": "string"}
    assert any("maxLength=50" in r for r in removed) and any("$schema" in r for r in removed)
    assert schema.json_schema["properties"]["claims"]["items"]["properties"]["text"]["maxLength"] == 50


def test_llama_adapt_rewrites_free_strings_as_anchored_patterns() -> None:
    schema = build_schema(context_with_sentences(2), "id", SchemaOptions(max_span_chars=70))
    sent, removed = PROFILES["llama-cpp-python"].adapt(schema.json_schema)
    span = sent["properties"]["claims"]["items"]["properties"]["citations"]["items"]["properties"]["span"]
    assert span == {"type": "string", "pattern": '^[^\\x00-\\x1f"\\\\]{1,70}$'}
    assert any('pattern="\\\\S"' in r for r in removed)


def test_unanchored_pattern_is_removed_for_grammar_converters() -> None:
    profile = ServerProfile(
        kind="x",
        deliveries=PROFILES["llama.cpp"].deliveries,
        limits=PROFILES["llama.cpp"].limits,
        anchored_patterns_only=True,
    )
    sent, removed = profile.adapt({"type": "string", "pattern": "\\S"})
    assert sent == {"type": "string"} and removed == ('/: pattern="\\\\S" (not anchored)',)
    kept, none = profile.adapt({"type": "string", "pattern": "^a+$"})
    assert kept["pattern"] == "^a+$" and none == ()


def test_profiles_are_data_with_known_kinds() -> None:
    assert {"openai", "vllm", "sglang", "llama.cpp", "llama-cpp-python"} <= set(PROFILES)
    llama = get_profile("llama-cpp-python")
    assert [d.name for d in llama.deliveries] == ["grammar", "json_object_schema", "tool_call"]
    # citation backends take the strongest (the grammar); schema senders (judge, instructor) the first schema one
    assert llama.citation_delivery().name == "grammar" and llama.delivery().name == "json_object_schema"
    assert get_profile("openai").deliveries[0].name == "json_schema_strict"
    assert get_profile("openai").citation_delivery().name == "json_schema_strict"
    with pytest.raises(citelock.UsageError, match="unknown server kind"):
        get_profile("nope")
    with pytest.raises(citelock.UsageError, match="no delivery"):
        get_profile("openai").delivery("json_object_schema")
