"""Support judges: the protocol, the calibrated lexical default, a trained offline judge, an LLM judge."""

from citelock.judges._lexical import LexicalJudge, lexical_overlap
from citelock.judges._llm import (
    JudgeOutputError,
    LlamaCppCompleter,
    LLMJudge,
    TextCompleter,
    choices_grammar,
    load_judge_prompt,
)
from citelock.judges._offline import OfflineJudge
from citelock.judges._openai_completer import OpenAICompleter
from citelock.judges._protocol import Judge
from citelock.judges._registry import DEFAULT_JUDGE, JUDGE_NAMES, default_judge, make_judge
from citelock.store._verdict_cache import CachedJudge, MemoryVerdictCache, SqlVerdictCache, VerdictCache, cache_key

__all__ = [
    "DEFAULT_JUDGE",
    "JUDGE_NAMES",
    "CachedJudge",
    "Judge",
    "JudgeOutputError",
    "LLMJudge",
    "LexicalJudge",
    "LlamaCppCompleter",
    "MemoryVerdictCache",
    "OfflineJudge",
    "OpenAICompleter",
    "SqlVerdictCache",
    "TextCompleter",
    "VerdictCache",
    "cache_key",
    "choices_grammar",
    "default_judge",
    "lexical_overlap",
    "load_judge_prompt",
    "make_judge",
]
