"""citelock: trustworthy citations for RAG answers.

Build a :class:`Citelock` client once (a backend, a prompt log, a :class:`Guard` with a surface policy, sinks)
and call ``client.answer(question, chunks)``: the prompt is assembled under a budget and logged exactly as sent,
the citations are constrained by construction, and every answer is guarded against the logged prompt. See the
README for the five-minute tour.

Every public name is importable from here, but ``import citelock`` loads none of the modules behind them
(no SQLAlchemy, numpy, or model SDK): each name is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from citelock._version import __version__

if TYPE_CHECKING:
    from citelock.backends import Backend, FakeBackend
    from citelock.constraint._schema import (
        BackendLimits,
        CitationSchema,
        SchemaOptions,
        SchemaStats,
        SpanPolicy,
        build_schema,
        fit_schema,
    )
    from citelock.errors import (
        AlreadyResolvedError,
        BackendConnectionError,
        BackendError,
        BackendHTTPError,
        BackendRefusalError,
        BackendTimeoutError,
        BudgetExceededError,
        CitelockError,
        ConstraintViolationError,
        InputError,
        JudgeOutputError,
        MissingExtraError,
        ModelOutputError,
        NotPermittedError,
        ParseError,
        RuntimeFailure,
        SchemaRejectedError,
        ServerStartError,
        StoreIntegrityError,
        TruncatedOutputError,
        UnparsedAnswerError,
        UsageError,
    )
    from citelock.guard import ClaimOutcome, Decision, Guard, GuardResult, JudgeAccounting, OnFail, SurfacePolicy, check
    from citelock.pipeline import (
        Citelock,
        GenerationStats,
        GuardedAnswer,
        Sink,
        aanswer,
        answer,
        answer_async,
        guarded_answer_json_schema,
    )
    from citelock.prompt._assemble import assemble
    from citelock.prompt._parse import DEFAULT_MARKERS, MarkerPattern, parse_answer, parse_free_text
    from citelock.prompt._serialize import record_from_messages, serialize
    from citelock.prompt._templates import PromptTemplate, load_template
    from citelock.reasons import REASONS, ReasonInfo
    from citelock.records import (
        Answer,
        Chunk,
        Citation,
        CitationCheck,
        Claim,
        ClaimCheck,
        Context,
        DroppedChunk,
        Finding,
        Generation,
        GuardReport,
        Layer,
        Message,
        PlacedChunk,
        Placement,
        PromptRecord,
        ReasonCode,
        TemplateRef,
        Verdict,
    )
    from citelock.render import ABSTENTION_TEXT, RenderStyle, render_answer
    from citelock.store import PromptLog, ResultStore, ReviewQueue
    from citelock.text._normalize import normalize, normalize_with_map
    from citelock.text._segment import classify_claim, split_sentences

_EXPORTS: dict[str, str] = {
    "REASONS": "citelock.reasons",
    "ReasonInfo": "citelock.reasons",
    "Citelock": "citelock.pipeline",
    "GenerationStats": "citelock.pipeline",
    "GuardedAnswer": "citelock.pipeline",
    "Sink": "citelock.pipeline",
    "aanswer": "citelock.pipeline",
    "answer": "citelock.pipeline",
    "answer_async": "citelock.pipeline",
    "guarded_answer_json_schema": "citelock.pipeline",
    "ABSTENTION_TEXT": "citelock.render",
    "RenderStyle": "citelock.render",
    "render_answer": "citelock.render",
    "ClaimOutcome": "citelock.guard",
    "Decision": "citelock.guard",
    "Guard": "citelock.guard",
    "GuardResult": "citelock.guard",
    "JudgeAccounting": "citelock.guard",
    "OnFail": "citelock.guard",
    "SurfacePolicy": "citelock.guard",
    "check": "citelock.guard",
    "assemble": "citelock.prompt._assemble",
    "AlreadyResolvedError": "citelock.errors",
    "BackendConnectionError": "citelock.errors",
    "BackendError": "citelock.errors",
    "BackendHTTPError": "citelock.errors",
    "BackendRefusalError": "citelock.errors",
    "BackendTimeoutError": "citelock.errors",
    "BudgetExceededError": "citelock.errors",
    "CitelockError": "citelock.errors",
    "ConstraintViolationError": "citelock.errors",
    "InputError": "citelock.errors",
    "JudgeOutputError": "citelock.errors",
    "MissingExtraError": "citelock.errors",
    "NotPermittedError": "citelock.errors",
    "ModelOutputError": "citelock.errors",
    "ParseError": "citelock.errors",
    "RuntimeFailure": "citelock.errors",
    "SchemaRejectedError": "citelock.errors",
    "ServerStartError": "citelock.errors",
    "StoreIntegrityError": "citelock.errors",
    "TruncatedOutputError": "citelock.errors",
    "UnparsedAnswerError": "citelock.errors",
    "UsageError": "citelock.errors",
    "normalize": "citelock.text._normalize",
    "normalize_with_map": "citelock.text._normalize",
    "DEFAULT_MARKERS": "citelock.prompt._parse",
    "MarkerPattern": "citelock.prompt._parse",
    "parse_answer": "citelock.prompt._parse",
    "parse_free_text": "citelock.prompt._parse",
    "record_from_messages": "citelock.prompt._serialize",
    "serialize": "citelock.prompt._serialize",
    "Answer": "citelock.records",
    "Chunk": "citelock.records",
    "Citation": "citelock.records",
    "CitationCheck": "citelock.records",
    "Claim": "citelock.records",
    "ClaimCheck": "citelock.records",
    "Context": "citelock.records",
    "DroppedChunk": "citelock.records",
    "Finding": "citelock.records",
    "Generation": "citelock.records",
    "GuardReport": "citelock.records",
    "Layer": "citelock.records",
    "Message": "citelock.records",
    "PlacedChunk": "citelock.records",
    "Placement": "citelock.records",
    "PromptRecord": "citelock.records",
    "ReasonCode": "citelock.records",
    "TemplateRef": "citelock.records",
    "Verdict": "citelock.records",
    "BackendLimits": "citelock.constraint._schema",
    "CitationSchema": "citelock.constraint._schema",
    "SchemaOptions": "citelock.constraint._schema",
    "SchemaStats": "citelock.constraint._schema",
    "SpanPolicy": "citelock.constraint._schema",
    "build_schema": "citelock.constraint._schema",
    "fit_schema": "citelock.constraint._schema",
    "classify_claim": "citelock.text._segment",
    "split_sentences": "citelock.text._segment",
    "PromptTemplate": "citelock.prompt._templates",
    "load_template": "citelock.prompt._templates",
    "Backend": "citelock.backends",
    "FakeBackend": "citelock.backends",
    "PromptLog": "citelock.store",
    "ResultStore": "citelock.store",
    "ReviewQueue": "citelock.store",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'citelock' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "ABSTENTION_TEXT",
    "AlreadyResolvedError",
    "Answer",
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
    "ParseError",
    "PlacedChunk",
    "Placement",
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
