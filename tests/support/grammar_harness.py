"""Runs an llguidance Lark grammar over exact strings with a 256-byte vocabulary: no model needed.

Shared by the schema and quote tests (as ``openai_transport.py`` is by the server tests).
"""

from __future__ import annotations

import llguidance


class _ByteTokenizer:
    """A 256-byte vocabulary plus an end-of-sequence token."""

    def __init__(self) -> None:
        self.tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
        self.eos_token_id = 256
        self.bos_token_id = None
        self.special_token_ids = [256]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text if isinstance(text, bytes) else text.encode("utf-8"))


_TOKENIZER = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))


def accepts(grammar: str, text: str) -> bool:
    """True when the grammar compiles and accepts exactly ``text``."""
    matcher = llguidance.LLMatcher(_TOKENIZER, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return bool(matcher.consume_tokens(list(text.encode("utf-8"))) and matcher.is_accepting())


def accepts_gbnf(grammar: str, text: str) -> bool:
    """True when the GBNF grammar (converted by llguidance, as vLLM's and SGLang's guidance backends do) accepts
    exactly ``text``."""
    compiled = llguidance.grammar_from("ebnf", grammar)
    matcher = llguidance.LLMatcher(_TOKENIZER, compiled, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return bool(matcher.consume_tokens(list(text.encode("utf-8"))) and matcher.is_accepting())
