"""``SchemaOptions(min_claims=...)``: removing the abstention branch from every constraint form, by construction.

Every form the project emits is checked with ``min_claims=1`` under every span policy: the llguidance Lark grammar
and the GBNF (both run over exact strings), the JSON Schema (``minItems``, validated with ``jsonschema``), the
pydantic model, and :meth:`CitationSchema.parse_output`. Then the downgrade path, the cache, the pipeline on the
shipped fake backend, and ``citelock answer --no-abstain``. The real model proves it in ``test_local_model.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import citelock
from citelock import BackendLimits, ConstraintViolationError, FakeBackend, SchemaOptions, UsageError
from citelock.backends import _registry
from citelock.cli import app
from citelock.constraint._policy import POLICY_ORDER
from citelock.constraint._schema import DOWNGRADES, CitationSchema, build_schema, fit_schema
from support.grammar_harness import accepts, accepts_gbnf

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": 'He said "do not edit it" twice.\nCafé 東京 & co. closed early that year.'},
    {"id": "c-empty", "text": "   "},
]
ABSTAIN = '{"claims":[]}'
MUST = SchemaOptions(min_claims=1)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _context() -> citelock.Context:
    return citelock.assemble("How long is the Aurora bridge?", CHUNKS)


def _claim(policy: str, sentence: str = "It spans 880 meters across the bay.", chunk_id: str = "c-1") -> dict[str, Any]:
    if policy in ("quote", "quote_sentence"):
        return {"text": sentence, "citations": [{"chunk_id": chunk_id}]}
    return {"text": "A claim.", "citations": [{"chunk_id": chunk_id, "span": sentence}]}


def _output(policy: str, count: int) -> str:
    sentences = ["It spans 880 meters across the bay.", "The Aurora bridge opened in 1932."]
    claims = [_claim(policy, sentences[i % 2]) for i in range(count)]
    return json.dumps({"claims": claims}, ensure_ascii=False, separators=(",", ":"))


def _all_forms_accept(schema: CitationSchema, text: str) -> list[bool]:
    """Whether each form takes ``text``: Lark, GBNF, JSON Schema (exact policies), model, parse_output."""
    verdicts = [accepts(schema.grammar, text), accepts_gbnf(schema.gbnf, text)]
    data = json.loads(text)
    if schema.exact_json_schema:
        verdicts.append(jsonschema.Draft202012Validator(schema.json_schema).is_valid(data))
    try:
        schema.model.model_validate(data)
        verdicts.append(True)
    except ValidationError:
        verdicts.append(False)
    try:
        schema.parse_output(text)
        verdicts.append(True)
    except ConstraintViolationError:
        verdicts.append(False)
    return verdicts


@pytest.mark.parametrize("policy", POLICY_ORDER)
def test_min_claims_removes_the_abstention_from_every_form(policy: str) -> None:
    allowing = build_schema(_context(), policy)  # type: ignore[arg-type]
    forbidding = build_schema(_context(), policy, MUST)  # type: ignore[arg-type]
    assert all(_all_forms_accept(allowing, ABSTAIN))  # the default keeps the branch
    assert not any(_all_forms_accept(forbidding, ABSTAIN)), policy
    assert all(_all_forms_accept(forbidding, _output(policy, 1))), policy
    assert not any(_all_forms_accept(forbidding, _output(policy, forbidding.options.max_claims + 1)))
    claims = forbidding.json_schema["properties"]["claims"]
    assert claims["minItems"] == 1 and claims["maxItems"] == MUST.max_claims
    assert "empty list" not in claims["description"]  # the model is not told it may abstain
    assert forbidding.model.model_json_schema()["properties"]["claims"]["minItems"] == 1


@pytest.mark.parametrize("policy", ["quote", "substring", "id"])
def test_min_claims_two_needs_two_claims_in_both_grammars(policy: str) -> None:
    schema = build_schema(_context(), policy, SchemaOptions(max_claims=3, min_claims=2))  # type: ignore[arg-type]
    assert _all_forms_accept(schema, _output(policy, 1)) == [False] * len(_all_forms_accept(schema, ABSTAIN))
    assert all(_all_forms_accept(schema, _output(policy, 2)))
    assert all(_all_forms_accept(schema, _output(policy, 3)))
    assert not any(_all_forms_accept(schema, _output(policy, 4)))


def test_min_claims_equal_to_max_claims_is_exact() -> None:
    schema = build_schema(_context(), "sentence", SchemaOptions(max_claims=1, min_claims=1))
    assert all(_all_forms_accept(schema, _output("sentence", 1)))
    assert not any(_all_forms_accept(schema, ABSTAIN)) and not any(_all_forms_accept(schema, _output("sentence", 2)))


def test_parse_output_names_the_missing_claims() -> None:
    schema = build_schema(_context(), "id", MUST)
    with pytest.raises(ConstraintViolationError, match=r"1\.\.3 claims, got a list of 0 \(min_claims forbids"):
        schema.parse_output(ABSTAIN)


@pytest.mark.parametrize("value", [-1, 4, True, "1", 1.0, None])
def test_bad_min_claims_is_a_usage_error_naming_the_range(value: object) -> None:
    with pytest.raises(UsageError, match=r"SchemaOptions.min_claims must be an integer from 0 to max_claims=3, got"):
        SchemaOptions(min_claims=value)  # type: ignore[arg-type]


def test_schemas_with_and_without_the_abstention_are_cached_apart() -> None:
    context = _context()
    assert build_schema(context, "id") is build_schema(context, "id")
    assert build_schema(context, "id", MUST) is not build_schema(context, "id")
    assert build_schema(context, "id", MUST).options.min_claims == 1


def _grammar_bound(policy: str, dialect: str) -> int:
    """A grammar-size limit that ``policy``'s grammar (without the abstention) just fits."""
    return len(build_schema(_context(), policy, MUST).grammar_in(dialect))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("requested", "limits"),
    [
        ("quote", BackendLimits(policies=("quote_sentence", "sentence", "id"), json_schema=True)),
        ("quote", BackendLimits(max_grammar_chars=_grammar_bound("quote_sentence", "gbnf"), grammar_dialect="gbnf")),
        ("substring", BackendLimits(max_grammar_chars=_grammar_bound("sentence", "lark"))),
        ("substring", BackendLimits(policies=("id",))),
    ],
)
def test_every_downgrade_keeps_the_abstention_out(requested: str, limits: BackendLimits) -> None:
    schema = fit_schema(_context(), requested, limits, MUST)  # type: ignore[arg-type]
    assert schema.policy in DOWNGRADES[requested] and schema.policy != requested and schema.downgrade_reason
    assert schema.options.min_claims == 1 and schema.json_schema["properties"]["claims"]["minItems"] == 1
    assert not any(_all_forms_accept(schema, ABSTAIN))


@pytest.mark.parametrize("policy", POLICY_ORDER)
def test_max_output_chars_still_bounds_the_longest_answer(policy: str) -> None:
    options = SchemaOptions(max_claims=2, min_claims=2)
    schema = build_schema(_context(), policy, options)  # type: ignore[arg-type]
    assert schema.max_output_chars() == build_schema(_context(), policy, SchemaOptions(max_claims=2)).max_output_chars()
    assert len(_output(policy, 2)) <= schema.max_output_chars()


def test_a_substring_gbnf_with_nothing_to_cite_cannot_also_forbid_abstaining() -> None:
    context = citelock.assemble("q?", [{"id": "x", "text": "\x01\x02"}])
    schema = build_schema(context, "substring", SchemaOptions(max_claims=1, max_span_chars=5))
    assert schema.gbnf == 'root ::= "{\\"claims\\":[]}"\n'  # only the abstention is left
    forbidding = build_schema(context, "substring", SchemaOptions(max_claims=1, max_span_chars=5, min_claims=1))
    with pytest.raises(citelock.InputError, match="min_claims=1 forbids the abstention"):
        _ = forbidding.gbnf


# ---------------------------------------------------------------- the pipeline and the command line


def test_the_backend_receives_the_schema_without_the_branch_and_an_abstention_is_loud() -> None:
    fake = FakeBackend([ABSTAIN, _output("sentence", 1)])
    with pytest.raises(ConstraintViolationError, match="min_claims forbids the abstention"):
        citelock.answer("How long?", CHUNKS, backend=fake, policy="sentence", options=MUST)
    result = citelock.answer("How long?", CHUNKS, backend=fake, policy="sentence", options=MUST)
    assert result.answer.claims and not result.answer.abstained and result.ok
    for call in fake.calls:
        assert call.schema is not None and call.schema.options.min_claims == 1


def _answer_cli(tmp_path: Path, *args: str) -> Any:
    chunks = ["--chunks", str(EXAMPLES / "corpus.jsonl"), "--top-k", "2"]
    base = ["answer", "--db", str(tmp_path / "log.db"), "-q", "How long is the Aurora Bridge?", *chunks]
    return CliRunner().invoke(app, [*base, *args])


def test_cli_no_abstain_sends_a_schema_without_the_branch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[CitationSchema | None] = []

    def script(record: citelock.PromptRecord, schema: CitationSchema | None) -> str:
        seen.append(schema)
        assert schema is not None
        return ABSTAIN if schema.options.min_claims == 0 else '{"claims":[' + _id_claim(schema) + "]}"

    def make(kind: str, **options: Any) -> FakeBackend:
        return FakeBackend(script, name=kind, limits=BackendLimits(policies=("id",)))

    monkeypatch.setattr(_registry, "make_backend", make)
    plain = _answer_cli(tmp_path, "--backend", "local", "--json")
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["answer"]["abstained"] is True
    forced = _answer_cli(tmp_path, "--backend", "local", "--no-abstain", "--json")
    assert forced.exit_code in (0, 1), forced.output
    data = json.loads(forced.stdout)
    assert data["answer"]["claims"] and data["answer"]["abstained"] is False
    assert [s.options.min_claims for s in seen if s is not None] == [0, 1]
    assert seen[1] is not None and seen[1].json_schema["properties"]["claims"]["minItems"] == 1


def _id_claim(schema: CitationSchema) -> str:
    claim = {"text": "A claim.", "citations": [{"chunk_id": schema.ids[0], "span": "The"}]}
    return json.dumps(claim, separators=(",", ":"))


def test_cli_no_abstain_on_a_free_text_backend_exits_2_before_anything_runs(tmp_path: Path) -> None:
    result = _answer_cli(tmp_path, "--backend", "naive", "--no-abstain")
    assert result.exit_code == 2, result.output
    assert "--no-abstain shapes the citation schema, and --backend naive takes none" in " ".join(result.output.split())
    assert not (tmp_path / "log.db").exists()  # refused before the prompt was logged
