"""Text tools: normalization (with offset maps back to the raw text), numbers, sentence and claim segmentation."""

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
    "ClaimKind",
    "classify_claim",
    "compress_offsets",
    "extract_numbers",
    "norm_offset",
    "normalize",
    "normalize_all",
    "normalize_with_anchors",
    "normalize_with_map",
    "numbers_in_order",
    "raw_offset",
    "split_sentences",
]
