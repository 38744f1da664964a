"""A PNG dashboard of the citation metrics (matplotlib, the ``eval`` extra, Agg backend: no display needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from citelock.errors import MissingExtraError
from citelock.metrics._compute import ALL, MetricsReport

__all__ = ["metrics_chart"]

_HEADLINE = ("citation_precision", "citation_recall", "faithfulness", "pass_rate")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MissingExtraError("eval", "matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rate_label(value: float | None) -> str:
    """A bar's label: ``n/a`` for an undefined rate (no denominator), else a percentage (a real 0 is ``0%``)."""
    if value is None or math.isnan(value):
        return "n/a"
    if 0 < value < 0.005:
        return "<1%"
    if 0.995 <= value < 1:
        return ">99%"
    return f"{value:.0%}"


def _label_bars(ax: Any, xs: Sequence[float], values: Sequence[float | None], labels: Sequence[str], **kw: Any) -> None:
    """Write each label just above its bar (at the axis for an undefined or empty bar, which draws nothing)."""
    for x, value, label in zip(xs, values, labels, strict=True):
        y = 0.0 if value is None or math.isnan(value) else value
        ax.text(x, y, label, ha="center", va="bottom", **kw)


def _metrics_figure(report: MetricsReport, title: str) -> Any:
    """Draw the six panels on a new figure and return it (the caller saves and closes it)."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(16, 9), constrained_layout=True)
    fig.suptitle(title)

    def rate(name: str, surface: str = ALL, week: str = ALL, key: str | None = None) -> float:
        """The value, or NaN when it is undefined (n/a is drawn as a gap labeled n/a, never as 0)."""
        try:
            value = report.get(name, surface=surface, week=week, key=key).value
        except KeyError:
            return math.nan
        return math.nan if value is None else value

    ax = axes[0][0]
    groups = [ALL, *report.surfaces]
    width = 0.8 / len(_HEADLINE)
    for i, name in enumerate(_HEADLINE):
        xs = [g + (i - (len(_HEADLINE) - 1) / 2) * width for g in range(len(groups))]
        heights = [rate(name, surface=s) for s in groups]
        ax.bar(xs, heights, width, label=name.replace("_", " "))
        _label_bars(ax, xs, heights, [_rate_label(h) for h in heights], fontsize=7, rotation=90)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_xlim(-0.5, len(groups) - 0.5)  # all-n/a bars draw nothing, so autoscaling would not frame the labels
    ax.set_ylim(0, 1.4)  # room above the tallest label for the legend, which must not hide the n/a labels
    ax.set_title("by surface")
    ax.legend(fontsize=7, loc="upper center", ncols=len(_HEADLINE))

    ax = axes[0][1]
    weeks = report.weeks
    for name in _HEADLINE:
        ax.plot(weeks, [rate(name, week=w) for w in weeks], marker="o", label=name.replace("_", " "))
    ax.set_ylim(0, 1.05)
    ax.set_title("by ISO week (all surfaces)")
    ax.tick_params(axis="x", labelrotation=45)
    ax.legend(fontsize=8, loc="lower right")

    ax = axes[0][2]
    volume = [v for v in report.scope() if v.name == "queue_volume"]
    if volume:
        ax.barh([v.key or "" for v in volume][::-1], [v.numerator for v in volume][::-1], color="tab:red")
        for y, v in enumerate(volume[::-1]):
            ax.text(v.numerator, y, f" {int(v.numerator)}", ha="left", va="center", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no queue entries", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    ax.set_title("review queue volume by reason")

    for ax, name, label in (
        (axes[1][0], "support_rate_by_rank", "retrieval rank of the cited chunk"),
        (axes[1][1], "support_rate_by_strategy", "chunking strategy of the cited chunk"),
    ):
        values = [v for v in report.scope() if v.name == name]
        heights = [math.nan if v.value is None else v.value for v in values]
        ax.bar([v.key or "" for v in values], heights, color="tab:green")
        labels = [f"{_rate_label(v.value)}\nn={v.denominator}" for v in values]
        _label_bars(ax, range(len(values)), heights, labels, fontsize=8)
        ax.set_ylim(0, 1.2)
        ax.set_xlabel(label)
        ax.set_title("support rate (judged pairs that were supported)")

    ax = axes[1][2]
    names = ("judge_calls", "saved_by_ordering", "saved_by_sampling", "cache_hits")
    counts = [report.get(n).numerator for n in names]
    ax.bar([n.replace("_", " ") for n in names], counts, color=["tab:blue", "tab:gray", "tab:gray", "tab:gray"])
    _label_bars(ax, range(len(names)), counts, [str(int(c)) for c in counts], fontsize=8)
    ax.set_ylim(0, max(1.0, max(counts) * 1.1))
    ax.set_title("judge calls made vs saved")
    ax.tick_params(axis="x", labelrotation=20)
    return fig


def metrics_chart(report: MetricsReport, path: str | Path, *, title: str = "citelock metrics") -> Path:
    """Write a six-panel PNG of the metrics.

    Panels: headline rates per surface, per week, queue volume by reason, support rate by retrieval rank and
    by chunking strategy, and judge calls made vs saved. Every bar is labeled with its value; an undefined
    rate (no denominator) draws no bar and is labeled ``n/a``, so it is never mistaken for a real ``0%``.

    Args:
        report: The metrics.
        path: Where to write the PNG.
        title: The figure title.

    Returns:
        The written path.

    Raises:
        MissingExtraError: matplotlib is not installed (``pip install "citelock[eval]"``).
    """
    fig = _metrics_figure(report, title)
    try:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=100)
    finally:
        _pyplot().close(fig)
    return out
