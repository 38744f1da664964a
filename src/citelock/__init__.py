"""citelock: trustworthy citations for RAG answers.

Assemble a prompt under a budget, log it exactly as sent, parse the answer, and guard every citation
against the logged prompt. See the README for the two-minute tour.
"""

from citelock._version import __version__
from citelock.backends import Backend, FakeBackend, Generation
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
    BudgetExceededError,
    CitelockError,
    ConstraintViolationError,
    InputError,
    MissingExtraError,
    ParseError,
    RuntimeFailure,
    StoreIntegrityError,
    UnparsedAnswerError,
    UsageError,
)
from citelock.guard import check
from citelock.pipeline import (
    GenerationStats,
    GuardedAnswer,
    answer,
    answer_async,
    guarded_answer_json_schema,
    render_answer,
)
from citelock.prompt._assemble import assemble
from citelock.prompt._parse import DEFAULT_MARKERS, MarkerPattern, parse_answer, parse_free_text
from citelock.prompt._serialize import record_from_messages, serialize
from citelock.prompt._templates import PromptTemplate, load_template
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
from citelock.store import PromptLog
from citelock.text._normalize import normalize, normalize_with_map
from citelock.text._segment import classify_claim, split_sentences

__all__ = [
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
