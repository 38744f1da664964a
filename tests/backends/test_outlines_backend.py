"""OutlinesBackend without a model: the model-type table, the registry, the output types and the fail-closed checks.

The real-model tests (outlines' llama.cpp model on the bundled GGUF) are in ``test_outlines_local_model.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import citelock
from citelock import BackendLimits, Citelock, SchemaOptions
from citelock.backends import MODEL_KINDS, PROFILES, OutlinesBackend, make_backend
from citelock.backends._outlines import _kind_of
from citelock.constraint import fit_schema
from citelock.errors import ConstraintViolationError, UsageError

outlines = pytest.importorskip(
    "outlines", reason="the outlines extra is not installed: pip install 'citelock[outlines]'"
)

URL = "http://127.0.0.1:9/v1"  # nothing listens: constructing a client must not connect
CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-2", "text": "The bridge was closed in 2019 for repairs. It reopened in 2021."},
]


def _openai_model() -> Any:
    openai = pytest.importorskip("openai")
    return outlines.from_openai(openai.OpenAI(base_url=URL, api_key="x", max_retries=0), "served-model")


def test_import_citelock_and_the_backend_module_load_no_outlines() -> None:
    code = (
        "import sys, citelock, citelock.backends, citelock.backends._outlines; "
        "bad = [m for m in ('outlines', 'outlines_core', 'llguidance', 'llama_cpp', 'torch') if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_outlines_model_type_has_a_row() -> None:
    from outlines.models import AsyncBlackBoxModel, BlackBoxModel, SteerableModel

    def names(union: Any) -> set[str]:
        return {cls.__name__ for cls in union.__args__}

    # every type outlines 1.x exports, but Anthropic (no JSON Schema structured output in outlines)
    assert names(SteerableModel) <= {k for k, v in MODEL_KINDS.items() if v.steerable}
    assert names(BlackBoxModel) - {"Anthropic"} <= {k for k, v in MODEL_KINDS.items() if not v.steerable}
    assert names(AsyncBlackBoxModel) <= {k for k, v in MODEL_KINDS.items() if v.is_async}
    for kind in MODEL_KINDS.values():
        if kind.grammar is None:  # a JSON-Schema-only engine never advertises a grammar-only policy
            assert not {"quote", "substring"} & set(kind.limits.policies), kind.name


def test_a_server_client_takes_json_schema_only_and_the_downgrade_is_recorded() -> None:
    backend = OutlinesBackend(_openai_model())
    assert backend.kind.name == "OpenAI" and backend.limits == PROFILES["openai"].limits
    context = citelock.assemble("When did it open?", CHUNKS)
    schema = fit_schema(context, "substring", backend.limits, SchemaOptions(max_claims=1))
    assert schema.policy == "sentence" and schema.requested_policy == "substring"
    assert "cannot enforce the 'substring' policy" in (schema.downgrade_reason or "")
    sent = backend.output_type(schema)
    assert type(sent).__name__ == "JsonSchema" and json.loads(sent.schema) == schema.json_schema
    grammar_only = fit_schema(context, "substring", BackendLimits(), SchemaOptions(max_claims=1))
    with pytest.raises(UsageError, match="cannot enforce the 'substring' policy"):
        backend.output_type(grammar_only)


def test_grammar_policies_are_lark_cfg_for_steerable_and_gbnf_for_vllm() -> None:
    context = citelock.assemble("When did it open?", CHUNKS)
    schema = fit_schema(context, "substring", BackendLimits(), SchemaOptions(max_claims=1))
    vllm_kind = MODEL_KINDS["VLLM"]
    assert vllm_kind.grammar == "gbnf" and "substring" in vllm_kind.limits.policies
    cfg = outlines.types.CFG(schema.grammar_in("gbnf"))
    assert cfg.definition == schema.gbnf
    # llguidance's grammar_from("grammar", ...) (outlines' CFG path) reads text as Lark only when a line starts
    # with "start:" or "%llguidance": the citation grammar opens with "%llguidance", and the steerable path
    # compiles it with grammar_from("lark", ...) anyway, never by guessing
    llguidance = pytest.importorskip("llguidance")
    assert MODEL_KINDS["LlamaCpp"].grammar == "lark" and schema.grammar.startswith("%llguidance")
    assert llguidance.grammar_from("grammar", schema.grammar) == llguidance.grammar_from("lark", schema.grammar)


def test_not_an_outlines_model_is_a_usage_error_naming_the_known_types() -> None:
    with pytest.raises(UsageError, match=r"needs an outlines 1.x model .* got builtins.dict .*LlamaCpp"):
        _kind_of({})
    with pytest.raises(UsageError, match="neither a bundled model"):
        OutlinesBackend("no/such/model.gguf")


def test_the_registry_name_alone_says_how_to_pass_a_model() -> None:
    for make in (lambda: make_backend("outlines"), lambda: Citelock("outlines")):
        with pytest.raises(UsageError) as raised:
            make()
        message = str(raised.value)
        assert "backend 'outlines' needs the option model" in message
        assert "OutlinesBackend(outlines.from_llamacpp(" in message and "model='smollm2'" in message


def test_a_schema_or_its_absence_must_match_constrain() -> None:
    backend = OutlinesBackend(_openai_model())
    record = citelock.serialize(citelock.assemble("When?", CHUNKS))
    with pytest.raises(UsageError, match="needs a CitationSchema"):
        backend.generate(record, None, max_tokens=10)
    naive = OutlinesBackend(backend.model, constrain=False)
    assert not naive.limits.constrains
    schema = fit_schema(citelock.assemble("When?", CHUNKS), "sentence", backend.limits)
    with pytest.raises(UsageError, match="takes no schema"):
        naive.generate(record, schema, max_tokens=10)


def test_a_black_box_output_outside_the_constraint_raises_and_is_never_enforced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that ignored the JSON Schema: the answer is verified after the fact and refused loudly."""
    model = _openai_model()
    sent: list[Any] = []

    def generate(model_input: Any, output_type: Any, **kwargs: Any) -> str:
        sent.append((model_input, output_type, kwargs))
        return '{"claims":[{"text":"It opened in 1932.","citations":[{"chunk_id":"c-999","span":"x"}]}]}'

    monkeypatch.setattr(model, "generate", generate)
    backend = OutlinesBackend(model)
    with pytest.raises(ConstraintViolationError, match=r"'c-999' is not one of this prompt's 2 chunk ids"):
        citelock.answer("When did it open?", CHUNKS, backend=backend, policy="id")
    model_input, output_type, kwargs = sent[0]
    assert type(model_input).__name__ == "Chat" and model_input.messages[0]["role"] == "system"
    assert type(output_type).__name__ == "JsonSchema"
    assert kwargs == {
        "temperature": 0.0,
        PROFILES["openai"].max_tokens_field: kwargs[PROFILES["openai"].max_tokens_field],
    }


def test_output_types_are_built_once_per_constraint_in_a_bounded_cache() -> None:
    """outlines' JsonSchema validates against the meta-schema on every construction: one per distinct schema."""
    backend = OutlinesBackend(_openai_model())
    context = citelock.assemble("When did it open?", CHUNKS)
    schema = fit_schema(context, "sentence", backend.limits, SchemaOptions(max_claims=1))
    first = backend.output_type(schema)
    assert backend.output_type(schema) is first and json.loads(first.schema) == schema.json_schema
    for n in range(2, 42):  # 40 other constraints: the first is evicted, the cache stays bounded
        backend.output_type(fit_schema(context, "sentence", backend.limits, SchemaOptions(max_claims=n)))
    assert len(backend._output_types) == 32 and all(kept is not first for kept in backend._output_types.values())
    again = backend.output_type(schema)
    assert again is not first and again.schema == first.schema
