"""The per-request core: prepare one request, and the runner every door hands it to.

:func:`prepare` assembles a request from a question and chunks (the context, the per-request schema fitted to the
backend, the serialized record). :class:`Runner` is the one runner of a prepared request, shared by
``Citelock.answer`` / ``aanswer`` / ``stream`` / ``astream`` and ``wrap``'s ``create`` (and, later, the gateway
and the framework adapters): it appends the prompt log, guards a whole generation, or builds the guarded stream
whose guard is a fold over its claims (:class:`~citelock.guard._fold.GuardFold`). A door adds no request logic of
its own: it translates its caller's shapes into a :class:`Prepared` request and reads the
:class:`~citelock.GuardedAnswer` back.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from time import perf_counter
from typing import TYPE_CHECKING, Any, Literal, Protocol

from citelock._guarded import GenerationStats, GuardedAnswer
from citelock.backends._protocol import Backend
from citelock.constraint import BackendLimits, CitationSchema, SchemaOptions, SpanPolicy, fit_schema
from citelock.errors import (
    InputError,
    OutputBoundsError,
    ParseError,
    TruncatedOutputError,
    UnparsedAnswerError,
    UsageError,
)
from citelock.guard import Guard, GuardResult
from citelock.guard._abstain import ABSTAIN_NOTE, ABSTENTION_TEXT, Abstaining, early_abstention
from citelock.guard._focus_check import Stakes
from citelock.guard._ranked import RankedRequest, rank_request
from citelock.prompt import PromptTemplate, assemble, parse_answer, serialize
from citelock.prompt._parse import parse_constrained
from citelock.prompt._serialize import with_history
from citelock.records import Answer, Chunk, Context, Finding, Generation, Message, PromptRecord
from citelock.render import RenderStyle, render_answer, require_style
from citelock.store import PromptLog, ResultStore, ReviewQueue
from citelock.telemetry._hook import trace_metadata

if TYPE_CHECKING:
    from citelock.guard._fold import GuardFold
    from citelock.stream import OnDiverge, Show
    from citelock.stream._drive import StreamJob

__all__ = [
    "NAIVE_MAX_TOKENS",
    "Prepared",
    "Request",
    "Runner",
    "fit",
    "guarded",
    "output_bounds",
    "parse",
    "prepare",
    "rank",
    "stats",
]

NAIVE_MAX_TOKENS = 384


@dataclass(frozen=True)
class Request:
    """One request's parameters, made once at a public entry and passed on as one object.

    Every door builds it from its explicit keyword arguments (``Citelock.answer`` / ``aanswer`` / ``stream`` /
    ``astream`` with :meth:`of`, ``wrap``'s ``create`` from the call it located); after the entry no door passes
    the parameters one by one. A None is "the client's" (its policy, render style, known ids) or "the surface's
    default" (``show``, ``on_diverge``), resolved by :class:`Runner` and :func:`prepare`.
    """

    question: str
    chunks: tuple[Chunk | Mapping[str, Any], ...]
    request_id: str | None = None
    metadata: Mapping[str, Any] | None = None
    policy: SpanPolicy | None = None
    max_tokens: int | None = None
    render: RenderStyle | None = None
    known_ids: Collection[str] | None = None
    history: tuple[Message | Mapping[str, Any], ...] | None = None
    show: Show | None = None
    on_diverge: OnDiverge | None = None

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> Request:
        """The request a public entry's arguments describe (its ``locals()``: names that are not fields are ignored).

        The chunks and the history are read once, here (a generator passed as ``chunks`` is consumed once).
        """
        given = {f.name: arguments[f.name] for f in fields(cls) if f.name in arguments}
        given["chunks"] = _sequence("chunks", given["chunks"], "chunks (Chunk objects or mappings with id and text)")
        if given.get("history") is not None:
            given["history"] = _sequence(
                "history", given["history"], "messages (Message objects or role/content mappings)"
            )
        if given.get("render") is not None:
            require_style(given["render"])
        return cls(**given)

    def showing(self, show: Show | None) -> Request:
        """This request under another show policy (None: keep this one's)."""
        return self if show is None else replace(self, show=show)


def _sequence(name: str, value: Any, expected: str) -> tuple[Any, ...]:
    """``value`` read once into a tuple; a value that is no iterable of items (a number, a string) is refused."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InputError(f"{name} must be an iterable of {expected}, got {type(value).__name__}")
    return tuple(value)


@dataclass(frozen=True)
class Prepared:
    """One request, prepared: its context, the logged record, the schema and the generation bounds."""

    context: Context
    record: PromptRecord
    schema: CitationSchema | None
    schema_build_ms: float | None
    requested: SpanPolicy | None
    template: str
    max_tokens: int
    admits_nothing: bool = False
    """The ranked grammar admits no sentence the guard would serve (a surface that abstains abstains)."""


def prepare(
    request: Request,
    backend: Backend,
    policy: SpanPolicy,
    *,
    template: str | PromptTemplate | None,
    max_chars: int | None,
    on_overflow: Literal["error", "drop"],
    options: SchemaOptions | None,
    stakes: Stakes | None = None,
) -> Prepared:
    """Assemble, build the schema and serialize one request (not logged: :meth:`Runner.log` appends it).

    ``policy`` is the request's span policy resolved against the client's; the rest is the client's
    configuration. ``stakes`` is the guarding surface's (None: low): the ranked grammar admits only sentences the
    guard would serve at those stakes (:func:`citelock.guard._ranked.rank_request`).
    """
    question, chunks, max_tokens = request.question, request.chunks, request.max_tokens
    constrains = backend.limits.constrains
    tmpl = template if template is not None else ("answer_structured" if constrains else "answer_naive")
    context = assemble(question, chunks, template=tmpl, max_chars=max_chars, on_overflow=on_overflow)
    # the slot ranking hook (issue #35): chunks best first, the grammar admits only the top sentences
    ranked = rank(context, policy if constrains else None, options, stakes)
    if ranked is not None and [c.id for c in ranked.chunks] != list(context.ids):
        # the chunks that fit, best first; the chunks the first assembly left out stay recorded as dropped
        reordered = assemble(question, ranked.chunks, template=tmpl, max_chars=max_chars, on_overflow=on_overflow)
        context = reordered.model_copy(update={"dropped": context.dropped + reordered.dropped})
    schema: CitationSchema | None = None
    build_ms: float | None = None
    if constrains:
        schema, build_ms = fit(context, policy, backend.limits, options, ranked)
    meta = {**trace_metadata(), **(request.metadata or {})}  # the trace it was answered in, for later audits
    meta.setdefault("backend", backend.name)
    meta["span_policy"] = schema.policy if schema is not None else None
    if schema is not None and schema.downgrade_reason:
        meta["downgrade_reason"] = schema.downgrade_reason
    record = serialize(context, template=tmpl, request_id=request.request_id, metadata=meta)
    if request.history is not None:
        record = with_history(record, request.history)  # [system, *history, user]: the whole conversation as sent
    if max_tokens is None:
        max_tokens = schema.max_output_chars() if schema is not None else NAIVE_MAX_TOKENS
    if max_tokens < 1:
        raise UsageError(f"max_tokens must be positive, got {max_tokens}")
    name = f"{record.template.name}.v{record.template.version}"
    nothing = ranked is not None and ranked.admits_nothing
    return Prepared(context, record, schema, build_ms, policy if constrains else None, name, max_tokens, nothing)


def rank(
    context: Context, policy: SpanPolicy | None, options: SchemaOptions | None, stakes: Stakes | None
) -> RankedRequest | None:
    """The request's ranking (issue #35), the same at every door: ``answer``'s :func:`prepare` and ``wrap``'s.

    ``policy`` is the span policy the schema is built for (None: the backend takes no schema); ``stakes`` the
    guarding surface's (None: low). See :func:`citelock.guard._ranked.rank_request`.
    """
    quote_chars = options.max_text_chars if options is not None else None
    return rank_request(context, policy, stakes=stakes, quote_chars=quote_chars)


def fit(
    context: Context,
    policy: SpanPolicy,
    limits: BackendLimits,
    options: SchemaOptions | None,
    ranked: RankedRequest | None,
) -> tuple[CitationSchema, float]:
    """The per-request schema fitted to ``limits`` under the ranking's admitted set, and its build time (ms).

    ``context`` lists the chunks in the order the schema's enums follow (best first when the request is ranked).
    """
    started = perf_counter()
    schema = fit_schema(context, policy, limits, options, ranked.admitted if ranked is not None else None)
    return schema, (perf_counter() - started) * 1000


def output_bounds(schema: CitationSchema) -> tuple[int, int]:
    """The bounds any backend's output is held to under ``schema``: (claims, characters).

    The characters bound is twice the longest output the schema allows (room for a server's own whitespace): a
    backend that ignored the constraint is cut there, not read on without end.
    """
    return schema.options.max_claims, 2 * schema.max_output_chars()


def _bounds_error(prep: Prepared, bound: str, limit: int, got: int) -> OutputBoundsError:
    return OutputBoundsError(
        f"request {prep.record.request_id}: the output went beyond the schema's bound of {limit} {bound} (it has "
        f"{got}; a backend that ignored the constraint?)",
        bound=bound,
        limit=limit,
        got=got,
    )


def parse(prep: Prepared, generation: Generation) -> Answer:
    """The generation's answer, parsed under the request's schema and bounds (the bounds hold for any backend)."""
    answer = _parse_output(prep, generation)
    if prep.schema is not None and len(answer.claims) > output_bounds(prep.schema)[0]:
        raise _bounds_error(prep, "claims", output_bounds(prep.schema)[0], len(answer.claims))
    return answer


def _parse_output(prep: Prepared, generation: Generation) -> Answer:
    record, schema = prep.record, prep.schema
    if schema is not None and len(generation.text) > output_bounds(schema)[1]:
        raise _bounds_error(prep, "chars", output_bounds(schema)[1], len(generation.text))
    if schema is not None and generation.enforced:
        if generation.finish_reason == "length":
            raise TruncatedOutputError(
                f"request {record.request_id}: generation stopped at max_tokens={prep.max_tokens} before the "
                f"constrained answer was complete; raise max_tokens (the schema allows up to "
                f"{schema.max_output_chars()} characters) or lower the SchemaOptions bounds",
                partial=generation.text,
                max_tokens=prep.max_tokens,
                provider=generation.backend,
                citelock_request_id=record.request_id,
            )
        return schema.parse_output(generation.text)  # ConstraintViolationError if the constraint broke
    try:
        if schema is not None:  # a declared constraint: parsed under its schema or not at all, never as free text
            return parse_constrained(generation.text, schema.policy)
        return parse_answer(generation.text)
    except ParseError as exc:
        raise UnparsedAnswerError(str(exc), record=record, generation=generation, where=exc.where) from None


def _downgrade(schema: CitationSchema, held: str | None) -> str | None:
    """Why the answer's span policy is weaker than asked: the schema's downgrade, or an output that ignored it."""
    if held is None or held == schema.policy:
        return schema.downgrade_reason
    ignored = f"the output did not hold the {schema.policy} constraint (the server ignored it): it held {held}"
    return f"{schema.downgrade_reason}; {ignored}" if schema.downgrade_reason else ignored


def stats(prep: Prepared, generation: Generation) -> GenerationStats:
    speed = None
    if generation.completion_tokens and generation.latency_s > 0:
        decode_s = generation.latency_s - (generation.first_token_s or 0.0)
        speed = generation.completion_tokens / decode_s if decode_s > 0 else None
    return GenerationStats(
        enforced=generation.enforced,
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        latency_s=generation.latency_s,
        first_token_s=generation.first_token_s,
        tokens_per_s=speed,
        finish_reason=generation.finish_reason,
        schema_build_ms=prep.schema_build_ms,
        max_tokens=prep.max_tokens,
        notes=generation.notes,
    )


def guarded(
    prep: Prepared, generation: Generation, parsed: Answer, result: GuardResult, render: RenderStyle
) -> GuardedAnswer:
    record, schema = prep.record, prep.schema
    report = result.report
    early = ABSTAIN_NOTE in generation.notes
    held = (parsed.span_policy or schema.policy) if schema is not None else None
    # Rendering drops or marks claims only when the answer is served (a blocked one is shown whole).
    outcomes = result.claims if result.decision != "block" else None
    return GuardedAnswer(
        request_id=record.request_id,
        question=prep.context.question,
        answer=parsed,
        result=result,
        span_policy=held if schema is not None else None,  # what the output held (the schema's when enforced)
        requested_policy=prep.requested,
        downgrade_reason=_downgrade(schema, held) if schema is not None else None,
        backend=generation.backend,
        model=generation.model,
        template=prep.template,
        prompt_sha256=record.sha256,
        dropped_chunks=prep.context.dropped,
        generation=stats(prep, generation),
        render_style=render,
        rendered=ABSTENTION_TEXT
        if early
        else render_answer(parsed, report, prep.context, style=render, outcomes=outcomes),
    )


class _Config(Protocol):
    """What the runner reads of a :class:`~citelock.Citelock` client: its public configuration."""

    @property
    def log(self) -> PromptLog | None: ...
    @property
    def guard(self) -> Guard: ...
    @property
    def sinks(self) -> tuple[Any, ...]: ...
    @property
    def known_ids(self) -> Collection[str] | None: ...
    @property
    def render(self) -> RenderStyle: ...


class Runner:
    """The one per-request runner every door uses (``Citelock.answer`` / ``stream``, ``wrap``'s ``create``).

    A door prepares its request its own way (assembled from chunks, or the caller's own messages located), then
    hands it here: :meth:`log` appends the prompt (the one place that does), :meth:`abstention` decides whether
    the request is answered without generating (the one place that does), :meth:`finish` parses, guards,
    repairs and persists a whole generation, :meth:`stream_job` builds the guarded stream of one request. It reads
    only the client's public configuration (log, guard, sinks, known ids, render style).

    Args:
        config: The client (:class:`~citelock.Citelock`) whose configuration the request runs under.
    """

    def __init__(self, config: _Config) -> None:
        self.config = config

    def log(self, record: PromptRecord) -> None:
        """Append the prompt exactly as it is sent, before generation (no-op without a prompt log)."""
        if self.config.log is not None:
            self.config.log.append(record)

    def abstention(self, prep: Prepared, backend: object) -> Generation | None:
        """The abstention to answer with instead of generating, or None to generate.

        On a surface that abstains (:func:`citelock.guard._abstain.early_abstention`): nothing assembled is
        relevant enough to the question, or the ranked grammar admits no sentence the guard would serve. Every
        door asks here before it calls its backend or server, so none of them spends a token on such a request.
        """
        return early_abstention(self.config.guard, prep.context, backend, prep.admits_nothing)

    def _style(self, request: Request) -> RenderStyle:
        style = request.render if request.render is not None else self.config.render
        require_style(style)
        return style

    def _scope(self, request: Request) -> Collection[str] | None:
        return request.known_ids if request.known_ids is not None else self.config.known_ids

    def finish(
        self,
        prep: Prepared,
        generation: Generation,
        request: Request,
        *,
        guard: Guard | None = None,
        fold: GuardFold | None = None,
    ) -> GuardedAnswer:
        """Parse, guard (assembled from ``fold`` when a stream checked the claims), render and persist."""
        parsed = parse(prep, generation)
        run = guard if guard is not None else self.config.guard
        result = run.run(prep.record, parsed, known_ids=self._scope(request), fold=fold)
        if ABSTAIN_NOTE in generation.notes:
            result = result.model_copy(update={"abstention": "pipeline"})
        return self.deliver(guarded(prep, generation, parsed, result, self._style(request)), result)

    def deliver(self, answer: GuardedAnswer, result: GuardResult) -> GuardedAnswer:
        """Hand the result to every sink (queue, result store, callables), in order; return the answer."""
        for sink in self.config.sinks:
            if isinstance(sink, ReviewQueue):
                sink.enqueue_result(result)
            elif isinstance(sink, ResultStore):
                sink.append(result)
            else:
                sink(answer, result)
        return answer

    def stream_job(self, prep: Prepared, backend: Backend, request: Request) -> StreamJob[GuardedAnswer]:
        """The stream of a prepared request over ``backend`` (also the wrapped client's ``stream=True`` call).

        When the request is answered without generating (:meth:`abstention`) the stream is the abstention: the
        backend is never called.
        """
        from citelock.stream._drive import StreamJob
        from citelock.stream._session import Session, default_hold, default_on_diverge, default_show, memo_guard

        early = self.abstention(prep, backend)
        if early is not None:
            backend = Abstaining(backend.name, backend.limits, early)
        scope = self._scope(request)
        style = self._style(request)
        config_guard = self.config.guard
        schema = prep.schema
        session = Session(
            record=prep.record,
            guard=memo_guard(config_guard),
            show=request.show if request.show is not None else default_show(config_guard),
            on_diverge=request.on_diverge if request.on_diverge is not None else default_on_diverge(config_guard),
            free_text=schema is None,
            span_policy=schema.policy if schema is not None else None,
            known_ids=scope,
            hold=default_hold(config_guard),
            bounds=output_bounds(schema) if schema is not None else None,
        )

        def finish(generation: Generation, guard: Guard) -> GuardedAnswer:
            return self.finish(prep, generation, request, guard=guard, fold=session.fold)

        def finish_partial(generation: Generation, parsed: Answer, guard: Guard, cut: Finding) -> GuardedAnswer:
            # a fresh fold over the claims checked by then (judges in flight may be cancelled), on the same index
            fold = guard.fold(prep.record, known_ids=scope, index=session.fold.index)
            result = guard.run(prep.record, parsed, known_ids=scope, fold=fold)
            findings = (*result.report.findings, cut)
            report = result.report.model_copy(update={"findings": findings, "ok": False})
            result = result.model_copy(update={"report": report, "decision": "block"})
            return self.deliver(guarded(prep, generation, parsed, result, style), result)

        return StreamJob(backend, prep.record, prep.schema, prep.max_tokens, session, finish, finish_partial)
