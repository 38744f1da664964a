"""The metrics page's charts as plain SVG shapes, laid out here and drawn by a template (no script, no library).

Every bar carries its value as a label and a tooltip; an undefined rate (denominator 0) draws no bar and is
labelled ``n/a``, so it is never read as a real 0 %. Colours come from the stylesheet (CSS classes), which the
Content Security Policy allows where inline styles are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from citelock.metrics._compute import ALL, MetricsReport
from citelock.metrics._false_pass import SurfaceStatus

__all__ = ["HEADLINE", "Chart", "Label", "Rect", "bars_chart", "live_rate_chart", "rates_chart", "scope_groups"]

HEADLINE = ("citation_precision", "citation_recall", "faithfulness", "pass_rate")
"""The four rates drawn per surface and per week."""

_LEFT, _TOP, _BOTTOM, _PLOT_H = 44, 34, 40, 180


@dataclass(frozen=True)
class Rect:
    """A bar."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Label:
    """A piece of text on the chart."""

    x: float
    y: float
    text: str
    anchor: str = "middle"
    css: str = "chart-label"
    rotate: int = 0


@dataclass(frozen=True)
class Chart:
    """One chart: its size, bars, labels and legend (CSS class -> text)."""

    title: str
    width: float
    height: float
    rects: tuple[Rect, ...]
    labels: tuple[Label, ...]
    legend: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    gridlines: tuple[tuple[float, str], ...] = field(default_factory=tuple)


def _percent(value: float | None) -> str:
    if value is None:
        return "n/a"
    if 0 < value < 0.005:
        return "<1%"
    if 0.995 <= value < 1:
        return ">99%"
    return f"{value:.0%}"


def rates_chart(report: MetricsReport, groups: Sequence[tuple[str, str, str]], title: str) -> Chart:
    """Grouped bars of the :data:`HEADLINE` rates, one group per ``(label, surface, week)`` scope."""
    bar_w, gap = 16.0, 18.0
    group_w = bar_w * len(HEADLINE) + gap
    width = _LEFT + max(1, len(groups)) * group_w + 10
    height = _TOP + _PLOT_H + _BOTTOM
    base = _TOP + _PLOT_H
    rects: list[Rect] = []
    labels: list[Label] = []
    for g, (label, surface, week) in enumerate(groups):
        x0 = _LEFT + g * group_w + gap / 2
        for i, name in enumerate(HEADLINE):
            try:
                metric = report.get(name, surface=surface, week=week)
            except KeyError:
                continue
            x = x0 + i * bar_w
            value = metric.value
            text = _percent(value)
            tip = f"{name.replace('_', ' ')} — {label}: {metric.formatted()}"
            h = 0.0 if value is None else max(value * _PLOT_H, 0.0)
            if value is not None:
                rects.append(Rect(x=x, y=base - h, width=bar_w - 2, height=h, css=f"bar-{i}", title=tip))
            # Written upwards just above the bar, so four labels fit over four narrow bars.
            labels.append(
                Label(x=x + bar_w / 2 + 2, y=base - h - 3, text=text, anchor="start", css="chart-value", rotate=-90)
            )
        labels.append(Label(x=x0 + (bar_w * len(HEADLINE)) / 2, y=base + 16, text=label, css="chart-axis"))
    grid = tuple((base - f * _PLOT_H, f"{f:.0%}") for f in (0.0, 0.5, 1.0))
    for y, text in grid:
        labels.append(Label(x=_LEFT - 6, y=y + 4, text=text, anchor="end", css="chart-axis"))
    legend = tuple((f"bar-{i}", name.replace("_", " ")) for i, name in enumerate(HEADLINE))
    return Chart(
        title=title,
        width=width,
        height=height,
        rects=tuple(rects),
        labels=tuple(labels),
        legend=legend,
        gridlines=grid,
    )


def bars_chart(items: Sequence[tuple[str, int]], title: str, *, css: str = "bar-volume") -> Chart:
    """Horizontal bars of counts (``(label, count)``), labelled with their values."""
    left, row_h, right = 170.0, 22.0, 60.0
    plot_w = 320.0
    top = max((count for _, count in items), default=0) or 1
    rects: list[Rect] = []
    labels: list[Label] = []
    for row, (label, count) in enumerate(items):
        y = 8 + row * row_h
        w = plot_w * count / top
        rects.append(Rect(x=left, y=y, width=w, height=row_h - 6, css=css, title=f"{label}: {count}"))
        labels.append(Label(x=left - 6, y=y + row_h / 2 + 1, text=label, anchor="end", css="chart-axis"))
        labels.append(Label(x=left + w + 4, y=y + row_h / 2 + 1, text=str(count), anchor="start", css="chart-value"))
    if not items:
        labels.append(Label(x=left, y=20, text="nothing yet", anchor="start", css="chart-axis"))
    height = 16 + max(1, len(items)) * row_h
    return Chart(title=title, width=left + plot_w + right, height=height, rects=tuple(rects), labels=tuple(labels))


def scope_groups(
    report: MetricsReport, *, weeks: int = 12
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """The scopes to draw: all answers and each surface; and the last ``weeks`` ISO weeks (all surfaces)."""
    by_surface = [("all", ALL, ALL), *((s, s, ALL) for s in report.surfaces)]
    by_week = [(w, ALL, w) for w in report.weeks[-weeks:]]
    return by_surface, by_week


def live_rate_chart(status: SurfaceStatus, *, weeks: int = 12) -> Chart:
    """The surface's weekly false-pass estimates as bars with their 95% interval, and the target as a line.

    A week without labels draws no bar and is labelled ``n/a``. The scale tops at the larger of 20% and the
    highest upper bound, so a target of a few percent stays visible.
    """
    rates = [r for r in status.weekly if r.name == "false_pass_rate"][-weeks:]
    bar_w, gap = 22.0, 14.0
    top = max([0.2, *(r.high for r in rates if r.high is not None)])
    width = _LEFT + max(1, len(rates)) * (bar_w + gap) + 10
    base = _TOP + _PLOT_H
    rects: list[Rect] = []
    labels: list[Label] = []
    for i, rate in enumerate(rates):
        x = _LEFT + i * (bar_w + gap) + gap / 2
        tip = f"false pass rate {rate.week}: {rate.formatted()}"
        if rate.value is not None and rate.low is not None and rate.high is not None:
            h = rate.value / top * _PLOT_H
            css = "bar-alarm" if rate.status == "above_target" else "bar-0"
            rects.append(Rect(x=x, y=base - h, width=bar_w, height=h, css=css, title=tip))
            y_low, y_high = base - rate.low / top * _PLOT_H, base - rate.high / top * _PLOT_H
            rects.append(Rect(x=x + bar_w / 2 - 1, y=y_high, width=2, height=y_low - y_high, css="whisker", title=tip))
        labels.append(
            Label(
                x=x + bar_w / 2,
                y=base - 4 - (0 if rate.high is None else rate.high / top * _PLOT_H),
                text=_percent(rate.value),
                css="chart-value",
            )
        )
        labels.append(Label(x=x + bar_w / 2, y=base + 16, text=rate.week[-3:], css="chart-axis"))
    target = next((r.target for r in rates if r.target is not None), None)
    grid: list[tuple[float, str]] = [(base, "0%"), (base - _PLOT_H, _percent(top))]
    if target is not None:
        grid.append((base - target / top * _PLOT_H, f"target {target:.0%}"))
    for y, text in grid:
        labels.append(Label(x=_LEFT - 6, y=y + 4, text=text, anchor="end", css="chart-axis"))
    return Chart(
        title=f"Live false-pass rate on {status.surface} (weighted audit labels, 95% Wilson interval)",
        width=width,
        height=_TOP + _PLOT_H + _BOTTOM,
        rects=tuple(rects),
        labels=tuple(labels),
        legend=(("bar-0", "at or under target"), ("bar-alarm", "upper bound above target")),
        gridlines=tuple(grid),
    )
