"""citelock: trustworthy citations for RAG answers.

Assemble a prompt under a budget, log it exactly as sent, parse the answer, and guard every citation
against the logged prompt. See the README for the two-minute tour.
"""

from citelock._context import assemble
from citelock._errors import (
    BudgetExceededError,
    CitelockError,
    ConstraintViolationError,
    InputError,
    MissingExtraError,
    ParseError,
    RuntimeFailure,
    StoreIntegrityError,
    UsageError,
)
from citelock._normalize import normalize, normalize_with_map
from citelock._parse import DEFAULT_MARKERS, MarkerPattern, parse_answer, parse_free_text
from citelock._prompt import record_from_messages, serialize
from citelock._records import (
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
from citelock._segment import classify_claim, split_sentences
from citelock._templates import PromptTemplate, load_template
from citelock.guard import check
from citelock.store import PromptLog

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MARKERS",
    "Answer",
    "BudgetExceededError",
    "Chunk",
    "Citation",
    "CitationCheck",
    "CitelockError",
    "Claim",
    "ClaimCheck",
    "ConstraintViolationError",
    "Context",
    "DroppedChunk",
    "Finding",
    "GuardReport",
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
    "StoreIntegrityError",
    "TemplateRef",
    "UsageError",
    "Verdict",
    "__version__",
    "assemble",
    "check",
    "classify_claim",
    "load_template",
    "normalize",
    "normalize_with_map",
    "parse_answer",
    "parse_free_text",
    "record_from_messages",
    "serialize",
    "split_sentences",
]
