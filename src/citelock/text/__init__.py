"""Text tools: question focus, normalization (with offset maps to the raw text), numbers, sentences, claims."""

from citelock.text._focus import AnswerType, QuestionFocus, content_terms, has_answer_type, question_focus, stem
from citelock.text._normalize import (
    compress_offsets,
    norm_offset,
    normalize,
    normalize_all,
    normalize_with_anchors,
    normalize_with_map,
    raw_offset,
)
from citelock.text._numbers import extract_numbers, numbers_in_order
from citelock.text._segment import ClaimKind, classify_claim, split_sentences

__all__ = [
    "AnswerType",
    "ClaimKind",
    "QuestionFocus",
    "classify_claim",
    "compress_offsets",
    "content_terms",
    "extract_numbers",
    "has_answer_type",
    "norm_offset",
    "normalize",
    "normalize_all",
    "normalize_with_anchors",
    "normalize_with_map",
    "numbers_in_order",
    "question_focus",
    "raw_offset",
    "split_sentences",
    "stem",
]
