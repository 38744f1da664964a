"""Support judges (protocol, the calibrated lexical default, a trained offline judge, LLM) and the relevance judge."""

from citelock.errors import JudgeOutputError
from citelock.judges._lexical import LexicalJudge, lexical_overlap
from citelock.judges._llm import LlamaCppCompleter, LLMJudge, TextCompleter, choices_grammar, load_judge_prompt
from citelock.judges._offline import OfflineJudge
from citelock.judges._openai_completer import OpenAICompleter
from citelock.judges._protocol import Judge
from citelock.judges._registry import DEFAULT_JUDGE, JUDGE_NAMES, default_judge, make_judge
from citelock.judges._relevance_judge import RelevanceJudge

__all__ = [
    "DEFAULT_JUDGE",
    "JUDGE_NAMES",
    "Judge",
    "JudgeOutputError",
    "LLMJudge",
    "LexicalJudge",
    "LlamaCppCompleter",
    "OfflineJudge",
    "OpenAICompleter",
    "RelevanceJudge",
    "TextCompleter",
    "choices_grammar",
    "default_judge",
    "lexical_overlap",
    "load_judge_prompt",
    "make_judge",
]
