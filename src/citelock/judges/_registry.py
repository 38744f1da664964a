"""Judges by name, for the command line and configuration files."""

from __future__ import annotations

from pathlib import Path

from citelock.errors import UsageError
from citelock.judges._protocol import Judge

__all__ = ["DEFAULT_JUDGE", "JUDGE_NAMES", "default_judge", "make_judge"]

JUDGE_NAMES = ("offline", "lexical", "llm")
# The judge used when none is given. Measured on held-out data (WiCE, ExpertQA, AttributionBench), the trained
# offline judge does not beat the lexical overlap score: its AUC is within 0.04 of it and, at the shipped
# routing, its false pass rate exceeds the 5% target on ExpertQA (0.158) and AttributionBench (0.112) where the
# lexical routing stays at or under it (0.038, 0.043). So the calibrated lexical score is the honest default;
# ``offline`` stays available by name.
DEFAULT_JUDGE = "lexical"


def default_judge() -> Judge:
    """The judge citelock uses when none is given (:data:`DEFAULT_JUDGE`: the calibrated lexical score).

    Its verdicts route by the shipped routing (``params/routing.lexical.json``): label ``yes`` is route
    ``pass``, ``partial`` is ``review``, ``no`` is ``fail``.
    """
    return make_judge(DEFAULT_JUDGE)


def make_judge(
    name: str, *, model: Path | None = None, base_url: str | None = None, api_model: str | None = None
) -> Judge:
    """Build a judge by name: ``lexical`` (the default: calibrated word overlap), ``offline`` or ``llm``.

    Args:
        name: One of :data:`JUDGE_NAMES`.
        model: For ``llm`` run in-process: a GGUF file (default: the bundled SmolLM2-135M-Instruct).
        base_url: For ``llm`` on an OpenAI-compatible server (its ``/v1`` URL) instead of in-process.
        api_model: With ``base_url``: the server's model name (default: the first model it lists).

    Raises:
        UsageError: an unknown name.
        MissingExtraError: ``llm`` without the ``local`` extra.
    """
    if name != "llm" and (base_url is not None or api_model is not None):
        raise UsageError(f"base_url and api_model are for the llm judge, not {name!r}")
    if name == "offline":
        from citelock.judges._offline import OfflineJudge

        return OfflineJudge()
    if name == "lexical":
        from citelock.judges._lexical import LexicalJudge

        return LexicalJudge()
    if name == "llm":
        from citelock.judges._llm import LlamaCppCompleter, LLMJudge

        if base_url is not None:
            if model is not None:
                raise UsageError("give either a GGUF model (in-process) or a base_url (a server), not both")
            from citelock.judges._openai_completer import OpenAICompleter

            return LLMJudge(OpenAICompleter(base_url=base_url, model=api_model))
        if api_model is not None:
            raise UsageError("api_model names a server's model: give base_url too")
        return LLMJudge(LlamaCppCompleter(model))
    raise UsageError(f"unknown judge {name!r}; expected one of {', '.join(JUDGE_NAMES)}")
