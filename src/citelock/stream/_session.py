"""One guarded stream's state: deltas in, events out; free checks per claim, judges in worker threads.

A :class:`Session` reads the answer as it grows (:mod:`citelock.stream._incremental`), runs the prefix checks on
every delta, and feeds each claim, the moment it completes, to the request's guard fold
(:class:`~citelock.guard._fold.GuardFold`): its free checks at once, its support judge on a worker thread
while generation goes on (one call at a time, so the judge sees the claims in answer order, as a whole-answer run does).
Every claim is checked once; the final result is assembled from the fold (``Guard.run(..., fold=)``), never
re-guarded. The judges are memoized as well (:class:`MemoJudge`): a fold that cannot be used (its claims are
not the final parse's) falls back to a whole run that asks no judge twice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from threading import Lock
from typing import Any, Literal

from pydantic import ValidationError

from citelock.errors import OutputBoundsError
from citelock.guard import Guard, GuardResult
from citelock.guard._fold import ClaimSupport, GuardFold
from citelock.judges import Judge
from citelock.records import Answer, Claim, PromptRecord, ReasonCode, Verdict
from citelock.stream._events import (
    CitationClosed,
    CitationDelta,
    CitationOpened,
    ClaimChecked,
    ClaimDelta,
    ClaimDiverged,
    ClaimJudged,
    ClaimRetracted,
    ClaimShown,
    ClaimWithheld,
    Show,
)
from citelock.stream._incremental import FreeTextReader, JsonReader, PartialClaim, PrefixChecker
from citelock.stream._scan import FIELD, ID, SHAPE, SPAN, TEXT
from citelock.stream._serial import SerialLane

__all__ = [
    "MemoJudge",
    "OnDiverge",
    "Session",
    "default_hold",
    "default_on_diverge",
    "default_show",
    "memo_guard",
]

OnDiverge = Literal["cut", "continue"]
"""What a divergence does: stop generating (the answer will be refused) or drop that claim and go on."""

Event = Any  # one of the event models (citelock.stream._events)
_NO_EVENTS: list[Event] = []  # what a quiet delta returns (callers never mutate a step's list)


class MemoJudge:
    """A judge that asks ``inner`` once per (claim, passage) and hands every later caller the same verdict.

    Thread-safe: a second caller of a pair in flight waits for the first call's verdict.
    """

    def __init__(self, inner: Judge) -> None:
        self.inner = inner
        self.name = inner.name
        self.version = inner.version
        self._memo: dict[tuple[str, str], Future[Verdict]] = {}
        self._verdicts: dict[tuple[str, str], Verdict] = {}  # the memo's settled verdicts, read without the lock
        self._lock = Lock()
        self._inline = getattr(inner, "inline", False) is True

    def judge(self, claim: str, passage: str) -> Verdict:
        """The inner judge's verdict on ``(claim, passage)``, asked at most once."""
        key = (claim, passage)
        verdict = self._verdicts.get(key)
        if verdict is not None:
            return verdict
        if self._inline:  # a judge of microseconds: called under the lock, no future to hand its verdict over
            with self._lock:
                future = self._memo.get(key)
                if future is None:
                    try:
                        verdict = self._verdicts[key] = self.inner.judge(claim, passage)
                    except BaseException as exc:  # the same failure for every later caller
                        future = self._memo[key] = Future()
                        future.set_exception(exc)
                        raise
                    return verdict
            return future.result()
        with self._lock:
            future = self._memo.get(key)
            owner = future is None
            if future is None:
                future = self._memo[key] = Future()
        if owner:
            try:
                verdict = self.inner.judge(claim, passage)
                self._verdicts[key] = verdict
                future.set_result(verdict)
            except BaseException as exc:  # the same failure for every caller, as a direct call would raise
                future.set_exception(exc)
        return future.result()


def memo_guard(guard: Guard) -> Guard:
    """``guard`` with memoized judges: a copy of the caller's guard (every field kept), its judges wrapped."""
    if guard.judge is None and guard.escalate is None:
        return guard
    return guard.with_judges(
        judge=MemoJudge(guard.judge) if guard.judge is not None else None,
        escalate=MemoJudge(guard.escalate) if guard.escalate is not None else None,
    )


def default_show(guard: Guard) -> Show:
    """The safe default per surface: high stakes wait for the judge, low stakes stream, no surface waits for checks."""
    if guard.policy is None:
        return "after_checks"
    return "after_judge" if guard.policy.stakes == "high" else "immediately"


def default_hold(guard: Guard) -> bool:
    """Hold passing claims until the answer-level checks ran: on a high-stakes surface whose relevance is checked.

    The relevance check (``OFF_QUESTION``) is about the whole answer, so it can only run once the answer is
    complete, and it can still refuse claims that passed their own checks and judge. On a high-stakes surface a
    claim is therefore shown (``claim.shown``) only after it, just before ``done``: nothing the answer-level check
    can still overturn is ever on screen. Elsewhere claims are shown as they pass, and one the final result
    refuses is retracted before ``done``.
    """
    return guard.policy is not None and guard.policy.stakes == "high" and guard.relevance != "off"


def default_on_diverge(guard: Guard) -> OnDiverge:
    """Cut where a failing claim refuses the answer (``on_fail="block"``, or no surface), else continue."""
    return "cut" if guard.policy is None or guard.policy.on_fail == "block" else "continue"


@dataclass
class _Shown:
    text: str = ""
    opened: int = 0
    fields: dict[tuple[int, str], str] = field(default_factory=dict)
    closed: int = 0


@dataclass
class Session:
    """The state of one stream (see the module docstring)."""

    record: PromptRecord
    guard: Guard
    show: Show
    on_diverge: OnDiverge
    free_text: bool
    span_policy: str | None
    known_ids: Collection[str] | None = None
    hold: bool = False
    bounds: tuple[int, int] | None = None
    tokens: int = 0
    cut: ClaimDiverged | None = None
    over: OutputBoundsError | None = None
    checked: list[Claim] = field(default_factory=list)
    threaded: bool = False  # a judge runs on a worker thread: its verdicts arrive between deltas (see judged)
    _reader: JsonReader | FreeTextReader = field(init=False)
    _prefix: PrefixChecker = field(init=False)
    _shown: dict[int, _Shown] = field(default_factory=dict)
    _dropped: set[int] = field(default_factory=set)
    _on_screen: set[int] = field(default_factory=set)
    _marked: set[int] = field(default_factory=set)
    _held: list[int] = field(default_factory=list)
    _pending: dict[int, Future[ClaimSupport]] = field(default_factory=dict)
    _ready: list[Future[ClaimSupport]] = field(default_factory=list)  # judges finished, appended by their thread
    _seen: int = 0  # how many of them the last poll saw
    _background: list[Future[ClaimSupport]] = field(default_factory=list)
    _lane: SerialLane | None = None
    fold: GuardFold = field(init=False)
    _text_checked: bool = field(init=False)
    _limit: int = field(init=False)
    _max_chars: int = field(init=False)
    _spans_quiet: bool = field(init=False)
    _inline: bool = field(init=False)

    def __post_init__(self) -> None:
        self._reader = FreeTextReader(live=self.show == "immediately") if self.free_text else JsonReader()
        self.fold = self.guard.fold(self.record, known_ids=self.known_ids)
        self._prefix = PrefixChecker(self.record, self.known_ids, index=self.fold.index)
        # a claim's text as it grows matters to the quote check and to a screen showing it; else only when done
        self._text_checked = self.quoting or self.show == "immediately"
        self._limit = self._max_claims
        self._max_chars = self.bounds[1] if self.bounds is not None else 1 << 62
        # a plain span's growth is read by no screen and, unless the policy quotes, confirmed by one comparison
        self._spans_quiet = self.show != "immediately" and not self.quoting
        judges = [j for j in (self.guard.judge, self.guard.escalate) if j is not None]
        self._inline = all(getattr(getattr(j, "inner", j), "inline", False) is True for j in judges)

    @property
    def text(self) -> str:
        """Everything received so far."""
        return self._reader.text

    @property
    def quoting(self) -> bool:
        return self.span_policy in ("quote", "quote_sentence")

    def step(self, delta: str) -> list[Event]:
        """Take one delta (one token or step): text events, a divergence, checks of claims it completed.

        The work is bounded by the delta and the claim it extends (the reader scans only the new characters,
        the prefix checks look only at fields that changed), never by the answer so far. The list returned is
        the caller's to read, not to change (a quiet delta's is shared).
        """
        self.tokens += 1
        reader = self._reader
        claims = reader.feed(delta)
        touched = reader.touched
        # the usual deltas, which no check or screen reads: a word of a text nothing reads yet, pure structure, a
        # span that provably still holds where it was found, the shape alone with no screen showing it (within
        # the schema's bounds), an id still the prefix of an assembled one in a citation with no span yet
        if reader.length <= self._max_chars and (
            not touched
            or (touched == TEXT and not self._text_checked)
            or (touched == SPAN and self._spans_quiet and self._prefix.span_holds(reader.open_citation))
            or (touched == SHAPE and self.show != "immediately" and len(claims) <= self._limit)
            or (touched == ID and self.show != "immediately" and self._prefix.id_holds(reader.open_citation))
        ):
            return _NO_EVENTS
        bounds = self.bounds
        if bounds is not None and (len(claims) > bounds[0] or reader.length > bounds[1]):
            self.over = self._beyond(claims)
        else:
            touched = reader.touched
            if touched != FIELD and (
                not touched or (touched == TEXT and not self._text_checked) or self._quiet(touched, reader)
            ):
                return _NO_EVENTS  # shared, never mutated: most deltas make no list
        out: list[Event] = []
        for n in range(len(self.checked), min(len(claims), self._limit)):
            claim = claims[n]
            if n not in self._dropped:
                diverged = self._diverged(claim, n)
                if diverged is not None:
                    out.append(diverged)
                    if diverged.action == "cut":
                        self.cut = diverged
                        return out
                    self._dropped.add(n)
            if self.show == "immediately" and n not in self._dropped:
                out += self._text_events(claim, n)
            if claim.done and n == len(self.checked):
                out += self._complete(claims, n)
        return out

    def _quiet(self, touched: int, reader: Any) -> bool:
        """True when the delta changed nothing a check or the screen reads.

        That is no claim (a quote, a colon), a text nothing reads, the shape alone with no screen showing it, or a
        span that provably still holds where it was found.
        """
        if not touched:
            return True
        if touched == TEXT:
            return not self._text_checked
        if self.show == "immediately":
            return False
        if touched == SHAPE:
            return True
        return touched == SPAN and (self.quoting or self._prefix.span_holds(reader.open_citation))

    @property
    def _max_claims(self) -> int:
        return self.bounds[0] if self.bounds is not None else 1 << 62

    def _beyond(self, claims: list[PartialClaim]) -> OutputBoundsError | None:
        """The schema's bound the output has gone beyond (claims begun, characters received), if any."""
        if self.bounds is None:
            return None
        max_claims, max_chars = self.bounds
        if len(claims) > max_claims:
            got, limit, bound = len(claims), max_claims, "claims"
        elif self._reader.length > max_chars:
            got, limit, bound = self._reader.length, max_chars, "chars"
        else:
            return None
        return OutputBoundsError(
            f"request {self.record.request_id}: the output went beyond the schema's bound of {limit} {bound} "
            f"({got} after {self.tokens} deltas); the stream was cut there (a backend that ignored the constraint?)",
            bound=bound,
            limit=limit,
            got=got,
        )

    def end(self) -> list[Event]:
        """Generation finished: every claim still open is complete; check them."""
        claims = self._reader.feed("")
        out: list[Event] = []
        for n in range(len(self.checked), min(len(claims), self._max_claims)):
            if not (self.free_text or self._reader.complete or claims[n].done):
                break  # JSON cut before this claim closed (max_tokens): it is not a complete claim
            claims[n].done = True
            if self.show == "immediately" and n not in self._dropped:
                out += self._text_events(claims[n], n)
            out += self._complete(claims, n)
        return out

    @property
    def judged(self) -> bool:
        """A judge finished since the last :meth:`poll` (a cheap test, made on every delta)."""
        return len(self._ready) != self._seen

    def poll(self) -> list[Event]:
        """Events of judges that finished since the last poll."""
        out: list[Event] = []
        if not self._pending:
            return out
        self._seen = len(self._ready)
        for n in sorted(self._pending):
            if self._pending[n].done():
                out += self._judged(n, self._pending.pop(n).result())
        return out

    def drain(self) -> Iterator[Event]:
        """Wait for every judge still running; their events in claim order."""
        for n in sorted(self._pending):
            yield from self._judged(n, self._pending.pop(n).result())
        for future in self._background:
            future.result()
        self._background.clear()

    def close(self) -> None:
        """Cancel judges not started and release the worker threads."""
        for future in (*self._pending.values(), *self._background):
            future.cancel()
        self._pending.clear()
        self._background.clear()
        if self._lane is not None:
            self._lane.close()

    def settle(self, result: GuardResult) -> list[Event]:
        """Bring the screen in line with the answer's final result, before ``done`` (or before an error is raised).

        A claim on screen that the result does not serve (a blocked answer, a claim dropped by an answer-level
        check such as ``OFF_QUESTION``, a stream cut or failed) is retracted; one it serves marked is marked; a
        claim held for the answer-level checks (:func:`default_hold`) is shown if the result serves it, else
        withheld.
        """
        blocked = result.decision == "block"
        whole = tuple(dict.fromkeys(f.reason for f in result.report.findings if f.claim_index < 0))
        every = tuple(dict.fromkeys(f.reason for f in result.report.findings))
        out: list[Event] = []
        for n in sorted(self._on_screen):
            outcome = result.claims[n] if n < len(result.claims) else None
            reasons = (outcome.reasons if outcome is not None else ()) or whole or every
            if blocked or outcome is None or outcome.action in ("drop", "block"):
                self._on_screen.discard(n)
                out.append(ClaimRetracted(claim_index=n, reasons=reasons, action="retract"))
            elif outcome.action == "mark" and n not in self._marked:
                self._marked.add(n)
                out.append(ClaimRetracted(claim_index=n, reasons=reasons, action="mark"))
        for n in self._held:
            outcome = result.claims[n] if n < len(result.claims) else None
            if not blocked and outcome is not None and outcome.action == "serve":
                self._on_screen.add(n)
                out.append(ClaimShown(claim_index=n, claim=self.checked[n]))
            else:
                reasons = (outcome.reasons if outcome is not None else ()) or whole or every
                out.append(ClaimWithheld(claim_index=n, reasons=reasons))
        self._held.clear()
        return out

    def partial_answer(self) -> Answer:
        """The claims checked so far (and a diverged claim that cut the stream), as an answer to guard."""
        claims = list(self.checked)
        if self.cut is not None and self.cut.claim_index == len(claims):
            partial = self._reader.claims[self.cut.claim_index]
            if isinstance(self._reader, FreeTextReader) and self.cut.field == "chunk_id":
                # the marker being typed, closed as it stood: the guard then sees the id that diverged
                closed = FreeTextReader().feed(self.text + "]")
                partial = closed[self.cut.claim_index] if len(closed) > self.cut.claim_index else partial
            built = self._build(partial)
            if built is not None:
                claims.append(built)
        return Answer(
            claims=tuple(claims),
            format="free_text" if self.free_text else "structured",
            raw=self.text,
            span_policy=self.span_policy,
        )

    # -- internals ---------------------------------------------------------------------------------------------

    def _diverged(self, claim: PartialClaim, n: int) -> ClaimDiverged | None:
        if self.free_text:
            reader = self._reader
            last = isinstance(reader, FreeTextReader) and n == len(reader.claims) - 1  # a marker is the last claim's
            typed = reader.open_marker() if last and isinstance(reader, FreeTextReader) else None
            found = self._prefix.marker(typed) if typed is not None else None
        else:
            found = self._prefix.claim(claim, n, self.quoting)
        if found is None:
            return None
        return ClaimDiverged(
            claim_index=n,
            citation_index=found.citation_index,
            field=found.field,
            value=found.value,
            reason=found.reason,
            delta_index=self.tokens - 1,
            tokens=self.tokens,
            action=self.on_diverge,
        )

    def _text_events(self, claim: PartialClaim, n: int) -> list[Event]:
        seen = self._shown.setdefault(n, _Shown())
        out: list[Event] = []
        if claim.text != seen.text:
            delta = claim.text[len(seen.text) :] if claim.text.startswith(seen.text) else claim.text
            out.append(ClaimDelta(claim_index=n, delta=delta, snapshot=claim.text))
            seen.text = claim.text
        for k, cite in enumerate(claim.citations):
            if k >= seen.opened:
                out.append(CitationOpened(claim_index=n, citation_index=k))
                seen.opened = k + 1
            for name, value in (("chunk_id", cite.chunk_id), ("span", cite.span or "")):
                before = seen.fields.get((k, name), "")
                if value != before:
                    delta = value[len(before) :] if value.startswith(before) else value
                    out.append(CitationDelta(claim_index=n, citation_index=k, field=name, delta=delta, snapshot=value))
                    seen.fields[(k, name)] = value
        closing = len(claim.citations) if claim.done else len(claim.citations) - 1
        built = self._build(claim) if closing > seen.closed else None
        while seen.closed < closing and built is not None:
            k = seen.closed
            out.append(CitationClosed(claim_index=n, citation_index=k, citation=built.citations[k]))
            seen.closed = k + 1
        if out:
            self._on_screen.add(n)
        return out

    def _build(self, claim: PartialClaim) -> Claim | None:
        try:
            return claim.claim(self.quoting)
        except ValidationError:  # an empty id or span: the final parse reports it
            return None

    def _complete(self, claims: list[PartialClaim], n: int) -> list[Event]:
        built = self._build(claims[n])
        if built is None:
            return []
        self.checked.append(built)
        fmt = "free_text" if self.free_text else "structured"
        checked = self.fold.check(built, answer_format=fmt, span_policy=self.span_policy)
        findings, citations = checked.findings, checked.citations
        passed = not findings and self.fold.error is None
        policy = self.guard.policy
        judging = (
            passed
            and policy is not None
            and self.guard.judge is not None
            and any(policy.sampled(self.record.request_id, n, k) for k in range(len(built.citations)))
        )
        out: list[Event] = [
            ClaimChecked(
                claim_index=n, claim=built, passed=passed, citations=citations, findings=findings, judging=judging
            )
        ]
        if not passed:
            out += self._failed(n, tuple(dict.fromkeys(f.reason for f in findings)))
        elif self.show == "after_checks" or (self.show == "after_judge" and not judging):
            out += self._show(n)
        if self.fold.judging is None:  # no judge can be called: the claim's support selection, at once
            self.fold.support(n)
            return out
        if self._inline:  # a judge of microseconds: no thread could run it sooner (the GIL), a hand-off costs more
            support = self.fold.support(n)
            return [*out, *self._judged(n, support)] if judging else out
        if self._lane is None:  # one call at a time: the judge sees the claims in answer order, as a whole run does
            self._lane = SerialLane()
            self.threaded = True
        fold = self.fold
        future = self._lane.submit(lambda: fold.support(n))
        if judging:
            self._pending[n] = future
            future.add_done_callback(self._ready.append)  # list.append is atomic: the worker may call it
        else:
            self._background.append(future)
        return out

    def _show(self, n: int) -> list[Event]:
        if self.hold:  # shown (or withheld) by settle(), once the answer-level checks ran
            self._held.append(n)
            return []
        self._on_screen.add(n)
        return [ClaimShown(claim_index=n, claim=self.checked[n])]

    def _failed(self, n: int, reasons: tuple[ReasonCode, ...]) -> list[Event]:
        on_fail = self.guard.policy.on_fail if self.guard.policy is not None else "block"
        if n in self._held:
            self._held.remove(n)
            return [ClaimWithheld(claim_index=n, reasons=reasons)]
        if self.show == "immediately" or n in self._on_screen:
            if on_fail == "mark":
                self._marked.add(n)
            else:
                self._on_screen.discard(n)
            return [ClaimRetracted(claim_index=n, reasons=reasons, action="mark" if on_fail == "mark" else "retract")]
        return [ClaimWithheld(claim_index=n, reasons=reasons)]

    def _judged(self, n: int, support: ClaimSupport) -> list[Event]:
        outcome = self.fold.outcome(n, support)
        checks = support[0] if len(support[0]) < 2 else tuple(sorted(support[0], key=lambda c: c.citation_index))
        findings = (*self.fold.checks[n].findings, *support[1])
        passed = outcome.action == "serve" and not outcome.reasons
        out: list[Event] = [
            ClaimJudged(claim_index=n, passed=passed, support=checks, findings=findings, outcome=outcome)
        ]
        if outcome.action != "serve":
            out += self._failed(n, outcome.reasons)
        elif self.show == "after_judge" and n not in self._on_screen and n not in self._held:
            out += self._show(n)
        return out
