"""A request's time limit, and the one record a request that ran past it leaves.

A whole (non-streamed) request past the gateway's time limit is a 504, and the store must say so: it holds the
prompt as it was logged (before the upstream call) and, as the request's result, a *blocked* result with an
``ANSWER_TRUNCATED`` finding naming the time limit, as a stream closed early is stored. It never holds the result
the caller was not given: the finishing step's own result is not written once the request has expired, and
nothing is half-written (the result row and its review-queue entries are written together, or not at all).

:class:`Deadline` decides, once, which of the two a request ends as: the finishing step *claims* the delivery of
its result (:meth:`Deadline.claim`) or the gateway *expires* it (:meth:`Deadline.expire`), whichever comes
first under one lock. A request whose result was claimed when its time ran out is answered (its result is
complete and being written); one that expired is the 504, and its result is the timeout record.
:class:`GatedSinks` is the door's one sink: it reads the request's deadline from a context variable (set by the
door, copied into the worker threads the request runs in) and writes the real result or the timeout record.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar

from citelock.gateway._envelope import GatewayError
from citelock.guard import GuardResult
from citelock.pipeline import GuardedAnswer
from citelock.reasons import Layer, ReasonCode
from citelock.records import Finding
from citelock.store import ResultStore, ReviewQueue

__all__ = ["DEADLINE", "Deadline", "GatedSinks", "deadline_error", "timed_out"]


class Deadline:
    """The time limit of one request and who ended it: the finished result (claimed) or the limit (expired)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._claimed = False
        self._expired = False

    @property
    def expired(self) -> bool:
        """Whether the request ran past its limit before its result was claimed."""
        return self._expired

    def claim(self) -> bool:
        """The finishing step's result is delivered (True), unless the request already expired (False)."""
        with self._lock:
            if self._expired:
                return False
            self._claimed = True
            return True

    def expire(self) -> bool:
        """The request is past its limit (True), unless its result was already claimed (False: answer it)."""
        with self._lock:
            if self._claimed:
                return False
            self._expired = True
            return True


DEADLINE: ContextVar[Deadline | None] = ContextVar("citelock_gateway_deadline", default=None)
"""The deadline of the request the current task (and the worker threads it starts) runs for."""


def deadline_error(timeout_s: float, request_id: str | None = None) -> GatewayError:
    """The 504 of a request past the gateway's time limit (``x-citelock-request-id``: its timeout record's)."""
    return GatewayError(
        504,
        f"the request did not complete within the gateway's {timeout_s:g} s limit",
        type="timeout",
        code="request_timeout",
        headers={"x-citelock-request-id": request_id} if request_id is not None else None,
    )


def timed_out(result: GuardResult, timeout_s: float) -> GuardResult:
    """``result`` as the record of a request past its time limit: blocked, with an ``ANSWER_TRUNCATED`` finding."""
    report = result.report
    finding = Finding(
        request_id=report.request_id,
        prompt_sha256=report.prompt_sha256,
        reason=ReasonCode.ANSWER_TRUNCATED,
        layer=Layer.COVERAGE,
        claim_index=-1,
        claim="",
        detail=(
            f"the gateway's time limit of {timeout_s:g} s passed before the answer could be served: the caller got "
            f"a 504 and no answer ({len(result.claims)} claim(s) had been checked)"
        ),
        verdicts={"coverage": "fail"},
    )
    findings = (*report.findings, finding)
    return result.model_copy(
        update={"report": report.model_copy(update={"findings": findings, "ok": False}), "decision": "block"}
    )


class GatedSinks:
    """The door's sink: the review queue and the result store, written for a request that has not expired.

    A result whose request expired is written as its timeout record (:func:`timed_out`) instead; a result of a
    request with no deadline (a stream: it has its own end, see :mod:`citelock.gateway._sse`) is written as is.
    Queue entries and the result row go in one transaction (when both stores share one engine, as the door's do).

    Args:
        queue: The review queue.
        results: The result store.
    """

    def __init__(self, queue: ReviewQueue, results: ResultStore) -> None:
        self.queue = queue
        self.results = results

    def __call__(self, answer: GuardedAnswer, result: GuardResult) -> None:
        deadline = DEADLINE.get()
        if deadline is not None and not deadline.claim():
            result = timed_out(result, deadline.timeout_s)
        self.write(result)

    def write(self, result: GuardResult) -> None:
        """Write one result and its queue entries (one transaction when the stores share an engine)."""
        if self.queue.engine is not self.results.engine:
            self.queue.enqueue_result(result)
            self.results.append(result)
            return
        with self.results.engine.begin() as conn:
            self.queue.enqueue_results([result], conn=conn)
            self.results.append_many([(result, None)], conn=conn)
