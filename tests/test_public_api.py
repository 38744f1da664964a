"""Pins the public surface: adding or removing a public name is a deliberate change to this list."""

import citelock

EXPECTED = [
    "DEFAULT_MARKERS",
    "Answer",
    "Backend",
    "BackendLimits",
    "BudgetExceededError",
    "Chunk",
    "Citation",
    "CitationCheck",
    "CitationSchema",
    "CitelockError",
    "Claim",
    "ClaimCheck",
    "ConstraintViolationError",
    "Context",
    "DroppedChunk",
    "FakeBackend",
    "Finding",
    "Generation",
    "GenerationStats",
    "GuardReport",
    "GuardedAnswer",
    "InputError",
    "Layer",
    "MarkerPattern",
    "Message",
    "MissingExtraError",
    "ParseError",
    "PlacedChunk",
    "Placement",
    "PromptLog",
    "PromptRecord",
    "PromptTemplate",
    "ReasonCode",
    "RuntimeFailure",
    "SchemaOptions",
    "SchemaStats",
    "SpanPolicy",
    "StoreIntegrityError",
    "TemplateRef",
    "UnparsedAnswerError",
    "UsageError",
    "Verdict",
    "__version__",
    "answer",
    "answer_async",
    "assemble",
    "build_schema",
    "check",
    "classify_claim",
    "fit_schema",
    "guarded_answer_json_schema",
    "load_template",
    "normalize",
    "normalize_with_map",
    "parse_answer",
    "parse_free_text",
    "record_from_messages",
    "render_answer",
    "serialize",
    "split_sentences",
]


def test_all_is_pinned() -> None:
    assert list(citelock.__all__) == EXPECTED
    assert len(set(EXPECTED)) == len(EXPECTED)


def test_every_public_name_exists() -> None:
    for name in citelock.__all__:
        assert hasattr(citelock, name), name


def test_core_imports_no_llm_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, citelock, citelock.guard, citelock.store; "
        "sdks = ('openai', 'instructor', 'outlines', 'llama_cpp', 'llguidance', 'torch'); "
        "bad = [m for m in sdks if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing citelock pulled in LLM SDKs: {out}"
