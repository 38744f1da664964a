"""The review queue: one entry per failing finding, with everything a reviewer needs, grouped by reason.

An entry is an immutable snapshot (:class:`QueueEntry`): the claim, the cited chunk id and passage, the
verdict of every layer that ran, the judge's raw answer, a pointer to the logged prompt (request id + prompt
sha256), the reason code, the surface and when it was queued. Its id is a hash of where the finding sits
(request, surface, reason, claim, citation), so guarding a replayed request again does not queue it twice.

Review history is a sequence of events, never rewritten: the entry row (queued), then outcome events. The
database refuses UPDATE and DELETE on both tables (triggers), and the current status of an entry is derived
from its events: open while it has none, else the outcome of its latest one. An outcome is one of three, each
tracked separately:

- ``accept``: the finding was wrong (the judge too strict). For a support finding the (claim, passage) pair
  is stored as a calibration sample with the human label ``yes``. For ``UNCERTAIN_SUPPORT`` (the judge's score
  fell between the surface's thresholds) ``accept`` is the reviewer saying the passage supports the claim.
- ``repair``: the answer must change (drop or narrow the claim, or attach a better passage): a free-text note
  and, optionally, the replacement chunk id.
- ``escalate``: the cause is upstream: ``chunking``, ``truncation`` or ``ranking``.

The first outcome is :meth:`ReviewQueue.resolve` (revision 0). Changing it later is a *re-review*
(:meth:`ReviewQueue.rereview`): a new event by a named reviewer, with the next revision number, that supersedes
the previous outcome without erasing it (:meth:`ReviewQueue.history` lists them all). The database enforces one
event per (entry, revision), so two reviewers racing to resolve one entry, or to re-review the same outcome, get
one event and one :class:`AlreadyResolvedError`: a second outcome is never silently an overwrite, it must be a
deliberate re-review. Every write is one transaction, so concurrent writers in several processes lose nothing
and a crash mid-write leaves the store readable.

Calibration samples are derived, not stored: every entry whose current outcome is ``accept`` on a judged support
finding (so a re-review that overturns an ``accept`` withdraws its sample). A database written by a version
before events keeps its tables: their resolutions are copied once as revision-0 events, and the old tables are
then refused writes (an older citelock writing there would otherwise be silently ignored).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field
from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError

from citelock.errors import AlreadyResolvedError, InputError, UsageError
from citelock.guard import AuditSample, GuardResult
from citelock.reasons import judged_codes
from citelock.records import Finding, Layer, ReasonCode, VerdictLabel, _Record
from citelock.store._engine import insert_skipping, make_engine
from citelock.store._tables import ensure_tables, existing_tables, existing_triggers, refuse_triggers
from citelock.store._utc import aware

__all__ = [
    "CalibrationSample",
    "EscalationCategory",
    "Outcome",
    "QueueEntry",
    "Resolution",
    "ReviewQueue",
    "queue_entry_schema",
]

Outcome = Literal["accept", "repair", "escalate", "reject"]
"""``reject`` is only for ``AUDIT_SAMPLE`` entries (the passage does not support the claim); an audit entry takes
``accept`` (it does) or ``reject``."""
EscalationCategory = Literal["chunking", "truncation", "ranking"]

_JUDGED_REASONS = judged_codes()


def _week(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


class QueueEntry(Finding):
    """One failing finding waiting for a reviewer: the :class:`Finding` itself plus where and when it was queued.

    Attributes:
        id: Stable id: a hash of request, prompt, surface, reason, layer, claim and citation.
        created_at: When it was queued (UTC).
        week: ISO week the answer counts in (the guard passes the prompt's week; default: ``created_at``'s).
        surface: The surface the answer was served on.
        audit: For an ``AUDIT_SAMPLE`` entry: the sample as the guard drew it (route, score, stratum and the
            probability it was drawn with). None on every other entry.

    Every other field is the finding's (reason, layer, the pointer to the logged prompt, claim, cited chunk,
    span, passage, every layer's verdict, the judge's raw answer and version); ``claim_index`` -1 means the
    whole answer.
    """

    schema_version: Literal["1"] = "1"
    id: str = Field(min_length=1, max_length=64)
    created_at: datetime
    week: str
    surface: str
    audit: AuditSample | None = None

    @property
    def calibratable(self) -> bool:
        """True when accepting this entry stores a calibration sample (a judged support finding)."""
        return self.reason in _JUDGED_REASONS and self.passage is not None

    @classmethod
    def from_finding(
        cls, finding: Finding, *, surface: str, created_at: datetime | None = None, week: str | None = None
    ) -> QueueEntry:
        """The queue entry for ``finding`` on ``surface``."""
        moment = created_at or datetime.now(UTC)
        key = "\x1f".join(
            str(part)
            for part in (
                finding.request_id,
                finding.prompt_sha256,
                surface,
                finding.reason.value,
                finding.layer.value,
                finding.claim_index,
                finding.citation_index,
                finding.chunk_id,
            )
        )
        return cls(
            id=hashlib.sha256(key.encode("utf-8")).hexdigest()[:20],
            created_at=moment,
            week=week or _week(moment),
            surface=surface,
            **finding.model_dump(),
        )


class Resolution(_Record):
    """A reviewer's outcome for one entry: one event of its review history.

    Attributes:
        entry_id: The resolved entry.
        outcome: ``accept``, ``repair`` or ``escalate``.
        note: The reviewer's note (required for ``repair``).
        category: ``chunking``, ``truncation`` or ``ranking`` (``escalate`` only, required there).
        chunk_id: A better chunk to cite (``repair`` only, optional).
        resolved_at: When (UTC).
        reviewer: Who (optional for the first outcome, required for a re-review).
        revision: 0 for the first outcome, n for the n-th re-review; the highest revision is the current one.
    """

    entry_id: str
    outcome: Outcome
    note: str | None = None
    category: EscalationCategory | None = None
    chunk_id: str | None = None
    resolved_at: datetime
    reviewer: str | None = None
    revision: int = Field(default=0, ge=0)


class CalibrationSample(_Record):
    """A human-labelled (claim, passage) pair from an accepted support finding, for judge calibration."""

    entry_id: str
    claim: str
    passage: str
    label: VerdictLabel
    judge_label: str | None = None
    judge_version: str | None = None
    created_at: datetime


def queue_entry_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`QueueEntry` (``schemas/queue_entry.v1.json``)."""
    return QueueEntry.model_json_schema()


_metadata = MetaData()
_entries = Table(
    "citelock_queue",
    _metadata,
    Column("id", String(64), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("week", String(10), nullable=False, index=True),
    Column("surface", String(200), nullable=False, index=True),
    Column("reason", String(40), nullable=False, index=True),
    Column("request_id", String(200), nullable=False, index=True),
    Column("entry", Text, nullable=False),
)
_events = Table(
    "citelock_review_events",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("entry_id", String(64), ForeignKey("citelock_queue.id"), nullable=False, index=True),
    Column("revision", Integer, nullable=False),
    Column("outcome", String(16), nullable=False, index=True),
    Column("category", String(16), nullable=True),
    Column("note", Text, nullable=True),
    Column("chunk_id", String(200), nullable=True),
    Column("reviewer", String(200), nullable=True),
    Column("resolved_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("entry_id", "revision", name="citelock_review_events_once"),
)
_APPEND_ONLY = [_entries.name, _events.name]

# Tables of the layout before review events: read once at the upgrade, then refused writes.
_LEGACY_RESOLUTIONS = "citelock_queue_resolutions"
_LEGACY_SAMPLES = "citelock_calibration_samples"


def _upgrade(conn: Connection) -> None:
    """Copy an older layout's resolutions as revision-0 events, then retire its tables."""
    tables = existing_tables(conn)
    if _LEGACY_RESOLUTIONS in tables:
        conn.execute(
            text(
                f"INSERT INTO {_events.name} (entry_id, revision, outcome, category, note, chunk_id, reviewer, "
                f"resolved_at) SELECT r.entry_id, 0, r.outcome, r.category, r.note, r.chunk_id, r.reviewer, "
                f"r.resolved_at FROM {_LEGACY_RESOLUTIONS} r WHERE NOT EXISTS "
                f"(SELECT 1 FROM {_events.name} e WHERE e.entry_id = r.entry_id)"
            )
        )
    present = existing_triggers(conn)
    for legacy in (_LEGACY_RESOLUTIONS, _LEGACY_SAMPLES):
        if legacy not in tables:
            continue
        message = f"citelock table {legacy} is retired: review outcomes are events in {_events.name}"
        for name, statement in refuse_triggers(
            conn.dialect.name, legacy, ("insert", "update", "delete", "truncate"), message
        ).items():
            if name not in present:
                conn.execute(text(statement))


class ReviewQueue:
    """The review queue on SQLAlchemy Core.

    Args:
        target: A SQLite file path (created if missing), a database URL (``postgresql://...``) or an engine.
    """

    def __init__(self, target: str | Path | Engine) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        ensure_tables(self.engine, _metadata, append_only=_APPEND_ONLY, upgrade=_upgrade)

    def add(self, entries: Iterable[QueueEntry]) -> int:
        """Add entries in one transaction; an entry whose id is already queued is kept as it was.

        Returns:
            How many entries were new.
        """
        rows = [
            {
                "id": e.id,
                "created_at": e.created_at,
                "week": e.week,
                "surface": e.surface,
                "reason": e.reason.value,
                "request_id": e.request_id,
                "entry": e.model_dump_json(),
            }
            for e in entries
        ]
        if not rows:
            return 0
        added = 0
        statement = insert_skipping(self.engine, _entries, "id")
        with self.engine.begin() as conn:
            for row in rows:
                # RETURNING, not rowcount: PostgreSQL drivers report -1 for an INSERT ... ON CONFLICT
                added += len(conn.execute(statement.values(**row).returning(_entries.c.id)).all())
        return added

    def enqueue(
        self,
        findings: Iterable[Finding],
        *,
        surface: str,
        week: str | None = None,
        created_at: datetime | None = None,
    ) -> list[QueueEntry]:
        """Queue one entry per finding (in one transaction) and return the entries.

        Args:
            findings: Failing findings (a :class:`GuardReport`'s ``findings``).
            surface: The surface the answer was served on.
            week: The ISO week the answer counts in (default: the week it is queued).
            created_at: When (default: now, UTC).
        """
        moment = created_at or datetime.now(UTC)
        entries = [QueueEntry.from_finding(f, surface=surface, created_at=moment, week=week) for f in findings]
        self.add(entries)
        return entries

    def enqueue_result(self, result: GuardResult) -> list[QueueEntry]:
        """Queue every finding of a surface's :class:`~citelock.GuardResult`, in the week its prompt counts in.

        Raises:
            UsageError: the result has no surface (a free-checks-only ``Guard()`` result): the queue groups by it.
        """
        return self.enqueue_results([result])

    def enqueue_results(self, results: Iterable[GuardResult]) -> list[QueueEntry]:
        """Queue every finding of several results in one transaction (as :meth:`enqueue_result` does one).

        Raises:
            UsageError: a result has no surface (nothing is queued then).
        """
        moment = datetime.now(UTC)
        entries: list[QueueEntry] = []
        for result in results:
            if result.surface is None:
                raise UsageError(
                    "the review queue groups findings by surface: run Guard(SurfacePolicy(...)) to queue them"
                )
            entries.extend(
                QueueEntry.from_finding(f, surface=result.surface, created_at=moment, week=result.week)
                for f in result.report.findings
            )
            entries.extend(audit_entries(result, created_at=moment))
        self.add(entries)
        return entries

    def get(self, entry_id: str) -> QueueEntry:
        """The entry with this id, or with this unique id prefix (at least 4 characters).

        Raises:
            KeyError: no entry has this id.
            InputError: the prefix matches several entries, or is shorter than 4 characters.
        """
        full = self.resolve_id(entry_id)
        with self.engine.connect() as conn:
            text = conn.execute(select(_entries.c.entry).where(_entries.c.id == full)).scalar_one()
        return QueueEntry.model_validate_json(text)

    def resolve_id(self, prefix: str) -> str:
        """The full id of the one entry whose id is or starts with ``prefix``.

        Raises:
            KeyError: no entry matches.
            InputError: several entries match, or the prefix is shorter than 4 characters.
        """
        with self.engine.connect() as conn:
            if conn.execute(select(_entries.c.id).where(_entries.c.id == prefix)).first():
                return prefix
            if len(prefix) < 4:
                raise InputError(f"entry id {prefix!r} is too short: give the id or a prefix of 4+ characters")
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            found = (
                conn.execute(select(_entries.c.id).where(_entries.c.id.like(escaped + "%", escape="\\")).limit(3))
                .scalars()
                .all()
            )
        if not found:
            raise KeyError(prefix)
        if len(found) > 1:
            raise InputError(f"entry id prefix {prefix!r} matches several entries ({', '.join(found)}, ...)")
        return str(found[0])

    def resolution(self, entry_id: str) -> Resolution | None:
        """The entry's current outcome (its latest event), or None while it is open."""
        history = self.history(entry_id)
        return history[-1] if history else None

    def history(self, entry_id: str) -> list[Resolution]:
        """Every outcome event of the entry, oldest first (empty while it is open); the last one is current.

        Raises:
            KeyError: no such entry.
            InputError: an ambiguous or too short id prefix.
        """
        full = self.resolve_id(entry_id)
        query = select(*_EVENT_FIELDS).where(_events.c.entry_id == full).order_by(_events.c.revision)
        with self.engine.connect() as conn:
            return [_resolution(row) for row in conn.execute(query).mappings()]

    def items(
        self,
        *,
        reason: ReasonCode | str | None = None,
        surface: str | None = None,
        status: Literal["open", "resolved", "all"] = "all",
    ) -> list[tuple[QueueEntry, Resolution | None]]:
        """Entries with their current outcomes, ordered by reason then age.

        Args:
            reason: Only this reason code.
            surface: Only this surface.
            status: ``open`` (no outcome yet), ``resolved`` or ``all``.

        Raises:
            InputError: an unknown reason code or status.
        """
        if status not in ("open", "resolved", "all"):
            raise InputError(f"status must be open, resolved or all, got {status!r}")
        current = _current_events()
        query = select(_entries.c.entry, *current.c).select_from(
            _entries.outerjoin(current, current.c.entry_id == _entries.c.id)
        )
        if reason is not None:
            query = query.where(_entries.c.reason == _reason(reason).value)
        if surface is not None:
            query = query.where(_entries.c.surface == surface)
        if status == "open":
            query = query.where(current.c.entry_id.is_(None))
        elif status == "resolved":
            query = query.where(current.c.entry_id.is_not(None))
        query = query.order_by(_entries.c.reason, _entries.c.created_at, _entries.c.id)
        out: list[tuple[QueueEntry, Resolution | None]] = []
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                entry = QueueEntry.model_validate_json(row["entry"])
                out.append((entry, None if row["entry_id"] is None else _resolution(row)))
        return out

    def grouped(
        self,
        *,
        reason: ReasonCode | str | None = None,
        surface: str | None = None,
        status: Literal["open", "resolved", "all"] = "open",
    ) -> dict[ReasonCode, list[QueueEntry]]:
        """Entries grouped by reason code (open ones by default), largest group first."""
        groups: dict[ReasonCode, list[QueueEntry]] = {}
        for entry, _ in self.items(reason=reason, surface=surface, status=status):
            groups.setdefault(entry.reason, []).append(entry)
        return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0].value)))

    def __len__(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(_entries)).scalar_one())

    def __iter__(self) -> Iterator[QueueEntry]:
        """Every entry, by reason then age."""
        return iter([entry for entry, _ in self.items()])

    def resolve(
        self,
        entry_id: str,
        outcome: Outcome,
        *,
        note: str | None = None,
        category: EscalationCategory | None = None,
        chunk_id: str | None = None,
        reviewer: str | None = None,
        resolved_at: datetime | None = None,
    ) -> Resolution:
        """Record an entry's first outcome (revision 0).

        Args:
            entry_id: The entry's id (or a unique prefix).
            outcome: ``accept`` (the finding was wrong), ``repair`` (the answer must change) or ``escalate``
                (the cause is upstream).
            note: Free text; required for ``repair`` (what to drop, narrow or re-cite).
            category: For ``escalate`` (required there): ``chunking``, ``truncation`` or ``ranking``.
            chunk_id: For ``repair``: a better chunk to cite.
            reviewer: Who resolved it.
            resolved_at: When (default: now, UTC).

        Returns:
            The stored :class:`Resolution`.

        Raises:
            KeyError: no such entry.
            InputError: arguments that do not fit the outcome.
            AlreadyResolvedError: the entry already has an outcome; changing it is a :meth:`rereview`.
        """
        _check_outcome(outcome, note, category, chunk_id)
        full = self.resolve_id(entry_id)
        self._check_audit_outcome(full, outcome)
        event = Resolution(
            entry_id=full,
            outcome=outcome,
            note=note,
            category=category,
            chunk_id=chunk_id,
            resolved_at=resolved_at or datetime.now(UTC),
            reviewer=reviewer,
            revision=0,
        )
        if not self._append_event(event):
            current = self.resolution(full)
            raise AlreadyResolvedError(
                f"entry {full} already has an outcome ({_describe(current)}); an outcome is never overwritten: "
                "to change it, record a re-review by a named reviewer (citelock queue rereview ID --reviewer NAME)"
            )
        return event

    def rereview(
        self,
        entry_id: str,
        outcome: Outcome,
        *,
        reviewer: str,
        note: str | None = None,
        category: EscalationCategory | None = None,
        chunk_id: str | None = None,
        resolved_at: datetime | None = None,
        revision: int | None = None,
    ) -> Resolution:
        """Record a new outcome for an entry that has one: an event that supersedes the current outcome.

        The previous outcomes stay in :meth:`history`; the new one becomes current (and, for example, an
        ``accept`` overturned by a re-review no longer yields a calibration sample).

        Args:
            entry_id: The entry's id (or a unique prefix).
            outcome: The new outcome (see :meth:`resolve`).
            reviewer: Who re-reviewed it (required: a change of outcome always has a name).
            note: Free text; required for ``repair``.
            category: For ``escalate`` (required there).
            chunk_id: For ``repair``: a better chunk to cite.
            resolved_at: When (default: now, UTC).
            revision: The revision this re-review supersedes, as the reviewer saw it (default: the current one).
                Given, a re-review recorded meanwhile by someone else makes this one fail instead of silently
                superseding an outcome the reviewer never saw.

        Returns:
            The stored :class:`Resolution` (its ``revision`` is the superseded one + 1).

        Raises:
            KeyError: no such entry.
            InputError: no reviewer name, arguments that do not fit the outcome, or an entry still open.
            AlreadyResolvedError: the entry's current revision is not ``revision``, or another re-review of the
                same revision was recorded first.
        """
        if not (reviewer and reviewer.strip()):
            raise InputError("a re-review needs the reviewer's name (it supersedes someone's outcome)")
        _check_outcome(outcome, note, category, chunk_id)
        full = self.resolve_id(entry_id)
        self._check_audit_outcome(full, outcome)
        current = self.resolution(full)
        if current is None:
            raise InputError(f"entry {full} is still open: give it its first outcome with resolve, not a re-review")
        if revision is not None and revision != current.revision:
            raise AlreadyResolvedError(
                f"entry {full} is at revision {current.revision} ({_describe(current)}), not {revision}: "
                "look at it again before re-reviewing"
            )
        event = Resolution(
            entry_id=full,
            outcome=outcome,
            note=note,
            category=category,
            chunk_id=chunk_id,
            resolved_at=resolved_at or datetime.now(UTC),
            reviewer=reviewer.strip(),
            revision=current.revision + 1,
        )
        if not self._append_event(event):
            latest = self.resolution(full)
            raise AlreadyResolvedError(
                f"entry {full} was re-reviewed meanwhile ({_describe(latest)}); look at it again before re-reviewing"
            )
        return event

    def _check_audit_outcome(self, entry_id: str, outcome: Outcome) -> None:
        """An audit entry takes accept or reject (its label); every other entry takes anything but reject."""
        with self.engine.connect() as conn:
            reason = conn.execute(select(_entries.c.reason).where(_entries.c.id == entry_id)).scalar_one()
        audit = reason == ReasonCode.AUDIT_SAMPLE.value
        if audit and outcome not in ("accept", "reject"):
            raise InputError(
                f"entry {entry_id} is an audit sample: label it accept (the passage supports the claim) or reject "
                f"(it does not), got {outcome!r}"
            )
        if not audit and outcome == "reject":
            raise InputError(
                f"entry {entry_id} is a {reason} finding: reject is only for AUDIT_SAMPLE entries; "
                "use accept, repair or escalate"
            )

    def _append_event(self, event: Resolution) -> bool:
        """Append an outcome event; False when that (entry, revision) already exists."""
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(_events).values(**event.model_dump()))
        except IntegrityError:
            return False
        return True

    def outcome_counts(self, *, surface: str | None = None) -> dict[str, int]:
        """Resolved entries per outcome, and escalations per category as ``escalate:<category>``."""
        counts: dict[str, int] = {}
        for _, resolved in self.items(surface=surface, status="resolved"):
            assert resolved is not None
            counts[resolved.outcome] = counts.get(resolved.outcome, 0) + 1
            if resolved.category:
                key = f"escalate:{resolved.category}"
                counts[key] = counts.get(key, 0) + 1
        return counts

    def calibration_samples(self) -> list[CalibrationSample]:
        """Human-labelled (claim, passage) pairs: entries whose current outcome accepts a judged support finding.

        Oldest accept first. Derived from the events each time, so an ``accept`` later overturned by a re-review
        is not a sample.
        """
        current = _current_events()
        query = (
            select(_entries.c.entry, current.c.resolved_at)
            .select_from(_entries.join(current, current.c.entry_id == _entries.c.id))
            .where(current.c.outcome == "accept", _entries.c.reason.in_([r.value for r in _JUDGED_REASONS]))
            .order_by(current.c.id)
        )
        out = []
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                entry = QueueEntry.model_validate_json(row["entry"])
                if not entry.calibratable or entry.passage is None:
                    continue
                out.append(
                    CalibrationSample(
                        entry_id=entry.id,
                        claim=entry.claim,
                        passage=entry.passage,
                        label="yes",
                        judge_label=entry.verdicts.get("support"),
                        judge_version=entry.judge_version,
                        created_at=aware(row["resolved_at"]),
                    )
                )
        return out


_EVENT_FIELDS = [_events.c[name] for name in Resolution.model_fields]


def _current_events() -> Any:
    """A subquery of each entry's latest outcome event (the highest revision)."""
    latest = (
        select(_events.c.entry_id, func.max(_events.c.revision).label("revision"))
        .group_by(_events.c.entry_id)
        .subquery()
    )
    return (
        select(_events.c.id, *_EVENT_FIELDS)
        .join(latest, and_(_events.c.entry_id == latest.c.entry_id, _events.c.revision == latest.c.revision))
        .subquery()
    )


def _resolution(row: Any) -> Resolution:
    data = {name: row[name] for name in Resolution.model_fields}
    data["resolved_at"] = aware(data["resolved_at"])
    return Resolution.model_validate(data)


def _describe(event: Resolution | None) -> str:
    if event is None:
        return "unknown"
    who = f" by {event.reviewer}" if event.reviewer else ""
    return f"{event.outcome}{who} at {event.resolved_at.isoformat()}, revision {event.revision}"


def _reason(value: ReasonCode | str) -> ReasonCode:
    try:
        return ReasonCode(value)
    except ValueError:
        raise InputError(
            f"unknown reason code {value!r}; expected one of {', '.join(r.value for r in ReasonCode)}"
        ) from None


def audit_entries(result: GuardResult, *, created_at: datetime) -> list[QueueEntry]:
    """The ``AUDIT_SAMPLE`` entries of a result's audit samples (none without an audit plan)."""
    if result.audit is None or result.surface is None:
        return []
    out = []
    for sample in result.audit.samples:
        score = "n/a" if sample.score is None else f"{sample.score:.3f}"
        finding = Finding(
            request_id=result.report.request_id,
            prompt_sha256=result.report.prompt_sha256,
            reason=ReasonCode.AUDIT_SAMPLE,
            layer=Layer.SUPPORT,
            claim_index=sample.claim_index,
            claim=sample.claim,
            citation_index=sample.citation_index,
            chunk_id=sample.chunk_id,
            passage=sample.passage,
            detail=f"audit sample ({sample.stratum}, drawn with probability {sample.probability:g}): the judge "
            f"routed it to {sample.route} (score {score}); the answer was served as the surface decided",
            verdicts={"support": sample.route},
            judge_version=sample.version,
        )
        entry = QueueEntry.from_finding(finding, surface=result.surface, created_at=created_at, week=result.week)
        out.append(entry.model_copy(update={"audit": sample}))
    return out


def _check_outcome(outcome: str, note: str | None, category: str | None, chunk_id: str | None) -> None:
    if outcome not in get_args(Outcome):
        raise InputError(
            f"outcome must be accept, repair or escalate (or reject, an audit sample's label), got {outcome!r}"
        )
    if category is not None and category not in get_args(EscalationCategory):
        raise InputError(f"category must be chunking, truncation or ranking, got {category!r}")
    if outcome == "repair" and not (note and note.strip()):
        raise InputError("a repair needs a note saying what to change (drop/narrow the claim, or re-cite)")
    if outcome == "escalate" and category is None:
        raise InputError("an escalation needs a category: chunking, truncation or ranking")
    if outcome != "escalate" and category is not None:
        raise InputError(f"a category is only for escalations, not for {outcome!r}")
    if outcome != "repair" and chunk_id is not None:
        raise InputError(f"a replacement chunk id is only for repairs, not for {outcome!r}")
