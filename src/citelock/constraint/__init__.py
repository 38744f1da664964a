"""Constraints: backend limits, the per-request citation schema, its grammar and pydantic model.

:func:`build_schema` / :func:`fit_schema` make a request's :class:`CitationSchema` (JSON Schema, Lark and GBNF
grammars) from its context, a :class:`SpanPolicy` and the backend's :class:`BackendLimits`; :func:`build_model`
is the same constraint as a pydantic model (for instructor). The grammar pieces are shared by both dialects.
"""

from citelock.constraint._gbnf import gbnf_grammar, gbnf_literal
from citelock.constraint._grammar import QUOTE_LEAD_INS, QUOTE_MIN_WORDS, quote_body, quote_tails, word_pieces
from citelock.constraint._limits import BackendLimits
from citelock.constraint._model import build_model
from citelock.constraint._policy import DEFAULT_POLICY, POLICY_ORDER, GrammarDialect, SpanPolicy
from citelock.constraint._schema import (
    CitationSchema,
    SchemaOptions,
    SchemaStats,
    build_schema,
    clear_schema_cache,
    fit_schema,
)

__all__ = [
    "DEFAULT_POLICY",
    "POLICY_ORDER",
    "QUOTE_LEAD_INS",
    "QUOTE_MIN_WORDS",
    "BackendLimits",
    "CitationSchema",
    "GrammarDialect",
    "SchemaOptions",
    "SchemaStats",
    "SpanPolicy",
    "build_model",
    "build_schema",
    "clear_schema_cache",
    "fit_schema",
    "gbnf_grammar",
    "gbnf_literal",
    "quote_body",
    "quote_tails",
    "word_pieces",
]
