"""The local backends: a bundled model on llama.cpp, constrained (``LocalBackend``) or free text (``NaiveBackend``).

``LocalBackend`` decodes under the per-request llguidance grammar; ``NaiveBackend`` is the baseline: the same
model and context, writing free text with ``[id]`` markers.

Nothing heavy is imported until the first ``generate``: llama-cpp-python, llguidance and the model package load
lazily, and a missing one raises :class:`citelock.MissingExtraError` naming ``pip install "citelock[local]"``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from citelock.backends._protocol import Generation
from citelock.constraint import BackendLimits, CitationSchema
from citelock.errors import UsageError
from citelock.records import PromptRecord
from citelock.runtime import MODELS, DecodeResult, LlamaRuntime, runtime

__all__ = ["LOCAL_LIMITS", "LocalBackend", "NaiveBackend"]

LOCAL_LIMITS = BackendLimits(
    policies=("quote", "quote_sentence", "substring", "sentence", "id"),
    max_grammar_chars=600_000,
    max_substring_chunks=1_000,
)
"""llguidance takes every policy. Measured on SmolLM2's vocabulary with :func:`parser_limits`: a ``substring``
matcher for 1,000 short chunks (410 KB of grammar) compiles in ~0.7 s, and llguidance refuses the lexer
configuration of substring grammars past ~730 KB (e.g. 1,000 chunks of 300 characters), so grammars over 600 KB,
or over 1,000 quotable chunks, are downgraded to ``sentence`` (1,000 chunks compile in ~0.1 s). A ``quote``
grammar spells every quotable sentence tail as a literal, so it grows with the square of sentence length and meets
the 600 KB bound first (near 200 chunks of ~600 characters of short sentences, ~60 real web passages); it then
downgrades to ``quote_sentence``. ``benchmarks/bench_local_grammar.py`` profiles every policy from 10 to 1,000
chunks; with :func:`parser_limits` every grammar under these bounds decodes
(``tests/constraint/test_local_grammar_limits.py`` decodes one at the edge of each), and ``sentence`` /
``quote_sentence`` grammars of up to 1.5 MB did too, so the bound is the substring lexer's."""


class _LocalBase:
    """Shared model handling for the two local backends."""

    name: str
    limits: BackendLimits

    def __init__(self, model: str = "smollm2", *, n_ctx: int = 8192, temperature: float = 0.0, seed: int = 0) -> None:
        if model not in MODELS:
            raise UsageError(f"unknown local model {model!r}; expected one of {sorted(MODELS)}")
        self.model_name = model
        self.model = MODELS[model].label
        self.n_ctx = n_ctx
        self.temperature = temperature
        self.seed = seed

    @property
    def runtime(self) -> LlamaRuntime:
        """The loaded model (loaded on first use, shared by every backend on the same model)."""
        return runtime(self.model_name, n_ctx=self.n_ctx)

    def _generation(self, result: DecodeResult, *, enforced: bool, notes: tuple[str, ...] = ()) -> Generation:
        return Generation(
            text=result.text,
            backend=self.name,
            model=self.model,
            enforced=enforced,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=len(result.tokens),
            latency_s=result.total_s,
            first_token_s=result.first_token_s,
            finish_reason=result.finish_reason,
            notes=notes,
        )


class LocalBackend(_LocalBase):
    """A bundled model whose decoding is constrained by the per-request citation grammar.

    Every policy is enforced with the schema's llguidance grammar (``substring`` needs it; for ``sentence`` and
    ``id`` it is exactly equivalent to the JSON Schema and has no free whitespace). The output is then verified
    again by :meth:`CitationSchema.parse_output` in :func:`citelock.answer`.

    Args:
        model: ``smollm2`` (SmolLM2-135M-Instruct, the embedded default) or ``gemma3`` (Gemma 3 270M base,
            plain completion; needs ``citelock[gemma]``).
        n_ctx: Context window in tokens.
        temperature: 0 for greedy decoding (deterministic); otherwise sampling with ``seed``.
        seed: Sampling seed.
        fast_forward: Feed tokens the grammar forces (``{"claims":[{"text":"`` and the like) in one batch
            instead of sampling them one by one.
    """

    name = "local"

    def __init__(
        self,
        model: str = "smollm2",
        *,
        n_ctx: int = 8192,
        temperature: float = 0.0,
        seed: int = 0,
        fast_forward: bool = True,
        limits: BackendLimits = LOCAL_LIMITS,
    ) -> None:
        super().__init__(model, n_ctx=n_ctx, temperature=temperature, seed=seed)
        self.fast_forward = fast_forward
        self.limits = limits
        self._compiled: dict[str, str] = {}

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Generation:
        """Generate a constrained answer for ``record``.

        Raises:
            UsageError: no schema was given (use :class:`NaiveBackend` for free text).
            ConstraintViolationError: the constraint engine failed during decoding.
            MissingExtraError: the ``local`` extra (or ``gemma`` for gemma3) is not installed.
        """
        return _drain(self.stream(record, schema, max_tokens=max_tokens))

    def stream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> Iterator[str | Generation]:
        """:meth:`generate` step by step: the text of every decode step, then the :class:`Generation`.

        Closing the iterator stops decoding.

        Raises:
            CitelockError: the same errors as :meth:`generate`.
        """
        if schema is None:
            raise UsageError(
                "LocalBackend constrains decoding and needs a CitationSchema; for free text use NaiveBackend"
            )
        rt = self.runtime
        grammar = self._compiled.get(schema.grammar)
        if grammar is None:
            grammar = rt.compile(schema.grammar)
            if len(self._compiled) > 32:
                self._compiled.clear()
            self._compiled[schema.grammar] = grammar
        prompt = rt.format_prompt([(m.role, m.content) for m in record.messages], structured=True)
        steps = rt.decode_stream(
            rt.tokenize(prompt),
            grammar,
            max_tokens=max_tokens,
            temperature=self.temperature,
            seed=self.seed,
            fast_forward=self.fast_forward,
        )
        result = yield from _steps(steps)
        notes = (f"forced_tokens={result.forced_tokens}", f"mask_ms={result.mask_s * 1000:.1f}")
        yield self._generation(result, enforced=True, notes=notes)


class NaiveBackend(_LocalBase):
    """The baseline: the same bundled model writes free text with ``[id]`` markers, parsed afterwards.

    It advertises no span policy (``limits.policies == ()``), so :func:`citelock.answer` sends no schema, uses
    the ``answer_naive`` template and parses the output with the free-text parser.
    """

    name = "naive"

    def __init__(self, model: str = "smollm2", *, n_ctx: int = 8192, temperature: float = 0.0, seed: int = 0) -> None:
        super().__init__(model, n_ctx=n_ctx, temperature=temperature, seed=seed)
        self.limits = BackendLimits(policies=())

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Generation:
        """Generate free text for ``record`` (``schema`` must be None: nothing is constrained)."""
        return _drain(self.stream(record, schema, max_tokens=max_tokens))

    def stream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> Iterator[str | Generation]:
        """:meth:`generate` step by step: the text of every token, then the :class:`Generation` (close to stop)."""
        if schema is not None:
            raise UsageError("NaiveBackend does not constrain decoding; it takes no schema")
        rt = self.runtime
        prompt = rt.format_prompt([(m.role, m.content) for m in record.messages], structured=False)
        # A base model has no end-of-turn token: a blank line or a new "Question" ends its answer.
        stop = () if rt.spec.chat else ("\n\n", "<question>", "Question:")
        steps = rt.decode_stream(
            rt.tokenize(prompt), None, max_tokens=max_tokens, temperature=self.temperature, seed=self.seed, stop=stop
        )
        result = yield from _steps(steps)
        yield self._generation(result, enforced=False)


def _steps(steps: Generator[str, None, DecodeResult]) -> Generator[str, None, DecodeResult]:
    """Yield a decode's non-empty step texts; return its result (closing this closes the decode)."""
    try:
        while True:
            try:
                piece = next(steps)
            except StopIteration as done:
                result: DecodeResult = done.value
                return result
            if piece:
                yield piece
    finally:
        steps.close()


def _drain(items: Iterator[str | Generation]) -> Generation:
    """The :class:`Generation` a stream ends with."""
    last: Any = None
    for last in items:  # noqa: B007 - only the last item matters
        pass
    if not isinstance(last, Generation):
        raise UsageError("a backend stream ended without its Generation")
    return last
