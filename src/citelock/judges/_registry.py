"""Judges by name, for the command line and configuration files."""

from __future__ import annotations

from pathlib import Path

from citelock._errors import UsageError
from citelock.judges._protocol import Judge

__all__ = ["JUDGE_NAMES", "make_judge"]

JUDGE_NAMES = ("offline", "lexical", "llm")


def make_judge(name: str, *, model: Path | None = None) -> Judge:
    """Build a judge by name: ``offline`` (the default judge), ``lexical`` (the baseline) or ``llm``.

    Args:
        name: One of :data:`JUDGE_NAMES`.
        model: For ``llm``: a GGUF file (default: the bundled SmolLM2-135M-Instruct).

    Raises:
        UsageError: an unknown name.
        MissingExtraError: ``llm`` without the ``local`` extra.
    """
    if name == "offline":
        from citelock.judges._offline import OfflineJudge

        return OfflineJudge()
    if name == "lexical":
        from citelock.judges._lexical import LexicalJudge

        return LexicalJudge()
    if name == "llm":
        from citelock.judges._llm import LlamaCppCompleter, LLMJudge

        return LLMJudge(LlamaCppCompleter(model))
    raise UsageError(f"unknown judge {name!r}; expected one of {', '.join(JUDGE_NAMES)}")
