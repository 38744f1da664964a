"""The records :meth:`citelock.Citelock.answer` returns: :class:`GuardedAnswer` and its :class:`GenerationStats`.

Their JSON Schema is ``schemas/guarded_answer.v2.json`` (version 1 still reads); :mod:`citelock.pipeline` builds
them and re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from citelock.constraint import SpanPolicy
from citelock.errors import UsageError
from citelock.guard import Decision, GuardResult
from citelock.records import Answer, DroppedChunk, Finding, GuardReport, _Record
from citelock.render import RenderStyle

__all__ = [
    "GUARDED_ANSWER_SCHEMA_VERSION",
    "GenerationStats",
    "GuardedAnswer",
    "guarded_answer_json_schema",
    "upgrade_v1",
]

GUARDED_ANSWER_SCHEMA_VERSION: Literal["2"] = "2"


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
    """An answer with its guard result, as :func:`citelock.answer` returns it (JSON Schema in ``schemas/``).

    It holds the guard's :class:`~citelock.GuardResult` whole (``result``) beside what only the generation knows
    (the request, the parsed answer, the enforced policy, the backend, the rendering). The guard's verdict is
    read there: ``result.decision``, ``result.report``, ``result.claims`` and ``result.dropped`` /
    ``result.marked`` / ``result.trimmed``, ``result.accounting``, ``result.relevance``. The most read of them
    are also properties here (:attr:`ok`, :attr:`decision`, :attr:`served`, :attr:`report`, :attr:`findings`,
    :attr:`surface`), computed from ``result``, never stored twice.

    Schema version 2 (``schemas/guarded_answer.v2.json``). A version-1 record (``schemas/guarded_answer.v1.json``,
    which copied the result's fields under other names) still reads: :meth:`model_validate` upgrades it (see
    :func:`upgrade_v1`).

    Attributes:
        request_id: The request id (the prompt log's key).
        question: The question.
        answer: The parsed answer: claims with ``citations[].chunk_id`` / ``span``.
        result: The guard's full result: the report (① provenance, ② coverage, numbers, ③ support, relevance),
            the decision, what happened to each claim, the judge's accounting.
        span_policy: The span policy the output held: the schema's when decoding enforced it; when a server
            ignored the constraint, the schema's if the output still has its shape, ``id`` if its citations
            carry no spans, ``none`` if it cites nothing (None when nothing was constrained: the naive
            baseline). ``downgrade_reason`` then says the server ignored it.
        requested_policy: The policy the caller asked for.
        downgrade_reason: Why ``span_policy`` is weaker than ``requested_policy``, if it is.
        backend: Backend name.
        model: Model name.
        template: The prompt template used (``name.vVERSION``).
        prompt_sha256: sha256 of the messages as sent.
        dropped_chunks: Chunks assembly dropped to meet the budget (the claims the guard dropped are
            ``result.dropped``).
        generation: The generation's accounting.
        render_style: How ``rendered`` shows citations.
        rendered: The answer text with its citation markers rendered, without the dropped claims (and the
            footnotes only they used), with marked claims followed by ``(unverified: REASON, ...)``. For a
            blocked answer it is the whole answer, for inspection: do not serve it.
    """

    schema_version: Literal["2"] = GUARDED_ANSWER_SCHEMA_VERSION
    request_id: str
    question: str
    answer: Answer
    result: GuardResult
    span_policy: SpanPolicy | Literal["none"] | None
    requested_policy: SpanPolicy | None
    downgrade_reason: str | None = None
    backend: str
    model: str
    template: str
    prompt_sha256: str
    dropped_chunks: tuple[DroppedChunk, ...] = ()
    generation: GenerationStats
    render_style: RenderStyle
    rendered: str = Field(description="the answer text with citation markers rendered per render_style")

    @model_validator(mode="before")
    @classmethod
    def _read_v1(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("schema_version") == "1":
            return upgrade_v1(data)
        return data

    @property
    def decision(self) -> Decision:
        """``pass``, ``repaired`` or ``block`` (``result.decision``).

        Without a surface: ``pass`` when the free checks found nothing, else ``block`` (rendered whole, for
        inspection).
        """
        return self.result.decision

    @property
    def ok(self) -> bool:
        """True when the answer is served whole and clean: ``decision == "pass"``."""
        return self.result.ok

    @property
    def served(self) -> bool:
        """True unless the guard blocked the answer (``pass`` or ``repaired``)."""
        return self.result.served

    @property
    def report(self) -> GuardReport:
        """The guard's report (``result.report``)."""
        return self.result.report

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The report's findings (``result.report.findings``)."""
        return self.result.report.findings

    @property
    def surface(self) -> str | None:
        """The surface policy's name (None when the guard ran the free checks only)."""
        return self.result.surface

    @property
    def abstained_before_generation(self) -> bool:
        """The pipeline abstained without calling the model (``result.abstention == "pipeline"``).

        No assembled chunk was relevant enough to the question (the surface's ``abstain_below``); ``rendered``
        is the abstention.
        """
        return self.result.abstention == "pipeline"


def upgrade_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A version-1 ``GuardedAnswer`` record (a dict, as parsed from its JSON) in the version-2 shape.

    Version 1 copied the guard result's fields under other names; they move into ``result``:
    ``report``, ``surface``, ``decision`` (None without a surface: ``pass`` when ``ok``, else ``block``),
    ``accounting`` (None: zero), ``removed`` / ``marked`` / ``trimmed`` (the claim outcomes, ordered by claim),
    ``abstained_before_generation`` (``abstention="pipeline"``; ``model`` when the answer itself abstained).
    ``findings`` and ``ok`` were derived from the report, so they are dropped; ``dropped`` becomes
    ``dropped_chunks``. Version 1 did not record three things, so the upgraded result has: ``week`` =
    ``"unknown"``, ``policy`` = None, and no outcome for a claim that was served clean (v1 listed only the
    dropped, marked and trimmed ones).

    Raises:
        UsageError: ``data`` is not a version-1 record (no ``report`` or no ``answer``).
    """
    missing = [key for key in ("report", "answer") if key not in data]
    if missing:
        raise UsageError(f"a version-1 GuardedAnswer record needs {', '.join(missing)}: got keys {sorted(data)}")
    out = {k: v for k, v in data.items() if k not in _V1_ONLY}
    decision = data.get("decision") or ("pass" if data.get("ok") else "block")
    claims = sorted(
        (*data.get("removed", ()), *data.get("marked", ()), *data.get("trimmed", ())),
        key=lambda c: c["claim_index"] if isinstance(c, Mapping) else c.claim_index,
    )
    answer = data["answer"]
    abstained_answer = answer.get("abstained", False) if isinstance(answer, Mapping) else answer.abstained
    abstention = "pipeline" if data.get("abstained_before_generation") else "model" if abstained_answer else None
    result: dict[str, Any] = {
        "surface": data.get("surface"),
        "decision": decision,
        "week": "unknown",
        "report": data["report"],
        "claims": claims,
        "abstention": abstention,
    }
    if data.get("accounting") is not None:
        result["accounting"] = data["accounting"]
    out.update(schema_version=GUARDED_ANSWER_SCHEMA_VERSION, result=result, dropped_chunks=data.get("dropped", ()))
    return out


_V1_ONLY = frozenset(
    {
        "schema_version", "report", "findings", "ok", "surface", "decision", "accounting", "removed", "marked",
        "trimmed", "abstained_before_generation", "dropped",
    }
)  # fmt: skip


def guarded_answer_json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`GuardedAnswer` (for ``schemas/``)."""
    return GuardedAnswer.model_json_schema()
