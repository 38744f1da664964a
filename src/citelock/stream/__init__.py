"""Guarded streaming: every claim verified as it arrives (:meth:`citelock.Citelock.stream` / ``astream``).

The events (every one has a ``type`` string; the last is ``done`` and carries the
:class:`~citelock.GuardedAnswer` as ``.answer``), the show policy (:data:`Show`) and the divergence policy
(:data:`OnDiverge`). The guide is ``docs/guides/streaming.md``.
"""

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
    Done,
    Show,
    StreamEvent,
)
from citelock.stream._session import MemoJudge, OnDiverge, default_on_diverge, default_show

__all__ = [
    "CitationClosed",
    "CitationDelta",
    "CitationOpened",
    "ClaimChecked",
    "ClaimDelta",
    "ClaimDiverged",
    "ClaimJudged",
    "ClaimRetracted",
    "ClaimShown",
    "ClaimWithheld",
    "Done",
    "MemoJudge",
    "OnDiverge",
    "Show",
    "StreamEvent",
    "default_on_diverge",
    "default_show",
]
