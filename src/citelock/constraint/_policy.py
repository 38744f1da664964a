"""The span policies' names, their order (strongest first), the default, and the grammar dialects.

:mod:`citelock.constraint._schema` builds a schema for each policy; :class:`~citelock.constraint.BackendLimits`
says which policies and dialect a backend takes.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "DEFAULT_POLICY",
    "GRAMMAR_DIALECTS",
    "GRAMMAR_ONLY",
    "POLICY_ORDER",
    "GrammarDialect",
    "SpanPolicy",
]

SpanPolicy = Literal["quote", "quote_sentence", "substring", "sentence", "id"]
GrammarDialect = Literal["lark", "gbnf"]
GRAMMAR_DIALECTS: tuple[GrammarDialect, ...] = ("lark", "gbnf")
"""The grammar dialects a schema is spelled in: llguidance's Lark (:attr:`CitationSchema.grammar`) and GBNF
(:attr:`CitationSchema.gbnf`: llama.cpp's ``grammar``; SGLang and vLLM read it as EBNF)."""
POLICY_ORDER: tuple[SpanPolicy, ...] = ("quote", "quote_sentence", "substring", "sentence", "id")
"""Every span policy, strongest first."""
DEFAULT_POLICY: SpanPolicy = "substring"
"""The one default of the library and the command line: the mission's contract, for any caller's prompt and wording.

Each citation's id is one of this prompt's and its span verbatim text of that chunk; a backend without a substring
primitive gets ``sentence``, then ``id``, and the downgrade is recorded. ``quote`` (the claim's text is itself a
verbatim span: support by construction) is the stricter choice a high-stakes surface makes explicitly."""
GRAMMAR_ONLY: tuple[SpanPolicy, ...] = ("quote", "substring")
"""The policies only a grammar can enforce (their JSON Schema is a looser shape)."""
