"""The relevance judge: does an answer address the question? An LLM over any text completer, one rigid prompt.

It renders ``prompts/relevance.v1.toml`` with the question and the answer's claims (nothing else: no passage, no
citation), asks the completer for one of ``yes`` / ``partial`` / ``no`` (constrained where the completer can
constrain) and parses strictly: anything else raises :class:`~citelock.errors.JudgeOutputError` with the raw
text. It is separate from the support judge, which never sees the question.
"""

from __future__ import annotations

from collections.abc import Sequence

from citelock.errors import InputError, JudgeOutputError
from citelock.judges._llm import LABEL_SCORES, TextCompleter, load_prompt_file
from citelock.records import Verdict

__all__ = ["RelevanceJudge"]


class RelevanceJudge:
    """Asks a language model whether an answer's claims address the question (``yes`` / ``partial`` / ``no``).

    Example:
        >>> from citelock.judges import OpenAICompleter, RelevanceJudge
        >>> judge = RelevanceJudge(OpenAICompleter(base_url="http://127.0.0.1:8000/v1"))  # doctest: +SKIP
        >>> surface = SurfacePolicy(name="docs", stakes="high", relevance="judged")
        >>> Guard(surface, relevance_judge=judge)  # doctest: +SKIP

    Args:
        completer: Any :class:`~citelock.judges.TextCompleter`. Its ``model_id`` attribute, if present, enters
            the version.
        prompt_version: Which ``prompts/relevance.vN.toml`` to use.
        max_tokens: Generation budget (the answer is one word).
    """

    name = "llm-relevance"

    def __init__(self, completer: TextCompleter, *, prompt_version: str = "1", max_tokens: int = 4) -> None:
        self.completer = completer
        self.prompt = load_prompt_file("relevance", prompt_version, ("question", "claims"))
        self.max_tokens = max_tokens
        model = str(getattr(completer, "model_id", type(completer).__name__))
        self.version = f"relevance.v{self.prompt.version}/{model}"

    def messages(self, question: str, claims: Sequence[str]) -> list[dict[str, str]]:
        """The chat messages for one answer (question and claims inserted verbatim, one claim per line)."""
        if not claims:
            raise InputError("the relevance judge needs at least one claim; an answer without claims is not judged")
        lines = "\n".join(f"- {' '.join(c.split())}" for c in claims)
        user = self.prompt.user.replace("{question}", " ".join(question.split()), 1)
        head, _sep, tail = user.rpartition("{claims}")
        return [{"role": "system", "content": self.prompt.system}, {"role": "user", "content": head + lines + tail}]

    def judge(self, question: str, claims: Sequence[str]) -> Verdict:
        """Ask the model about one answer; the score is the label's (yes 1.0, partial 0.5, no 0.0).

        Raises:
            JudgeOutputError: the model's answer is not exactly one of the three words.
            InputError: no claims.
        """
        raw = self.completer.complete(
            self.messages(question, claims), choices=list(self.prompt.choices), max_tokens=self.max_tokens
        )
        answer = raw.strip().lower()
        if answer not in self.prompt.choices:
            raise JudgeOutputError(raw, self.prompt.choices)
        return Verdict(label=answer, raw=raw, judge=self.name, version=self.version, score=LABEL_SCORES[answer])
