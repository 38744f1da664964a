"""``citelock metrics``: citation metrics from the stored guard results and the review queue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from citelock.cli._app import app, using_database
from citelock.cli._io import fail, shown, text_option
from citelock.cli._queue import DbOption, resolve_db
from citelock.cli._report import REASON_WIDTH
from citelock.cli._report import console as rich_console
from citelock.errors import UsageError
from citelock.metrics._compute import ALL, MetricsReport, metrics_from_store

__all__ = ["metrics"]


@app.command()
def metrics(
    db: DbOption = None,
    surface: Annotated[str | None, typer.Option("--surface", help="only this surface")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print every metric of every scope as JSON")] = False,
    png: Annotated[
        Path | None, typer.Option("--png", help="also write a PNG dashboard here (needs the eval extra)")
    ] = None,
    by_week: Annotated[bool, typer.Option("--by-week", help="also print a table per surface and ISO week")] = False,
) -> None:
    """Citation metrics overall, per surface and per ISO week, each printed beside its definition.

    Precision, recall, faithfulness, pass rate, queue volume and repair rate, support by rank and strategy.
    """
    if surface is not None:
        text_option("--surface", surface)
    if png is not None and (png.is_dir() or not png.parent.is_dir()):
        fail(f"--png {shown(png)}: expected a file path in an existing folder")
    target = resolve_db(db)
    try:
        with using_database(target):
            report = metrics_from_store(target, surface=surface)
    except UsageError as exc:
        fail(f"cannot read metrics from {shown(target)}: {exc}")
    if png is not None:
        from citelock.metrics._charts import metrics_chart

        try:
            metrics_chart(report, png, title=f"citelock metrics{f' — {surface}' if surface else ''}")
        except UsageError as exc:
            fail(str(exc))
    if as_json:
        typer.echo(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
        return
    _print(report, by_week=by_week)
    if png is not None:
        typer.echo(f"chart written to {shown(png)}")


_NARROW = 80
"""Below this many columns the metrics are printed as lines, not as tables (no cell is ever cut)."""


def _print(report: MetricsReport, *, by_week: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = rich_console()
    scopes = [(ALL, ALL)]
    scopes += [(s, ALL) for s in report.surfaces]
    scopes += [(ALL, w) for w in report.weeks]
    if by_week:
        scopes += [(s, w) for s in report.surfaces for w in report.weeks if report.scope(surface=s, week=w)]
    for surface, week in scopes:
        values = report.scope(surface=surface, week=week)
        if not values:
            continue
        title = "all answers" if (surface, week) == (ALL, ALL) else f"surface {surface}, week {week}"
        if console.width < _NARROW:  # no room for three columns: one line per metric, wrapped by the terminal
            typer.echo(f"{title}:")
            for v in values:
                key = f" [{v.key}]" if v.key is not None else ""
                typer.echo(f"  {v.name.replace('_', ' ')}{key}: {v.formatted()} — {v.definition}")
            continue
        table = Table(title=escape(title), show_lines=False)
        table.add_column("metric", min_width=REASON_WIDTH + 2)  # "[REASON_CODE]" keys are never cut
        table.add_column("value")
        table.add_column("definition")
        for v in values:
            name = v.name.replace("_", " ") + (f" [{v.key}]" if v.key is not None else "")
            table.add_row(escape(name), escape(v.formatted()), escape(v.definition))
        console.print(table)
