"""Pins the public surface: adding or removing a public name is a deliberate change to this list."""

import citelock

EXPECTED = [
    "ABSTENTION_TEXT",
    "AlreadyResolvedError",
    "Answer",
    "AnswerModel",
    "AuditSettings",
    "AuditSummary",
    "Backend",
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendLimits",
    "BackendRefusalError",
    "BackendTimeoutError",
    "BudgetExceededError",
    "Chunk",
    "Citation",
    "CitationCheck",
    "CitationSchema",
    "Citelock",
    "CitelockError",
    "Claim",
    "ClaimCheck",
    "ClaimOutcome",
    "Config",
    "ConstraintViolationError",
    "Context",
    "DEFAULT_MARKERS",
    "Decision",
    "DroppedChunk",
    "FakeBackend",
    "Finding",
    "Generation",
    "GenerationStats",
    "Guard",
    "GuardReport",
    "GuardResult",
    "GuardedAnswer",
    "InputError",
    "JudgeAccounting",
    "JudgeOutputError",
    "Layer",
    "MarkerPattern",
    "Message",
    "MissingExtraError",
    "ModelOutputError",
    "NotPermittedError",
    "OnFail",
    "OutputBoundsError",
    "ParseError",
    "PromptLog",
    "PromptRecord",
    "PromptTemplate",
    "REASONS",
    "ReasonCode",
    "ReasonInfo",
    "RenderStyle",
    "ResultStore",
    "ReviewQueue",
    "RuntimeFailure",
    "SchemaOptions",
    "SchemaRejectedError",
    "SchemaStats",
    "ServerStartError",
    "Sink",
    "SpanPolicy",
    "StoreIntegrityError",
    "SurfacePolicy",
    "TemplateRef",
    "TruncatedOutputError",
    "UnparsedAnswerError",
    "UsageError",
    "Verdict",
    "__version__",
    "aanswer",
    "answer",
    "answer_model",
    "assemble",
    "check",
    "guarded_answer_json_schema",
    "load_template",
    "parse_answer",
    "parse_free_text",
    "record_from_messages",
    "render_answer",
    "run_audit",
    "serialize",
    "wrap",
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
        "import sys, citelock, citelock.guard, citelock.store, citelock.integrations; "
        "sdks = ('openai', 'instructor', 'outlines', 'llama_cpp', 'llguidance', 'torch', "
        "'langchain_core', 'llama_index', 'haystack'); "
        "bad = [m for m in sdks if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing citelock pulled in LLM SDKs: {out}"
