"""The wrapper API: ``citelock.answer(question, chunks, backend=...)`` around a team's generation call.

One call assembles the context, builds the per-request citation schema (downgrading it to fit the backend),
serializes and logs the prompt, generates, parses, runs guard ①② (and, with ``surface=``, the tiered surface
policy with the support judge ③) and renders the answer's citation markers as footnotes, links or nothing.
Under a surface whose ``on_fail`` is ``drop_claim`` or ``mark`` the rendered answer omits the failing claims
or marks them ``(unverified: REASON)``. The result, :class:`GuardedAnswer`, is a record: the answer, the
guard's findings, what was removed or marked and why, the span policy actually used and why, and the
generation's accounting.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock.backends._protocol import Backend, Generation
from citelock.constraint._schema import CitationSchema, SchemaOptions, SpanPolicy, fit_schema
from citelock.errors import ParseError, TruncatedOutputError, UnparsedAnswerError, UsageError
from citelock.guard import (
    ClaimOutcome,
    Decision,
    JudgeAccounting,
    PolicyResult,
    SurfacePolicy,
    check,
    guard,
    resolve_routing,
)
from citelock.judges import Judge
from citelock.prompt._assemble import assemble
from citelock.prompt._parse import parse_answer
from citelock.prompt._serialize import serialize
from citelock.prompt._templates import PromptTemplate
from citelock.records import Answer, Chunk, Context, DroppedChunk, Finding, GuardReport, PromptRecord
from citelock.store import PromptLog, ResultStore, ReviewQueue

__all__ = [
    "ABSTENTION_TEXT",
    "GUARDED_ANSWER_SCHEMA_VERSION",
    "GenerationStats",
    "GuardedAnswer",
    "RenderStyle",
    "answer",
    "answer_async",
    "guarded_answer_json_schema",
    "render_answer",
]

GUARDED_ANSWER_SCHEMA_VERSION: Literal["1"] = "1"
RenderStyle = Literal["footnotes", "links", "none"]
NAIVE_MAX_TOKENS = 384
ABSTENTION_TEXT = "The sources provided do not answer this question."
"""How an abstention (:attr:`Answer.abstained`) is rendered."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GenerationStats(_Record):
    """Accounting of one generation.

    Attributes:
        enforced: The backend enforced the constraint during decoding (verified after the fact).
        prompt_tokens: Prompt tokens, if known.
        completion_tokens: Generated tokens, if known.
        latency_s: Wall time of the backend call.
        first_token_s: Time to first token, if measured.
        tokens_per_s: Decoding speed, if measured.
        finish_reason: ``stop``, ``length`` or backend-specific.
        schema_build_ms: Time to build the citation schema (0 when it came from the cache).
        max_tokens: The token budget the backend was given.
        notes: What the backend wants recorded.
    """

    enforced: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    first_token_s: float | None = None
    tokens_per_s: float | None = None
    finish_reason: str | None = None
    schema_build_ms: float | None = None
    max_tokens: int
    notes: tuple[str, ...] = ()


class GuardedAnswer(_Record):
    """An answer with its guard report, as :func:`citelock.answer` returns it (JSON Schema in ``schemas/``).

    Attributes:
        request_id: The request id (the prompt log's key).
        question: The question.
        answer: The parsed answer: claims with ``citations[].chunk_id`` / ``span``.
        report: The guard's report (① provenance, ② coverage, number pre-check).
        findings: The report's findings (also in ``report``), at the top for convenience.
        ok: True when the served answer is clean: without a surface, the guard found nothing; with one, the
            decision is ``pass``. False for a ``repaired`` answer (served, but with claims dropped or marked) and
            for a ``block``-ed one (not to be served).
        span_policy: The span policy decoding enforced (None when nothing was constrained: the naive baseline).
        requested_policy: The policy the caller asked for.
        downgrade_reason: Why ``span_policy`` is weaker than ``requested_policy``, if it is.
        backend: Backend name.
        model: Model name.
        template: The prompt template used (``name.vVERSION``).
        prompt_sha256: sha256 of the messages as sent.
        dropped: Chunks assembly dropped to meet the budget.
        generation: The generation's accounting.
        render_style: How ``rendered`` shows citations.
        rendered: The answer text with its citation markers rendered, without the dropped claims (and the
            footnotes only they used), with marked claims followed by ``(unverified: REASON, ...)``. For a
            blocked answer it is the whole answer, for inspection: do not serve it.
        surface: The surface policy's name, when the tiered guard ran (``surface=``).
        decision: ``pass``, ``repaired`` or ``block`` under that policy (None without one).
        accounting: Support-judge calls made and saved under that policy (None without one).
        removed: The claims dropped from ``rendered`` (``on_fail="drop_claim"``), with their reason codes.
        marked: The claims ``rendered`` marks unverified (``on_fail="mark"``), with their reason codes.
    """

    schema_version: Literal["1"] = GUARDED_ANSWER_SCHEMA_VERSION
    request_id: str
    question: str
    answer: Answer
    report: GuardReport
    findings: tuple[Finding, ...]
    ok: bool
    span_policy: SpanPolicy | None
    requested_policy: SpanPolicy | None
    downgrade_reason: str | None = None
    backend: str
    model: str
    template: str
    prompt_sha256: str
    dropped: tuple[DroppedChunk, ...] = ()
    generation: GenerationStats
    render_style: RenderStyle
    rendered: str = Field(description="the answer text with citation markers rendered per render_style")
    surface: str | None = None
    decision: Decision | None = None
    accounting: JudgeAccounting | None = None
    removed: tuple[ClaimOutcome, ...] = ()
    marked: tuple[ClaimOutcome, ...] = ()

    @property
    def served(self) -> bool:
        """True unless the surface blocked the answer (``pass``, ``repaired``, or no surface)."""
        return self.decision != "block"


def guarded_answer_json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`GuardedAnswer` (for ``schemas/``)."""
    return GuardedAnswer.model_json_schema()


@dataclass(frozen=True)
class _Prepared:
    context: Context
    record: PromptRecord
    schema: CitationSchema | None
    schema_build_ms: float | None
    requested: SpanPolicy | None
    template: str
    max_tokens: int


_default_backend: Backend | None = None


def default_backend() -> Backend:
    """The embedded default: the local backend with the bundled SmolLM2-135M-Instruct (loaded once)."""
    global _default_backend
    if _default_backend is None:
        from citelock.backends._local import LocalBackend

        _default_backend = LocalBackend()
    return _default_backend


def _prepare(
    question: str,
    chunks: Iterable[Chunk | Mapping[str, Any]],
    backend: Backend,
    policy: SpanPolicy,
    *,
    log: PromptLog | str | Path | None,
    template: str | PromptTemplate | None,
    max_chars: int | None,
    on_overflow: Literal["error", "drop"],
    max_tokens: int | None,
    options: SchemaOptions | None,
    request_id: str | None,
    metadata: Mapping[str, Any] | None,
) -> _Prepared:
    if not isinstance(backend, Backend):
        raise UsageError(
            f"backend must implement citelock.Backend (name, limits, generate), got {type(backend).__name__}"
        )
    constrains = backend.limits.constrains
    tmpl = template if template is not None else ("answer_structured" if constrains else "answer_naive")
    context = assemble(question, chunks, template=tmpl, max_chars=max_chars, on_overflow=on_overflow)
    schema: CitationSchema | None = None
    build_ms: float | None = None
    if constrains:
        from time import perf_counter

        started = perf_counter()
        schema = fit_schema(context, policy, backend.limits, options)
        build_ms = (perf_counter() - started) * 1000
    meta = dict(metadata or {})
    meta.setdefault("backend", backend.name)
    meta["span_policy"] = schema.policy if schema is not None else None
    if schema is not None and schema.downgrade_reason:
        meta["downgrade_reason"] = schema.downgrade_reason
    record = serialize(context, template=tmpl, request_id=request_id, metadata=meta)
    if log is not None:
        (log if isinstance(log, PromptLog) else PromptLog(log)).append(record)
    if max_tokens is None:
        max_tokens = schema.max_output_chars() if schema is not None else NAIVE_MAX_TOKENS
    if max_tokens < 1:
        raise UsageError(f"max_tokens must be positive, got {max_tokens}")
    name = f"{record.template.name}.v{record.template.version}"
    return _Prepared(context, record, schema, build_ms, policy if constrains else None, name, max_tokens)


def _finish(
    prep: _Prepared,
    generation: Generation,
    *,
    render: RenderStyle,
    store: Collection[str] | None,
    tiered: _Tiered | None = None,
) -> GuardedAnswer:
    record, schema = prep.record, prep.schema
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
        parsed = schema.parse_output(generation.text)  # ConstraintViolationError if the constraint broke
    else:
        try:
            parsed = parse_answer(generation.text)
        except ParseError as exc:
            raise UnparsedAnswerError(str(exc), record=record, generation=generation) from None
    policy_result = None
    if tiered is None:
        report = check(record, parsed, store=store)
    else:
        policy_result = guard(
            record, parsed, policy=tiered.surface, judge=tiered.judge, escalate=tiered.escalate, store=store,
            queue=tiered.queue, results=tiered.results,
        )  # fmt: skip
        report = policy_result.report
    speed = None
    if generation.completion_tokens and generation.latency_s > 0:
        decode_s = generation.latency_s - (generation.first_token_s or 0.0)
        speed = generation.completion_tokens / decode_s if decode_s > 0 else None
    stats = GenerationStats(
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
    return GuardedAnswer(
        request_id=record.request_id,
        question=prep.context.question,
        answer=parsed,
        report=report,
        findings=report.findings,
        ok=report.ok if policy_result is None else policy_result.decision == "pass",
        span_policy=schema.policy if schema is not None else None,
        requested_policy=prep.requested,
        downgrade_reason=schema.downgrade_reason if schema is not None else None,
        backend=generation.backend,
        model=generation.model,
        template=prep.template,
        prompt_sha256=record.sha256,
        dropped=prep.context.dropped,
        generation=stats,
        render_style=render,
        rendered=render_answer(
            parsed,
            report,
            prep.context,
            style=render,
            outcomes=_served_outcomes(policy_result),
        ),
        surface=policy_result.surface if policy_result else None,
        decision=policy_result.decision if policy_result else None,
        accounting=policy_result.accounting if policy_result else None,
        removed=policy_result.dropped if policy_result else (),
        marked=policy_result.marked if policy_result else (),
    )


def _served_outcomes(result: PolicyResult | None) -> tuple[ClaimOutcome, ...] | None:
    """What rendering drops or marks: nothing without a surface or when the answer is blocked (shown whole)."""
    return result.claims if result is not None and result.served else None


@dataclass(frozen=True)
class _Tiered:
    surface: SurfacePolicy
    judge: Judge | None
    queue: ReviewQueue | None
    results: ResultStore | None
    escalate: Judge | None = None


def _tiered(
    surface: SurfacePolicy | None,
    judge: Judge | None,
    queue: ReviewQueue | None,
    results: ResultStore | None,
    escalate: Judge | None = None,
) -> _Tiered | None:
    """Resolve the surface's judge and check its routing before anything is logged or generated."""
    if surface is None:
        if judge is not None or queue is not None or results is not None or escalate is not None:
            raise UsageError(
                "judge=, escalate=, queue= and results= take effect with surface=SurfacePolicy(...); pass one"
            )
        return None
    if judge is None and (surface.stakes == "high" or surface.sample_rate > 0):
        from citelock.judges import default_judge

        judge = default_judge()
    resolve_routing(surface, judge)  # a routing made for another judge is a UsageError, raised now
    return _Tiered(surface, judge, queue, results, escalate)


def answer(
    question: str,
    chunks: Iterable[Chunk | Mapping[str, Any]],
    *,
    backend: Backend | None = None,
    policy: SpanPolicy = "substring",
    log: PromptLog | str | Path | None = None,
    render: RenderStyle = "footnotes",
    template: str | PromptTemplate | None = None,
    max_chars: int | None = None,
    on_overflow: Literal["error", "drop"] = "error",
    max_tokens: int | None = None,
    options: SchemaOptions | None = None,
    store: Collection[str] | None = None,
    request_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    surface: SurfacePolicy | None = None,
    judge: Judge | None = None,
    escalate: Judge | None = None,
    queue: ReviewQueue | None = None,
    results: ResultStore | None = None,
) -> GuardedAnswer:
    """Answer ``question`` from ``chunks`` with citations constrained by construction and checked by the guard.

    Example:
        >>> result = citelock.answer("When did the bridge open?", chunks, policy="sentence")  # doctest: +SKIP
        >>> result.ok, result.span_policy, result.rendered  # doctest: +SKIP

    Args:
        question: The user's question.
        chunks: Retrieved chunks, best first (records or dicts with ``id`` and ``text``).
        backend: Any :class:`citelock.Backend`; None runs the embedded default (local SmolLM2-135M).
        policy: Requested span policy (``quote``, ``quote_sentence``, ``substring``, ``sentence``, ``id``);
            downgraded to fit the backend's limits, with the reason on the result. Ignored by backends that
            constrain nothing (naive).
        log: A :class:`citelock.PromptLog` or a database path/URL to append the prompt to (None: not logged).
        render: How citation markers appear in ``rendered``: ``footnotes``, ``links`` or ``none``.
        template: Prompt template; defaults to ``answer_structured`` (``answer_naive`` for free-text backends).
        max_chars: Character budget for the prompt (see :func:`citelock.assemble`).
        on_overflow: ``error`` or ``drop`` whole chunks when over budget.
        max_tokens: Token budget for generation; defaults to the schema's longest possible answer.
        options: Bounds of the answer shape (:class:`citelock.SchemaOptions`).
        store: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        request_id: Request id to use (default: a fresh one).
        metadata: Values recorded on the logged prompt (surface, user, trace ids).
        surface: Run the tiered guard of this surface (:class:`citelock.guard.SurfacePolicy`): the support
            judge ③ on citations that survived ①② and the number check, all of them on a high-stakes surface, a
            deterministic sample on a low-stakes one, routed by the surface's thresholds; its ``on_fail`` decides
            whether a failing claim blocks the answer, is dropped from ``rendered`` or is marked there.
        judge: The support judge for ``surface`` (default: :func:`citelock.judges.default_judge`).
        escalate: With ``surface``: a stronger judge for citations routed to ``review``.
        queue: With ``surface``: every finding is enqueued for review.
        results: With ``surface``: the result is stored for ``citelock metrics``.

    Returns:
        A :class:`GuardedAnswer`; ``ok`` is True when the guard found nothing (or the surface passed it whole);
        ``served`` is False only when the surface blocked it; ``removed`` / ``marked`` say what was repaired.

    Raises:
        InputError: malformed chunks, an empty question, duplicate ids.
        BudgetExceededError: the prompt does not fit ``max_chars``.
        UsageError: no span policy fits the backend (assemble fewer chunks); the surface's routing was
            calibrated for another judge (raised before the prompt is logged).
        ConstraintViolationError: a backend that claimed to constrain produced output outside the schema.
        UnparsedAnswerError: an unconstrained backend's output is not a parseable answer.
        TruncatedOutputError: generation hit ``max_tokens`` mid-answer (a RuntimeFailure, with the partial text).
        RuntimeFailure: the backend failed.
    """
    tiered = _tiered(surface, judge, queue, results, escalate)
    chosen = backend if backend is not None else default_backend()
    prep = _prepare(
        question, chunks, chosen, policy, log=log, template=template, max_chars=max_chars,
        on_overflow=on_overflow, max_tokens=max_tokens, options=options, request_id=request_id,
        metadata=metadata,
    )  # fmt: skip
    generation = chosen.generate(prep.record, prep.schema, max_tokens=prep.max_tokens)
    return _finish(prep, generation, render=render, store=store, tiered=tiered)


async def answer_async(
    question: str,
    chunks: Iterable[Chunk | Mapping[str, Any]],
    *,
    backend: Backend | None = None,
    policy: SpanPolicy = "substring",
    log: PromptLog | str | Path | None = None,
    render: RenderStyle = "footnotes",
    template: str | PromptTemplate | None = None,
    max_chars: int | None = None,
    on_overflow: Literal["error", "drop"] = "error",
    max_tokens: int | None = None,
    options: SchemaOptions | None = None,
    store: Collection[str] | None = None,
    request_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    surface: SurfacePolicy | None = None,
    judge: Judge | None = None,
    escalate: Judge | None = None,
    queue: ReviewQueue | None = None,
    results: ResultStore | None = None,
) -> GuardedAnswer:
    """The async variant of :func:`answer` (same arguments, same result).

    A backend with an ``async def agenerate(record, schema, *, max_tokens)`` method (see
    :class:`citelock.backends.AsyncBackend`) is awaited; any other backend runs in a worker thread so the
    event loop is never blocked by decoding.
    """
    tiered = _tiered(surface, judge, queue, results, escalate)
    chosen = backend if backend is not None else await asyncio.to_thread(default_backend)
    prep = await asyncio.to_thread(
        _prepare, question, chunks, chosen, policy, log=log, template=template, max_chars=max_chars,
        on_overflow=on_overflow, max_tokens=max_tokens, options=options, request_id=request_id,
        metadata=metadata,
    )  # fmt: skip
    agenerate = getattr(chosen, "agenerate", None)
    if agenerate is not None and inspect.iscoroutinefunction(agenerate):
        generation = await agenerate(prep.record, prep.schema, max_tokens=prep.max_tokens)
    else:
        generation = await asyncio.to_thread(chosen.generate, prep.record, prep.schema, max_tokens=prep.max_tokens)
    return _finish(prep, generation, render=render, store=store, tiered=tiered)


def render_answer(
    answer: Answer,
    report: GuardReport,
    context: Context,
    *,
    style: RenderStyle = "footnotes",
    outcomes: Sequence[ClaimOutcome] | None = None,
) -> str:
    """Render an answer's claims with their citation markers.

    ``footnotes`` puts ``[n]`` after each claim and lists the cited passages below; ``links`` puts
    ``[chunk-id](source)`` after each claim (``#chunk-id`` when the chunk has no source); ``none`` prints the
    claims only. A citation that failed guard ① is never shown as a source: it is marked ``unverified`` with
    its reason code. An abstention renders as :data:`ABSTENTION_TEXT` in every style.

    With ``outcomes`` (a surface's :attr:`~citelock.guard.PolicyResult.claims`), a claim whose action is
    ``drop`` is left out, and so are the footnotes only it used (the others are numbered without gaps); a claim
    whose action is ``mark`` is followed by ``(unverified: REASON, ...)``.
    """
    if style not in ("footnotes", "links", "none"):
        raise UsageError(f"render style must be 'footnotes', 'links' or 'none', got {style!r}")
    if answer.abstained:
        return ABSTENTION_TEXT
    verdicts = {(c.claim_index, c.citation_index): c for c in report.citations}
    actions = {o.claim_index: o for o in outcomes or ()}
    sources = {chunk.id: chunk.source for chunk in context.chunks}
    parts: list[str] = []
    notes: list[str] = []
    numbers: dict[tuple[str, str | None], int] = {}
    for ci, claim in enumerate(answer.claims):
        outcome = actions.get(ci)
        if outcome is not None and outcome.action == "drop":
            continue
        markers: list[str] = []
        for xi, cite in enumerate(claim.citations):
            check_ = verdicts.get((ci, xi))
            failed = check_ is not None and not check_.passed
            reason = check_.reason.value if failed and check_ is not None and check_.reason else ""
            if style == "links":
                if failed:
                    markers.append(f"[{cite.chunk_id}: unverified, {reason}]")
                else:
                    markers.append(f"[{cite.chunk_id}]({sources.get(cite.chunk_id) or '#' + cite.chunk_id})")
            elif style == "footnotes":
                key = (cite.chunk_id, cite.span)
                if key not in numbers:
                    numbers[key] = len(numbers) + 1
                    quote = f": “{cite.span}”" if cite.span else ""
                    where = f" ({sources[cite.chunk_id]})" if sources.get(cite.chunk_id) else ""
                    status = f" [unverified: {reason}]" if failed else ""
                    notes.append(f"[{numbers[key]}] {cite.chunk_id}{where}{quote}{status}")
                markers.append(f"[{numbers[key]}]")
        text = claim.text.strip()
        if markers and style == "links":
            text = f"{text} {' '.join(markers)}"
        elif markers:
            text = text + "".join(markers)
        if outcome is not None and outcome.action == "mark":
            text += f" (unverified: {', '.join(r.value for r in outcome.reasons)})"
        parts.append(text)
    body = " ".join(parts)
    if style == "footnotes" and notes:
        body += "\n\n" + "\n".join(notes)
    return body
