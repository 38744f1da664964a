"""The outlines backend: any outlines 1.x model, each request's constraint passed as an outlines output type.

``OutlinesBackend(outlines.from_llamacpp(llama))`` (or ``from_transformers``, ``from_mlxlm``,
``from_vllm_offline``, an outlines server client for vLLM, SGLang, OpenAI...) turns the per-request citation schema
into an outlines output type: ``outlines.types.CFG`` for ``quote``, ``quote_sentence`` and ``substring`` (Lark on
the llguidance backend for the steerable models; GBNF for servers whose engine reads it), ``JsonSchema`` for
``sentence`` and ``id``. What a model type cannot take is data (:data:`MODEL_KINDS`: its :class:`BackendLimits`),
so :func:`citelock.constraint.fit_schema` downgrades the policy before anything is sent and records why, as for servers.

Facts designed around (read in outlines 1.3 and llguidance 1.x):

- outlines builds a new backend object (the llguidance tokenizer, from the whole vocabulary) in every
  ``Generator(...)`` and ``model(..., output_type)`` call. Here the llguidance backend is built once per model and
  each request gets its own logits processor (one matcher), so concurrent requests never share state.
- llguidance's ``grammar_from("grammar", text)``, which outlines' CFG path calls first, reads ``text`` as Lark
  only when a line starts with ``start:`` or ``%llguidance`` and tries GBNF otherwise. The citation grammar is
  compiled explicitly as Lark (``grammar_from("lark", ...)``), never guessed.
- llama-cpp-python calls logits processors inside a ctypes sampler callback that prints and swallows an
  exception, then samples from the *unconstrained* logits; outlines' llguidance processor only warns on a matcher
  error. The processor here records every engine error instead (and then lets only end-of-sequence through, so
  decoding stops at once), and every output is verified against the prompt's ids and spans after decoding: an
  engine error or an output outside the constraint raises :class:`citelock.ConstraintViolationError`, never an
  answer reported as enforced.
- ``VLLMOffline`` and the server clients are black boxes to outlines (it passes the output type to the engine);
  their output is verified the same way. Transformers, VLLMOffline and dottxt do not stream:
  :meth:`OutlinesBackend.stream` yields their whole output as one delta; the others stream through outlines'
  ``generate_stream`` (``astream`` for the async clients).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citelock._steps import Step, arun_steps, run_steps
from citelock.backends._local import LOCAL_LIMITS
from citelock.backends._outlines_steer import Steering, counting_processor
from citelock.backends._protocol import Generation, stream_in_thread
from citelock.backends._relay import arelay
from citelock.constraint._limits import BackendLimits
from citelock.constraint._policy import GrammarDialect
from citelock.constraint._schema import CitationSchema
from citelock.errors import ConstraintViolationError, MissingExtraError, TruncatedOutputError, UsageError
from citelock.records import PromptRecord
from citelock.runtime._profiles import PROFILES

__all__ = ["MODEL_KINDS", "ModelKind", "OutlinesBackend", "OutlinesGeneration"]

_GRAMMAR_POLICIES = ("quote", "quote_sentence", "substring")
"""Policies sent as an outlines ``CFG``; ``sentence`` and ``id`` travel as ``JsonSchema``."""
_OUTPUT_TYPE_CACHE = 32
"""Output types kept per backend (the most recently used), as the local backend keeps compiled grammars."""

_FREE_TEXT = BackendLimits(policies=())
_JSON_ONLY = BackendLimits(
    policies=("sentence", "id"),
    max_enum_values=1_000,
    max_enum_chars=60_000,
    max_nesting=10,
    json_schema=True,
)
"""A client whose engine takes a JSON Schema and no grammar (TGI, Ollama, LM Studio, Mistral, Gemini...). The
enum bounds are ours (request size), as for the JSON Schema servers in :data:`citelock.backends.PROFILES`."""


@dataclass(frozen=True)
class ModelKind:
    """How citelock constrains one outlines model type (data: adding a type is adding a row).

    Attributes:
        name: The outlines model class (``LlamaCpp``, ``Transformers``, ``VLLMOffline``, ``OpenAI``...).
        steerable: outlines runs a logits processor in-process (llama.cpp, Transformers, MLX): the constraint is
            an llguidance matcher built here; otherwise the output type goes to the engine as is (a black box).
        limits: What the constraint engine takes; :func:`citelock.constraint.fit_schema` downgrades to fit.
        grammar: The dialect a ``CFG`` is written in for this engine (``lark`` or ``gbnf``), None: no grammar.
        max_tokens_arg: The inference keyword that bounds generation (``sampling_params`` for vLLM offline: a
            ``SamplingParams(max_tokens=...)``); None: the type takes none through outlines (pass one in
            ``inference_kwargs``).
        is_async: ``model.generate`` is a coroutine (use :meth:`OutlinesBackend.agenerate`).
        serial: One request at a time on one model object (llama.cpp contexts are not thread-safe).
        streams: outlines can stream this type (``generate_stream``).
    """

    name: str
    steerable: bool
    limits: BackendLimits
    grammar: GrammarDialect | None
    max_tokens_arg: str | None = "max_tokens"
    is_async: bool = False
    serial: bool = False
    streams: bool = True


def _grammar_limits(kind: str, delivery: str) -> BackendLimits:
    limits = PROFILES[kind].delivery(delivery).limits
    assert limits is not None
    return limits


def _kinds() -> dict[str, ModelKind]:
    vllm = _grammar_limits("vllm", "structured_outputs_grammar")
    sglang = _grammar_limits("sglang", "ebnf")
    openai = PROFILES["openai"].limits
    rows = [
        ModelKind("LlamaCpp", True, LOCAL_LIMITS, "lark", serial=True),
        ModelKind("Transformers", True, LOCAL_LIMITS, "lark", "max_new_tokens", streams=False),
        ModelKind("TransformersMultiModal", True, LOCAL_LIMITS, "lark", "max_new_tokens", streams=False),
        ModelKind("MLXLM", True, LOCAL_LIMITS, "lark"),
        ModelKind("VLLMOffline", False, vllm, "gbnf", "sampling_params", streams=False),
        ModelKind("VLLM", False, vllm, "gbnf"),
        ModelKind("AsyncVLLM", False, vllm, "gbnf", is_async=True),
        ModelKind("SGLang", False, sglang, "gbnf"),
        ModelKind("AsyncSGLang", False, sglang, "gbnf", is_async=True),
        ModelKind("OpenAI", False, openai, None, PROFILES["openai"].max_tokens_field),
        ModelKind("AsyncOpenAI", False, openai, None, PROFILES["openai"].max_tokens_field, is_async=True),
        ModelKind("TGI", False, _JSON_ONLY, None, "max_new_tokens"),
        ModelKind("AsyncTGI", False, _JSON_ONLY, None, "max_new_tokens", is_async=True),
        ModelKind("Ollama", False, _JSON_ONLY, None, None),
        ModelKind("AsyncOllama", False, _JSON_ONLY, None, None, is_async=True),
        ModelKind("LMStudio", False, _JSON_ONLY, None, None),
        ModelKind("AsyncLMStudio", False, _JSON_ONLY, None, None, is_async=True),
        ModelKind("Mistral", False, _JSON_ONLY, None),
        ModelKind("AsyncMistral", False, _JSON_ONLY, None, is_async=True),
        ModelKind("Gemini", False, _JSON_ONLY, None, "max_output_tokens"),
        ModelKind("Dottxt", False, _JSON_ONLY, None, None, streams=False),
        ModelKind("AsyncDottxt", False, _JSON_ONLY, None, None, is_async=True, streams=False),
    ]
    return {row.name: row for row in rows}


MODEL_KINDS: dict[str, ModelKind] = _kinds()
"""Every outlines 1.x model type citelock constrains, by class name. Steerable types take every span policy
(llguidance, with the local backend's limits); vLLM and SGLang clients take GBNF grammars within their profiles'
grammar limits; the other clients take JSON Schema only (``sentence`` and ``id``; OpenAI's strict mode also
``quote_sentence``, within OpenAI's documented limits)."""


@dataclass(frozen=True)
class OutlinesGeneration(Generation):
    """A :class:`Generation` with what went through outlines.

    Attributes:
        model_type: The outlines model class (a :data:`MODEL_KINDS` name).
        output_type: The outlines output type sent: ``CFG (lark)``, ``CFG (gbnf)`` or ``JsonSchema``.
        constraint_ms: Time to turn the schema into the output type and, for steerable models, its logits
            processor (the llguidance backend itself is built once per model, not per request).
    """

    model_type: str = ""
    output_type: str = ""
    constraint_ms: float = 0.0


def _import_outlines() -> Any:
    try:
        import outlines
        import outlines.types
    except ImportError:
        raise MissingExtraError("outlines", "outlines") from None
    return outlines


def _kind_of(model: Any) -> ModelKind:
    for cls in type(model).__mro__:
        if cls.__module__.startswith("outlines.") and cls.__name__ in MODEL_KINDS:
            return MODEL_KINDS[cls.__name__]
    raise UsageError(
        "OutlinesBackend needs an outlines 1.x model (outlines.from_llamacpp(llama_cpp.Llama(...)), "
        "from_transformers, from_mlxlm, from_vllm_offline, from_vllm, from_sglang, from_openai...), a GGUF path or a "
        f"bundled model name; got {type(model).__module__}.{type(model).__qualname__} "
        f"(known outlines types: {', '.join(MODEL_KINDS)})"
    )


def _llamacpp_model(name_or_path: str, n_ctx: int) -> Any:
    """An outlines llama.cpp model over a bundled model (``smollm2``, ``gemma3``) or a GGUF file path."""
    from citelock.runtime._llama import MODELS, _import_llama, default_threads, load_llama, locate_model

    spec = MODELS.get(name_or_path)
    path = locate_model(name_or_path) if spec is not None else Path(name_or_path).expanduser()
    if not path.is_file():
        raise UsageError(
            f"OutlinesBackend: {name_or_path!r} is neither a bundled model ({', '.join(MODELS)}) nor a GGUF file"
        )
    outlines = _import_outlines()
    llama_cpp = _import_llama()
    threads = default_threads()
    llm = load_llama(
        llama_cpp,
        model_path=str(path),
        n_ctx=n_ctx,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    return outlines.from_llamacpp(llm, chat_mode=spec.chat if spec is not None else True)


class OutlinesBackend:
    """Any outlines 1.x model as a constrained citelock backend.

    Example:
        >>> import llama_cpp, outlines  # doctest: +SKIP
        >>> model = outlines.from_llamacpp(llama_cpp.Llama(model_path="model.gguf"))  # doctest: +SKIP
        >>> Citelock(backend=OutlinesBackend(model)).answer("When did it open?", chunks)  # doctest: +SKIP

    Args:
        model: An outlines model (``outlines.from_llamacpp(...)``, ``from_transformers(...)``, a server client...),
            or, for outlines' llama.cpp model type, a GGUF file path or a bundled model name (``smollm2``,
            ``gemma3``): what ``citelock answer --backend outlines --model PATH`` passes.
        limits: What the model type's engine takes; default: its :data:`MODEL_KINDS` row.
        inference_kwargs: Extra keyword arguments for every ``model.generate`` call (sampling settings, a server
            model name...). Greedy decoding (``temperature=0`` / ``do_sample=False``) unless they say otherwise.
        engine_limits: ``llguidance.LLParserLimits`` for steerable models; default: the local backend's
            (:func:`citelock.runtime._llama.parser_limits`), sized for citation grammars up to ``limits``.
        constrain: False: send no constraint (free text with ``[id]`` markers, the naive baseline on this model;
            the backend then advertises no span policy).
        n_ctx: Context window when ``model`` is a path or a bundled name.

    Raises:
        UsageError: ``model`` is not an outlines model, a GGUF path or a bundled model name.
        MissingExtraError: ``outlines`` (or, for steerable models, ``llguidance``) is not installed.
    """

    name = "outlines"

    def __init__(
        self,
        model: Any,
        *,
        limits: BackendLimits | None = None,
        inference_kwargs: Mapping[str, Any] | None = None,
        engine_limits: Any = None,
        constrain: bool = True,
        n_ctx: int = 8192,
    ) -> None:
        if model is None:
            raise UsageError(
                "OutlinesBackend needs a model: OutlinesBackend(outlines.from_llamacpp(llama_cpp.Llama("
                "model_path=...))), or a GGUF path or bundled model name (OutlinesBackend('smollm2'))"
            )
        if isinstance(model, str | Path):
            model = _llamacpp_model(str(model), n_ctx)
        self.kind = _kind_of(model)
        self.model = model
        self.constrain = constrain
        self.limits = _FREE_TEXT if not constrain else limits if limits is not None else self.kind.limits
        self.inference_kwargs = dict(inference_kwargs or {})
        self._engine_limits = engine_limits
        self._steering: Any = None
        self._setup_lock = threading.Lock()
        self._model_lock = threading.Lock() if self.kind.serial else None
        self._output_types: dict[tuple[str, str], Any] = {}

    @property
    def model_label(self) -> str:
        """The model reported on answers: the GGUF file name for llama.cpp, else the model's name or type."""
        inner = getattr(self.model, "model", None)
        path = getattr(inner, "model_path", None)
        if isinstance(path, str):
            return Path(path).name
        named = getattr(self.model, "model_name", None)
        return named if isinstance(named, str) and named else self.kind.name

    def output_type(self, schema: CitationSchema) -> Any:
        """The outlines output type for ``schema``: ``CFG`` for grammar policies, ``JsonSchema`` for the others.

        Built once per distinct constraint (a bounded cache: outlines' ``JsonSchema`` validates the schema against
        the JSON Schema meta-schema, 7-13 ms per call); steerable models do not need it (:meth:`generate` hands
        their llguidance backend the grammar or schema text directly).

        Raises:
            UsageError: the schema breaks this model type's limits (fit it with :func:`citelock.constraint.fit_schema`).
        """
        dialect, text = self._sent(schema)
        key = (dialect, text)
        with self._setup_lock:
            cached = self._output_types.pop(key, None)
            if cached is not None:
                self._output_types[key] = cached  # most recently used last
                return cached
        types = _import_outlines().types
        made = types.CFG(text) if dialect != "json_schema" else types.JsonSchema(text)
        with self._setup_lock:
            self._output_types[key] = made
            while len(self._output_types) > _OUTPUT_TYPE_CACHE:
                self._output_types.pop(next(iter(self._output_types)))
        return made

    def _sent(self, schema: CitationSchema) -> tuple[str, str]:
        """What the constraint engine gets: (``lark`` | ``gbnf`` | ``json_schema``, the grammar or schema text)."""
        problem = self.limits.violation(schema)
        if problem is not None:
            raise UsageError(
                f"not sent: {problem}; fit the schema to this model type first "
                "(citelock.constraint.fit_schema(context, policy, backend.limits) downgrades it)"
            )
        if schema.policy in _GRAMMAR_POLICIES:
            if self.kind.grammar is None:  # only reachable with limits= wider than the engine
                raise UsageError(f"outlines' {self.kind.name} takes no grammar; the {schema.policy} policy needs one")
            return self.kind.grammar, schema.grammar_in(self.kind.grammar)
        sent = schema.guidance_json_schema() if self.kind.steerable else schema.json_schema
        return "json_schema", json.dumps(sent)  # as outlines' JsonSchema writes a dict (ensure_ascii)

    def _steer(self) -> Steering:
        with self._setup_lock:
            if self._steering is None:
                self._steering = Steering(self.model, self._engine_limits)
            steering: Steering = self._steering
            return steering

    def _prepare(self, record: PromptRecord, schema: CitationSchema | None, max_tokens: int) -> _Request:
        if (schema is None) == self.constrain:
            raise UsageError(
                "OutlinesBackend(constrain=False) takes no schema"
                if schema is not None
                else "OutlinesBackend constrains decoding and needs a CitationSchema (constrain=False for free text)"
            )
        kwargs = {**_greedy(self.kind), **_budget(self.kind, max_tokens), **self.inference_kwargs}
        if schema is None:
            counter = counting_processor(self.model.tensor_library_name) if self.kind.steerable else None
            return _Request(self._input(record), None, counter, kwargs, "none")
        steering = self._steer() if self.kind.steerable else None  # once per model: not this request's cost
        started = time.perf_counter()
        if steering is not None:  # the text straight to llguidance: no outlines output type to build
            output_type, processor = None, steering.processor(*self._sent(schema))
        else:
            output_type, processor = self.output_type(schema), None
        constraint_ms = (time.perf_counter() - started) * 1000
        described = f"CFG ({self.kind.grammar})" if schema.policy in _GRAMMAR_POLICIES else "JsonSchema"
        return _Request(self._input(record), output_type, processor, kwargs, described, constraint_ms)

    def _input(self, record: PromptRecord) -> Any:
        """The messages exactly as logged: an outlines ``Chat``, or plain text for a model without a chat template."""
        adapter = getattr(self.model, "type_adapter", None)
        if self.kind.name == "LlamaCpp" and not getattr(adapter, "has_chat_template", True):
            body = "\n\n".join(m.content for m in record.messages)  # as the local runtime prompts a base model
            return body + ("\n\nAnswer (JSON): " if self.constrain else "\n\nAnswer: ")
        from outlines.inputs import Chat

        return Chat([{"role": m.role, "content": m.content} for m in record.messages])

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> OutlinesGeneration:
        """Generate for ``record`` under ``schema``; the output is verified before it is returned.

        Raises:
            UsageError: no schema, a schema over this model type's limits, or an async model (use
                :meth:`agenerate`).
            ConstraintViolationError: the constraint engine failed during decoding, or the output is not an
                answer the schema allows (ids, spans).
            TruncatedOutputError: generation stopped at ``max_tokens`` before the answer was complete.
        """
        if self.kind.is_async:
            raise UsageError(f"outlines' {self.kind.name} is async; call agenerate (citelock.aanswer)")
        return run_steps(self._generating(record, schema, max_tokens))

    async def agenerate(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> OutlinesGeneration:
        """:meth:`generate` without blocking the event loop (awaited on async model types, else in a thread).

        Raises:
            CitelockError: the same errors as :meth:`generate`.
        """
        if not self.kind.is_async:
            return await asyncio.to_thread(self.generate, record, schema, max_tokens=max_tokens)
        return await arun_steps(self._generating(record, schema, max_tokens))

    def _generating(
        self, record: PromptRecord, schema: CitationSchema | None, max_tokens: int
    ) -> Generator[Step, Any, OutlinesGeneration]:
        """One generation, once for :meth:`generate` and :meth:`agenerate`: prepare, generate, verify."""
        request = self._prepare(record, schema, max_tokens)
        started = time.perf_counter()
        call = functools.partial(self.model.generate, request.model_input, request.constraint, **request.kwargs)
        text = yield Step(functools.partial(self._locked, call), call)  # awaited on an async model type
        return self._verified(record, schema, request, text, started, max_tokens)

    def _locked(self, call: Callable[[], Any]) -> Any:
        """``call()`` under the model's lock when one request at a time may use it (llama.cpp)."""
        if self._model_lock is None:
            return call()
        with self._model_lock:
            return call()

    def stream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> Iterator[str | OutlinesGeneration]:
        """:meth:`generate` delta by delta (outlines' ``generate_stream``), then the verified :class:`Generation`.

        The deltas are the text outlines streams (empty ones are skipped); their concatenation is the returned
        generation's text, verified exactly as :meth:`generate` verifies it. A model type outlines does not
        stream (Transformers, VLLMOffline, dottxt) yields its whole output as one delta. Closing the iterator
        stops generation (outlines' generator, and llama.cpp's decode under it, is closed).

        Raises:
            UsageError: as :meth:`generate` (an async model type: use :meth:`astream`).
            ConstraintViolationError: the constraint engine failed during decoding, or the output is not an
                answer the schema allows.
        """
        if self.kind.is_async:
            raise UsageError(f"outlines' {self.kind.name} is async; call astream (citelock.Citelock.astream)")
        if not self.kind.streams:
            yield from _whole_items(self.generate(record, schema, max_tokens=max_tokens))
            return
        run = _StreamRun(self, record, schema, max_tokens)
        with self._streaming(), closing(run.open()) as source:  # opened under the model's lock, closed first
            for piece in source:
                if run.take(piece):
                    yield piece
        yield run.generation()  # the lock released, llama.cpp reset: the model is free again

    async def astream(
        self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int
    ) -> AsyncIterator[str | OutlinesGeneration]:
        """:meth:`stream` without blocking the event loop: awaited on async model types, else in a worker thread.

        ``aclose()`` (or a cancelled task) stops generation.

        Raises:
            CitelockError: the same errors as :meth:`stream`.
        """
        if not self.kind.is_async:
            source = stream_in_thread(lambda: self.stream(record, schema, max_tokens=max_tokens))
        elif not self.kind.streams:
            source = _whole(await self.agenerate(record, schema, max_tokens=max_tokens))
        else:
            run = _StreamRun(self, record, schema, max_tokens)
            source = arelay(run, run.open())
        async for item in source:
            yield item

    @contextmanager
    def _streaming(self) -> Iterator[None]:
        """A blocking stream's hold on the model: its lock (a serial model), then llama.cpp's reset after it.

        The lock is released even when opening the stream fails.
        """
        lock = self._model_lock
        if lock is not None:
            lock.acquire()
        try:
            yield
        finally:
            self._after_stream()
            if lock is not None:
                lock.release()

    def _after_stream(self) -> None:
        """What outlines' ``generate`` does after a call and its ``generate_stream`` does not: reset llama.cpp."""
        if self.kind.name == "LlamaCpp":
            reset = getattr(getattr(self.model, "model", None), "reset", None)
            if callable(reset):
                reset()

    def _verified(
        self,
        record: PromptRecord,
        schema: CitationSchema | None,
        request: _Request,
        text: Any,
        started: float,
        max_tokens: int,
        *,
        streamed: bool = False,
    ) -> OutlinesGeneration:
        """The generation, verified.

        ``streamed``: a cut at ``max_tokens`` is reported (``finish_reason="length"``), for the stream's driver to
        persist the checked claims and raise, rather than raised here.
        """
        total = time.perf_counter() - started
        if not isinstance(text, str):
            raise ConstraintViolationError(
                f"outlines' {self.kind.name} returned {type(text).__name__}, expected the generated text"
            )
        processor = request.processor
        sampled = processor.calls if processor is not None else None
        if schema is None:
            return self._generation(text, request, sampled, total, started, max_tokens, enforced=False)
        if processor is not None and processor.error is not None:
            raise ConstraintViolationError(
                f"request {record.request_id}: the constraint engine failed mid-decode after {sampled} tokens "
                f"({processor.error[:300]}); the output is not constrained and is not used: {text[:120]!r}"
            )
        if _truncated(text, sampled, max_tokens):
            if streamed:  # the constraint held up to the cut: the pipeline raises TruncatedOutputError after it
                return self._generation(
                    text, request, sampled, total, started, max_tokens, enforced=True, truncated=True
                )
            raise TruncatedOutputError(
                f"request {record.request_id}: the output stopped at max_tokens={max_tokens} before the answer "
                f"was complete (got {text[-60:]!r}); raise max_tokens or lower the SchemaOptions bounds",
                partial=text,
                max_tokens=max_tokens,
                provider=f"outlines {self.kind.name}",
                citelock_request_id=record.request_id,
            )
        try:
            schema.parse_output(text)
        except ConstraintViolationError as exc:
            raise ConstraintViolationError(
                f"request {record.request_id}: outlines' {self.kind.name} output broke the constraint sent as "
                f"{request.described}: {exc}"
            ) from None
        return self._generation(text, request, sampled, total, started, max_tokens, enforced=True)

    def _generation(
        self,
        text: str,
        request: _Request,
        sampled: int | None,
        total: float,
        started: float,
        max_tokens: int,
        *,
        enforced: bool,
        truncated: bool = False,
    ) -> OutlinesGeneration:
        processor = request.processor
        first = processor.first_token_s(started) if processor is not None else None
        # every sampled token went through the processor; one that ended generation early was end-of-sequence
        cut = truncated or (sampled is not None and sampled >= max_tokens)
        tokens = None if sampled is None else sampled if cut else max(sampled - 1, 0)
        notes = [f"outlines {self.kind.name}: output type {request.described}"]
        if enforced:
            notes.append(f"constraint_ms={request.constraint_ms:.1f}")
            mask_s = getattr(processor, "mask_s", None)
            if mask_s is not None:
                notes.append(f"mask_ms={mask_s * 1000:.1f}")  # as the local backend notes its own
        return OutlinesGeneration(
            text=text,
            backend=self.name,
            model=self.model_label,
            enforced=enforced,
            completion_tokens=tokens,
            latency_s=total,
            first_token_s=first,
            # an enforced output was verified complete, unless a stream reports its cut (``truncated``)
            finish_reason="length" if cut and (not enforced or truncated) else "stop",
            notes=tuple(notes),
            model_type=self.kind.name,
            output_type=request.described,
            constraint_ms=request.constraint_ms,
        )


class _StreamRun:
    """One stream's request and the pieces that arrived (no I/O: ``stream`` and ``astream`` do the reading)."""

    def __init__(
        self, backend: OutlinesBackend, record: PromptRecord, schema: CitationSchema | None, max_tokens: int
    ) -> None:
        self.backend, self.record, self.schema, self.max_tokens = backend, record, schema, max_tokens
        self.request = backend._prepare(record, schema, max_tokens)
        self.started = time.perf_counter()
        self.pieces: list[str] = []

    def open(self) -> Any:
        """The stream of text pieces outlines opens for this request (a generator; async on async model types)."""
        request = self.request
        return self.backend.model.generate_stream(request.model_input, request.constraint, **request.kwargs)

    def take(self, piece: str) -> str:
        """One piece outlines streamed (empty ones are skipped)."""
        if piece:
            self.pieces.append(piece)
        return piece

    def generation(self) -> OutlinesGeneration:
        """The streamed text, verified (a cut at ``max_tokens`` is reported on it, for the driver to raise)."""
        text = "".join(self.pieces)
        return self.backend._verified(
            self.record, self.schema, self.request, text, self.started, self.max_tokens, streamed=True
        )


def _whole_items(generation: OutlinesGeneration) -> Iterator[str | OutlinesGeneration]:
    """A model type outlines does not stream: its whole output as one delta, then its generation."""
    yield generation.text
    yield generation


async def _whole(generation: OutlinesGeneration) -> AsyncIterator[str | OutlinesGeneration]:
    for item in _whole_items(generation):
        yield item


@dataclass
class _Request:
    model_input: Any
    output_type: Any
    processor: Any
    kwargs: dict[str, Any] = field(default_factory=dict)
    described: str = ""
    constraint_ms: float = 0.0

    @property
    def constraint(self) -> Any:
        """What ``model.generate`` takes: the logits processor (steerable) or the output type (black box)."""
        return self.processor if self.processor is not None else self.output_type


def _greedy(kind: ModelKind) -> dict[str, Any]:
    if kind.name in ("Transformers", "TransformersMultiModal"):
        return {"do_sample": False}
    if kind.max_tokens_arg in (None, "sampling_params") or kind.name.endswith("Ollama"):
        return {}
    return {"temperature": 0.0}


def _budget(kind: ModelKind, max_tokens: int) -> dict[str, Any]:
    if kind.max_tokens_arg is None:
        return {}
    if kind.max_tokens_arg == "sampling_params":
        import importlib

        vllm: Any = importlib.import_module("vllm")  # only reached with a VLLMOffline model: vLLM is installed
        return {"sampling_params": vllm.SamplingParams(max_tokens=max_tokens, temperature=0.0)}
    return {kind.max_tokens_arg: max_tokens}


def _truncated(text: str, tokens: int | None, max_tokens: int) -> bool:
    if tokens is not None and tokens < max_tokens:
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return tokens is not None  # a black box's cut is found by verification (it reports no token count)
    return False
