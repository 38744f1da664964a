"""``citelock answer --stream``: a rich live display of a guarded stream, claim by claim.

Each claim appears as the surface allows (as it is generated, after its checks, or after its judge), with a
mark once it passed, or its reason codes when it failed; then the footnotes and the guard line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from citelock.pipeline import GuardedAnswer

__all__ = ["StreamView", "show_stream"]


@dataclass
class _Line:
    text: str = ""
    state: str = "pending"  # pending | shown | passed | failed
    reasons: tuple[str, ...] = ()


@dataclass
class StreamView:
    """The claims on screen, updated from stream events."""

    lines: dict[int, _Line] = field(default_factory=dict)
    note: str = ""

    def update(self, event: Any) -> None:
        """Apply one event."""
        kind = event.type
        n = getattr(event, "claim_index", None)
        if n is None:
            return
        line = self.lines.setdefault(n, _Line())
        if kind == "claim.delta":
            line.text = event.snapshot
        elif kind == "claim.shown":
            line.text, line.state = event.claim.text, "passed"
        elif kind in ("claim.checked", "claim.judged") and event.passed and line.state in ("pending", "shown"):
            line.state = "passed" if line.text else line.state
        elif kind in ("claim.withheld", "claim.retracted"):
            line.state, line.reasons = "failed", tuple(r.value for r in event.reasons)
            if kind == "claim.withheld":
                line.text = ""
        elif kind == "claim.diverged":
            line.state, line.reasons = "failed", (event.reason.value,)
            self.note = f"{event.action} at delta {event.delta_index}: {event.field} {event.value!r} left the prompt"

    def render(self) -> Group:
        """The display: one line per claim."""
        rows: list[Text] = []
        for n in sorted(self.lines):
            line = self.lines[n]
            if line.state == "failed":
                shown = f" {line.text}" if line.text else ""
                rows.append(Text(f"✗{shown} — {', '.join(line.reasons)}", style="red"))
            elif line.state == "passed":
                rows.append(Text(f"✓ {line.text}", style="green"))
            elif line.text:
                rows.append(Text(f"… {line.text}", style="dim"))
        if self.note:
            rows.append(Text(self.note, style="yellow"))
        return Group(*rows)


def show_stream(events: Iterable[Any], console: Console | None = None) -> GuardedAnswer:
    """Display ``events`` live; return the ``done`` event's answer."""
    view = StreamView()
    out = console or Console()
    done: GuardedAnswer | None = None
    with Live(view.render(), console=out, refresh_per_second=12, transient=False) as live:
        for event in events:
            if event.type == "done":
                done = event.answer
                break
            view.update(event)
            live.update(view.render())
    out.print()
    if done is None:  # pragma: no cover - the stream always ends with done or raises
        raise RuntimeError("the stream ended without its done event")
    return done
