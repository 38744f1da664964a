"""An LLM support judge over any text completer, and a llama.cpp completer for local GGUF models.

The judge renders ``prompts/judge.v1.toml`` with the claim and the passage (nothing else), asks the completer
for one of ``yes`` / ``partial`` / ``no`` — constrained where the completer can constrain (a GBNF grammar for
llama.cpp; a JSON-schema enum or regex for other backends) — and parses strictly: anything but one of the three
words raises :class:`JudgeOutputError` carrying the raw text. The policy layer fails closed on errors.

Its score is the label mapped to a number (:data:`LABEL_SCORES`: yes 1.0, partial 0.5, no 0.0): the completers
return text, not token log-probabilities, so there is no finer confidence to report. A routing fitted on these
scores can only draw its thresholds between the three values.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from citelock.errors import InputError, JudgeOutputError, MissingExtraError, RuntimeFailure
from citelock.prompt import prompts_dir
from citelock.records import Verdict

__all__ = [
    "LABEL_SCORES",
    "JudgePrompt",
    "LLMJudge",
    "LlamaCppCompleter",
    "TextCompleter",
    "choices_grammar",
    "load_judge_prompt",
    "load_prompt_file",
]


@runtime_checkable
class TextCompleter(Protocol):
    """Anything that turns chat messages into text, optionally restricted to a list of exact choices."""

    def complete(self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int) -> str:
        """Generate text for ``messages``; when ``choices`` is given, constrain the output to one of them."""
        ...


LABEL_SCORES = {"yes": 1.0, "partial": 0.5, "no": 0.0}


@dataclass(frozen=True)
class JudgePrompt:
    """The judge's versioned prompt template."""

    name: str
    version: str
    system: str
    user: str
    choices: tuple[str, ...]

    def messages(self, claim: str, passage: str) -> list[dict[str, str]]:
        """The chat messages for one pair (the claim and passage are inserted verbatim)."""
        user = self.user.replace("{passage}", passage, 1)
        # the claim goes in after the passage was inserted, at the one remaining placeholder after it
        head, sep, tail = user.rpartition("{claim}")
        if not sep:
            raise InputError(f"judge prompt {self.name}.v{self.version}: the user message has no {{claim}}")
        return [{"role": "system", "content": self.system}, {"role": "user", "content": head + claim + tail}]


@cache
def load_judge_prompt(version: str = "1") -> JudgePrompt:
    """Load ``prompts/judge.v<version>.toml``.

    Raises:
        InputError: the file is missing or lacks a key.
    """
    return load_prompt_file("judge", version, ("passage", "claim"))


@cache
def load_prompt_file(name: str, version: str, placeholders: tuple[str, ...]) -> JudgePrompt:
    """Load ``prompts/<name>.v<version>.toml``, a judge prompt whose user message holds every placeholder.

    Raises:
        InputError: the file is missing, lacks a key, or its user message lacks a placeholder.
    """
    path = prompts_dir() / f"{name}.v{version}.toml"
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        prompt = JudgePrompt(
            name=str(data["name"]),
            version=str(data["version"]),
            system=str(data["system"]),
            user=str(data["user"]),
            choices=tuple(str(c) for c in data["choices"]),
        )
    except FileNotFoundError:
        raise InputError(f"no judge prompt {path.name} in {path.parent.name}/") from None
    except KeyError as exc:
        raise InputError(f"judge prompt {path.name}: missing key {exc.args[0]!r}") from None
    missing = [p for p in placeholders if "{" + p + "}" not in prompt.user]
    if missing:
        raise InputError(
            f"judge prompt {path.name}: the user message has no {', '.join('{' + m + '}' for m in missing)}"
        )
    return prompt


class LLMJudge:
    """A support judge that asks a language model.

    Args:
        completer: Any :class:`TextCompleter`. Its ``model_id`` attribute, if present, enters the version.
        prompt_version: Which ``prompts/judge.vN.toml`` to use.
        max_tokens: Generation budget (the answer is one word).
    """

    name = "llm"

    def __init__(self, completer: TextCompleter, *, prompt_version: str = "1", max_tokens: int = 4) -> None:
        self.completer = completer
        self.prompt = load_judge_prompt(prompt_version)
        self.max_tokens = max_tokens
        model = str(getattr(completer, "model_id", type(completer).__name__))
        self.version = f"judge.v{self.prompt.version}/{model}"

    def judge(self, claim: str, passage: str) -> Verdict:
        """Ask the model about one pair; the score is the label's (:data:`LABEL_SCORES`).

        Raises:
            JudgeOutputError: the model's answer is not exactly one of the three words.
        """
        messages = self.prompt.messages(claim, passage)
        raw = self.completer.complete(messages, choices=list(self.prompt.choices), max_tokens=self.max_tokens)
        answer = raw.strip().lower()
        if answer not in self.prompt.choices:
            raise JudgeOutputError(raw, self.prompt.choices)
        return Verdict(label=answer, raw=raw, judge=self.name, version=self.version, score=LABEL_SCORES[answer])


def choices_grammar(choices: list[str]) -> str:
    """A GBNF grammar whose only sentences are ``choices`` (e.g. ``root ::= "yes" | "partial" | "no"``)."""
    if not choices:
        raise InputError("choices_grammar needs at least one choice, got none")
    quoted = []
    for choice in choices:
        escaped = choice.replace("\\", "\\\\").replace('"', '\\"')
        quoted.append(f'"{escaped}"')
    return "root ::= " + " | ".join(quoted)


class LlamaCppCompleter:
    """A :class:`TextCompleter` over llama-cpp-python, constraining choices with a GBNF grammar.

    Args:
        model_path: A GGUF file; None uses the bundled SmolLM2-135M
            (``citelock.backends.locate_model("smollm2")``).
        n_ctx: Context window in tokens. A prompt that does not fit raises RuntimeFailure (never truncated).
        seed: Sampling seed (decoding is greedy anyway).
        n_threads: CPU threads (None: llama.cpp's default).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 8192,
        seed: int = 0,
        n_threads: int | None = None,
    ) -> None:
        try:
            import llama_cpp
        except ImportError:
            raise MissingExtraError("local", "llama_cpp") from None
        from citelock.runtime import load_llama, locate_model

        path = Path(model_path) if model_path is not None else locate_model("smollm2")
        if not path.is_file():
            raise InputError(f"model file {path} does not exist (expected a .gguf file)")
        self._llama_cpp: Any = llama_cpp
        self.model_id = path.name
        self._llm: Any = load_llama(
            llama_cpp, model_path=str(path), n_ctx=n_ctx, seed=seed, n_threads=n_threads, verbose=False
        )
        self._grammars: dict[tuple[str, ...], Any] = {}

    def complete(self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int) -> str:
        """Greedy chat completion, restricted to ``choices`` by a grammar when given.

        Raises:
            RuntimeFailure: llama.cpp refused the request (e.g. the prompt exceeds the context window).
        """
        grammar = None
        if choices:
            key = tuple(choices)
            if key not in self._grammars:
                self._grammars[key] = self._llama_cpp.LlamaGrammar.from_string(choices_grammar(choices), verbose=False)
            grammar = self._grammars[key]
        try:
            out = self._llm.create_chat_completion(
                messages=messages, grammar=grammar, max_tokens=max_tokens, temperature=0.0
            )
        except ValueError as exc:
            raise RuntimeFailure(f"llama.cpp refused the judge request: {exc}") from None
        content = out["choices"][0]["message"]["content"]
        return content if isinstance(content, str) else ""
