"""A PNG dashboard of the citation metrics (matplotlib, the ``eval`` extra, Agg backend: no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from citelock._errors import MissingExtraError
from citelock.evals._metrics import ALL, MetricsReport

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


def metrics_chart(report: MetricsReport, path: str | Path, *, title: str = "citelock metrics") -> Path:
    """Write a six-panel PNG of the metrics.

    Panels: headline rates per surface, per week, queue volume by reason, support rate by retrieval rank and
    by chunking strategy, and judge calls made vs saved.

    Args:
        report: The metrics.
        path: Where to write the PNG.
        title: The figure title.

    Returns:
        The written path.

    Raises:
        MissingExtraError: matplotlib is not installed (``pip install "citelock[eval]"``).
    """
    plt = _pyplot()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, 3, figsize=(16, 9), constrained_layout=True)
    fig.suptitle(title)

    def rate(name: str, surface: str = ALL, week: str = ALL, key: str | None = None) -> float:
        """The value, or NaN when it is undefined (n/a is drawn as a gap, never as 0)."""
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
        ax.bar(xs, [rate(name, surface=s) for s in groups], width, label=name.replace("_", " "))
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1.05)
    ax.set_title("by surface")
    ax.legend(fontsize=8, loc="lower right")

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
    else:
        ax.text(0.5, 0.5, "no queue entries", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    ax.set_title("review queue volume by reason")

    for ax, name, label in (
        (axes[1][0], "support_rate_by_rank", "retrieval rank of the cited chunk"),
        (axes[1][1], "support_rate_by_strategy", "chunking strategy of the cited chunk"),
    ):
        values = [v for v in report.scope() if v.name == name]
        ax.bar([v.key or "" for v in values], [v.value or 0.0 for v in values], color="tab:green")
        for i, v in enumerate(values):
            ax.annotate(f"n={v.denominator}", (i, v.value or 0.0), ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, 1.1)
        ax.set_xlabel(label)
        ax.set_title("support rate (judged pairs that were supported)")

    ax = axes[1][2]
    names = ("judge_calls", "saved_by_ordering", "saved_by_sampling", "cache_hits")
    counts = [report.get(n).numerator for n in names]
    ax.bar([n.replace("_", " ") for n in names], counts, color=["tab:blue", "tab:gray", "tab:gray", "tab:gray"])
    ax.set_title("judge calls made vs saved")
    ax.tick_params(axis="x", labelrotation=20)

    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
