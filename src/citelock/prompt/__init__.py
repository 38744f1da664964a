"""Prompts: templates, assembly under a budget, serialization, the prompt index, answer parsing.

The prompt index (``_index``) is guard ①'s primitive: it lives here, below the backends, so a backend that
validates its own output asks exactly the question the guard asks.
"""

from citelock.prompt._assemble import assemble, coerce_chunks, render_messages
from citelock.prompt._index import PromptIndex, check_citation, describe
from citelock.prompt._parse import (
    ABSTENTION_SENTENCE,
    DEFAULT_MARKERS,
    MarkerPattern,
    declared_policy,
    parse_answer,
    parse_for_record,
    parse_free_text,
)
from citelock.prompt._retrieve import lexical_top_k
from citelock.prompt._serialize import (
    MIN_TRUNCATED_PREFIX,
    messages_sha256,
    record_from_messages,
    serialize,
)
from citelock.prompt._templates import PromptTemplate, load_template, prompts_dir
from citelock.prompt._verify import derived_problem, load_record, verified_record

__all__ = [
    "ABSTENTION_SENTENCE",
    "DEFAULT_MARKERS",
    "MIN_TRUNCATED_PREFIX",
    "MarkerPattern",
    "PromptIndex",
    "PromptTemplate",
    "assemble",
    "check_citation",
    "coerce_chunks",
    "declared_policy",
    "derived_problem",
    "describe",
    "lexical_top_k",
    "load_record",
    "load_template",
    "messages_sha256",
    "parse_answer",
    "parse_for_record",
    "parse_free_text",
    "prompts_dir",
    "record_from_messages",
    "render_messages",
    "serialize",
    "verified_record",
]
