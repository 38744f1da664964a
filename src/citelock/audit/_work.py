"""The work of an audit on one answer, the same in every engine: prepare (CPU) then guard (free checks + judge).

:func:`prepare` turns an :class:`~citelock.audit.AuditItem` into a :class:`Prepared`: the prompt record (built
with :func:`~citelock.record_from_messages` under a deterministic request id, or the logged record) and the
parsed answer. :func:`judge_prepared` runs the :class:`~citelock.Guard` on it and returns an
:class:`AuditOutcome`: the report row (the JSON of ``citelock check --json`` plus ``key``, ``source``, ``row``
and ``error``) and the :class:`~citelock.GuardResult` for the review queue and the result store. Neither raises
on bad input: a row that cannot be used becomes an outcome carrying ``error``, with the same text whichever
engine or process produced it.

The report row is deterministic: the same bytes whichever engine, process or order produced it. So it holds no
time, and its ``accounting`` leaves out ``cache_hits`` (how many verdicts a worker's cache served depends on
which answers that worker saw before); the audit's summary counts cache hits.

The one exception that does escape: a judge (or escalation judge) server that cannot be reached
(:class:`~citelock.errors.BackendConnectionError`, :class:`~citelock.errors.BackendTimeoutError`). The guard
would record it as a ``CHECK_ERROR`` finding; an audit would then commit an answer nobody judged, and a rerun
would skip it. So the audit stops instead (nothing of the batch is committed) and a rerun continues there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from citelock.audit._report_row import ReportView, check_fields, empty_fields, policy_fields, row_data
from citelock.audit._rows import AuditItem, row_problem
from citelock.errors import BackendConnectionError, BackendTimeoutError, CitelockError, UsageError
from citelock.guard import Guard, GuardResult, SurfacePolicy
from citelock.judges import DEFAULT_JUDGE, Judge, OpenAICompleter, RelevanceJudge, make_judge
from citelock.prompt import parse_for_record, record_from_messages
from citelock.records import Answer, PromptRecord, Verdict
from citelock.store import CachedJudge

__all__ = [
    "AuditOutcome",
    "AuditSettings",
    "Prepared",
    "audit_item",
    "derived_request_id",
    "error_report",
    "judge_prepared",
    "prepare",
    "report_fields",
]

REQUEST_ID_PREFIX = "audit-"
"""Request ids the audit derives for rows without one: this prefix and 32 hex digits of the row's content hash."""

_UNREACHABLE = (BackendConnectionError, BackendTimeoutError)


@dataclass(frozen=True)
class AuditSettings:
    """How every answer of an audit is guarded (picklable: each worker builds its own guard from it).

    The options are those of ``citelock check`` (see ``citelock check --help``). The surface policy runs when
    any of ``surface``, ``judge``, ``on_fail`` or ``calibration`` is given; otherwise only the free
    deterministic checks run, and nothing is queued or stored.

    Attributes:
        surface: The surface's name (``default`` when the policy runs without one).
        stakes: ``high`` judges every surviving citation; ``low`` a deterministic sample.
        sample_rate: Low stakes: the fraction of citations judged (default 1 with a judge, else 0).
        judge: ``lexical``, ``offline`` or ``llm`` (a judging surface without one uses the default judge).
        judge_base_url: ``llm`` on an OpenAI-compatible server at this ``/v1`` URL.
        judge_model: ``llm``: a GGUF file, or with ``judge_base_url`` the server's model.
        on_fail: ``block``, ``drop_claim`` or ``mark``.
        calibration: A calibration file (``citelock calibrate --fit --write``) whose routing applies.
        escalate_base_url: Escalate citations routed to review to the LLM judge on this server.
        relevance: ``free``, ``judged`` or ``off``: the ``OFF_QUESTION`` check (``judged`` needs a surface policy
            and ``relevance_base_url``).
        relevance_base_url: The relevance judge's OpenAI-compatible server, for ``judged``.
        policy: The whole surface policy (a surface of the config file: audit plan, routing and all); when given
            it is the policy, and ``stakes``, ``sample_rate``, ``on_fail``, ``calibration`` and ``relevance`` are
            not read for it.
    """

    surface: str | None = None
    stakes: str = "high"
    sample_rate: float | None = None
    judge: str | None = None
    judge_base_url: str | None = None
    judge_model: str | None = None
    on_fail: str | None = None
    calibration: str | None = None
    escalate_base_url: str | None = None
    relevance: str = "free"
    relevance_base_url: str | None = None
    policy: SurfacePolicy | None = None

    @property
    def runs_policy(self) -> bool:
        """True when a surface policy runs (results are queued and stored), False for the free checks only."""
        return any(v is not None for v in (self.surface, self.judge, self.on_fail, self.calibration, self.policy))

    def build_guard(self) -> Guard:
        """The :class:`~citelock.Guard` these settings describe (call once per process, never per row).

        The same surface ``citelock check`` builds from the same options: its judge wrapped in a verdict cache
        (one per process).

        Raises:
            UsageError: an invalid combination (a routing calibrated for another judge, a high-stakes sample).
        """
        if not self.runs_policy:
            return Guard(relevance="off" if self.relevance == "off" else "free")
        from citelock.judges._routing import load_surface_routing

        name = self.surface or "default"
        rate = self.sample_rate
        if rate is None:
            rate = 1.0 if self.judge or self.stakes == "high" else 0.0
        routing = load_surface_routing(self.calibration, name) if self.calibration is not None else None
        try:
            policy = self.policy or SurfacePolicy.model_validate(
                {
                    "name": name,
                    "stakes": self.stakes,
                    "sample_rate": rate,
                    "routing": routing,
                    "on_fail": self.on_fail or "block",
                    "relevance": self.relevance,
                }
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            raise UsageError(f"surface {name!r}: {'.'.join(map(str, err['loc'])) or 'surface'}: {err['msg']}") from None
        judge_name = self.judge or (DEFAULT_JUDGE if policy.stakes == "high" or policy.sample_rate > 0 else None)
        judge = None
        if judge_name is not None:
            judge = CachedJudge(_Tripwire(_named_judge(judge_name, self.judge_base_url, self.judge_model)))
        escalate = None
        if self.escalate_base_url is not None:
            escalate = CachedJudge(_Tripwire(_named_judge("llm", self.escalate_base_url, None)))
        return Guard(policy, judge, escalate=escalate, relevance_judge=self.relevance_judge())

    def relevance_judge(self) -> RelevanceJudge | None:
        """``relevance_base_url``'s relevance judge (its first listed model), or None without one."""
        if self.relevance_base_url is None:
            return None
        return RelevanceJudge(OpenAICompleter(base_url=self.relevance_base_url))

    def describe(self) -> dict[str, Any]:
        """The settings as JSON data (kept in the audit's manifest: a resumed audit must use the same).

        The relevance settings appear only when they differ from the default (``free``, no server), so an audit
        begun before they existed resumes with the same manifest.
        """
        described = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for name, default in (("relevance", "free"), ("relevance_base_url", None), ("policy", None)):
            if described[name] == default:
                del described[name]
        if self.policy is not None:
            described["policy"] = self.policy.model_dump(mode="json")
        return described


def _named_judge(name: str, base_url: str | None, model: str | None) -> Judge:
    if base_url is not None:
        return make_judge(name, base_url=base_url, api_model=model)
    return make_judge(name, model=Path(model) if model is not None else None)


class _Tripwire:
    """A judge that notes when its server could not be reached (then re-raises, as the guard expects)."""

    def __init__(self, inner: Judge) -> None:
        self.inner = inner
        self.name = inner.name
        self.version = inner.version
        self.tripped: BaseException | None = None

    def judge(self, claim: str, passage: str) -> Verdict:
        try:
            return self.inner.judge(claim, passage)
        except _UNREACHABLE as exc:
            self.tripped = exc
            raise


def _tripwires(guard: Guard) -> list[_Tripwire]:
    found = []
    for judge in (guard.judge, guard.escalate):
        inner = getattr(judge, "inner", None)
        if isinstance(inner, _Tripwire):
            found.append(inner)
    return found


@dataclass(frozen=True)
class Prepared:
    """An item after the CPU stage: its prompt record and parsed answer, or why the row is unusable.

    Attributes:
        key: The item's key.
        source: The item's source.
        row: The item's row.
        record: The prompt record (None on error).
        answer: The parsed answer (None on error).
        error: Why the row cannot be audited, or None.
    """

    key: str
    source: str
    row: int
    record: PromptRecord | None = None
    answer: Answer | None = None
    error: str | None = None
    request_id: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AuditOutcome:
    """One answer's audit outcome.

    Attributes:
        key: The item's key.
        source: The item's source.
        row: The item's row.
        report: The report row (JSON data): ``key``, ``source``, ``row``, ``error``, then the fields of
            ``citelock check --json`` (with a surface also its policy fields). Deterministic.
        result: The guard's result, for the review queue and the result store (None for an error row and when
            only the free checks ran).
        result_key: The result's identity in the result store (request, prompt, answer, surface policy and
            judge), so storing it twice is a no-op; None with ``result``.
    """

    key: str
    source: str
    row: int
    report: dict[str, Any]
    result: GuardResult | None = None
    result_key: str | None = None


def prepare(item: AuditItem) -> Prepared:
    """The CPU stage: build the prompt record and parse the answer (never raises on bad input).

    An exported row is checked against ``audit_row.v1.json``; its record is built with
    :func:`~citelock.record_from_messages` under the row's ``request_id``, else a deterministic id derived
    from its content (:func:`derived_request_id`). A log row carries its logged record.
    """
    key, source, row_number = item.key, item.source, item.row
    if item.error is not None or item.payload is None:
        return Prepared(key, source, row_number, error=item.error or "no row")
    payload = item.payload
    request_id = payload.get("request_id") if isinstance(payload.get("request_id"), str) else None
    where = "row"
    try:
        if item.logged:
            where = "logged record"
            record = PromptRecord.model_validate(payload["record"])
            request_id = record.request_id
            answer_value: Any = payload.get("answer")
        else:
            problem = row_problem(payload)
            if problem is not None:
                return Prepared(key, source, row_number, error=problem, request_id=request_id)
            row = _canonical_row(payload)
            where = "prompt"
            record = record_from_messages(
                row["messages"],
                row["chunks"],
                question=row.get("question"),
                request_id=request_id or derived_request_id(row),
                metadata=row.get("metadata"),
            )
            request_id = record.request_id
            if "created_at" in row:
                record = record.model_copy(update={"created_at": datetime.fromisoformat(row["created_at"])})
            answer_value = row["answer"]
        where = "answer"
        answer = parse_for_record(answer_value, record)  # a constrained call's record: its schema's JSON only
    except (CitelockError, ValidationError, ValueError, RecursionError) as exc:
        return Prepared(key, source, row_number, error=f"{where}: {_message(exc)}", request_id=request_id)
    return Prepared(key, source, row_number, record=record, answer=answer, request_id=record.request_id)


def _message(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(map(str, err['loc'])) or 'value'}: {err['msg']}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _canonical_row(payload: dict[str, Any]) -> dict[str, Any]:
    """The row as audited: nulls dropped, a JSON-text answer parsed, ``created_at`` as UTC ISO 8601.

    Raises:
        ValueError: ``created_at`` is not an ISO 8601 time.
    """
    row: dict[str, Any] = _drop_nulls({k: v for k, v in payload.items() if k != "request_id"})
    answer = row["answer"]
    if isinstance(answer, str) and answer.strip().startswith(("{", "[")):
        with contextlib.suppress(json.JSONDecodeError, RecursionError):  # else parse_answer reports it
            row["answer"] = json.loads(answer)
    if "created_at" in row:
        try:
            moment = datetime.fromisoformat(str(row["created_at"]))
        except ValueError:
            raise ValueError(f"created_at {row['created_at']!r} is not an ISO 8601 time") from None
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        row["created_at"] = moment.isoformat()
    return row


def derived_request_id(row: dict[str, Any]) -> str:
    """The request id of a row without one: ``audit-`` and 32 hex digits of the hash of its canonical content.

    The content is everything audited (messages, chunks, question, answer, created_at, metadata) as canonical
    JSON, so the same row gets the same id on every run and in every engine, and two different answers to the
    same prompt get different ids (their findings are queued apart).
    """
    text = json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return REQUEST_ID_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def judge_prepared(prepared: Prepared, guard: Guard) -> AuditOutcome:
    """The guard stage: free checks and the support judge on one prepared answer (never raises on bad input).

    Raises:
        BackendConnectionError: the judge's server could not be reached (the audit stops; see the module).
        BackendTimeoutError: the judge's server did not answer in time.
    """
    if prepared.error is not None or prepared.record is None or prepared.answer is None:
        return error_outcome(prepared, guard)
    wires = _tripwires(guard)
    for wire in wires:
        wire.tripped = None
    try:
        result = guard.run(prepared.record, prepared.answer)
    except CitelockError as exc:
        return error_outcome(prepared, guard, f"guard: {exc}")
    for wire in wires:
        if wire.tripped is not None:
            raise wire.tripped
    report = {
        "key": prepared.key,
        "source": prepared.source,
        "row": prepared.row,
        "error": None,
        **report_fields(result, policy=guard.policy is not None),
    }
    if result.surface is None:
        return AuditOutcome(prepared.key, prepared.source, prepared.row, report)
    return AuditOutcome(
        prepared.key, prepared.source, prepared.row, report, result, _result_key(result, prepared.answer, guard)
    )


def audit_item(item: AuditItem, guard: Guard) -> AuditOutcome:
    """Both stages on one item: ``judge_prepared(prepare(item), guard)``."""
    return judge_prepared(prepare(item), guard)


def report_fields(result: GuardResult, *, policy: bool) -> dict[str, Any]:
    """The fields of ``citelock check --json`` for one result, as JSON data, in its order.

    Built by :mod:`citelock.audit._report_row`, as the streamed ``--json`` of ``citelock check`` is;
    ``accounting`` leaves out ``cache_hits`` (see the module docstring).
    """
    fields = check_fields(ReportView.of(result.report))
    if policy:
        fields += policy_fields(result, cache_hits=False)
    return row_data(fields)


def error_report(
    key: str, source: str, row: int, error: str, *, request_id: str | None, policy: bool
) -> dict[str, Any]:
    """The report row of an answer that could not be audited: every field present, empty or null."""
    out: dict[str, Any] = {"key": key, "source": source, "row": row, "error": error, **empty_fields(policy=policy)}
    out["request_id"] = request_id
    return out


def error_outcome(prepared: Prepared, guard: Guard, error: str | None = None) -> AuditOutcome:
    """The outcome of a row that could not be audited."""
    report = error_report(
        prepared.key,
        prepared.source,
        prepared.row,
        error or prepared.error or "unusable row",
        request_id=prepared.request_id,
        policy=guard.policy is not None,
    )
    return AuditOutcome(prepared.key, prepared.source, prepared.row, report)


def _result_key(result: GuardResult, answer: Answer, guard: Guard) -> str:
    """What makes a stored result the same one: request, prompt, answer, surface policy, judges' versions."""
    judges = [f"{j.name} {j.version}" for j in (guard.judge, guard.escalate) if j is not None]
    parts = [
        result.report.request_id,
        result.report.prompt_sha256,
        hashlib.sha256(answer.model_dump_json().encode("utf-8")).hexdigest(),
        result.policy.model_dump_json() if result.policy is not None else "",
        *judges,
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:40]
