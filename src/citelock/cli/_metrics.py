"""``citelock metrics``: citation metrics from the stored guard results and the review queue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from citelock.cli._app import EXIT_FINDINGS, app, using_database
from citelock.cli._config import ConfigOption, load_config, note_surface
from citelock.cli._io import fail, shown, text_option
from citelock.cli._queue import DbOption, resolve_db
from citelock.cli._report import REASON_WIDTH
from citelock.cli._report import console as rich_console
from citelock.errors import UsageError
from citelock.metrics._compute import ALL, MetricsReport, metrics_from_store
from citelock.metrics._false_pass import SurfaceStatus, live_rates_from_store, statuses_json

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
    check: Annotated[
        bool,
        typer.Option("--check", help="exit 1 when a surface raises an alarm (false pass, drift, pass up/repair down)"),
    ] = False,
    window: Annotated[
        int | None,
        typer.Option(
            "--window", min=1, help="weeks pooled for the judge's alarms (default: the surface's alarms.window, else 4)"
        ),
    ] = None,
    min_labels: Annotated[
        int | None,
        typer.Option(
            "--min-labels",
            min=1,
            help="fewest labels of a class behind a rate that clears or alarms (default: the surface's "
            "alarms.min_labels, else 30)",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Citation metrics overall, per surface and per ISO week, each printed beside its definition.

    Precision, recall, faithfulness, pass rate, queue volume and repair rate, support by rank and strategy.
    """
    if surface is not None:
        text_option("--surface", surface)
    if png is not None and (png.is_dir() or not png.parent.is_dir()):
        fail(f"--png {shown(png)}: expected a file path in an existing folder")
    window, min_labels = _alarm_settings(config, surface, window, min_labels)
    target = resolve_db(db, config)
    try:
        with using_database(target):
            report = metrics_from_store(target, surface=surface)
            statuses = live_rates_from_store(target, surface=surface, window=window, min_labels=min_labels)
    except UsageError as exc:
        fail(f"cannot read metrics from {shown(target)}: {exc}")
    if png is not None:
        from citelock.metrics._charts import metrics_chart

        try:
            metrics_chart(report, png, title=f"citelock metrics{f' — {surface}' if surface else ''}")
        except UsageError as exc:
            fail(str(exc))
    if as_json:
        typer.echo(json.dumps({**report.to_json(), "judge": statuses_json(statuses)}, ensure_ascii=False, indent=2))
    else:
        _print(report, by_week=by_week)
        _print_judge(statuses, by_week=by_week)
        if png is not None:
            typer.echo(f"chart written to {shown(png)}")
    if check and any(s.alarms for s in statuses):
        raise typer.Exit(EXIT_FINDINGS)


def _alarm_settings(
    config: Path | None, surface: str | None, window: int | None, labels: int | None
) -> tuple[int, int]:
    """``--window`` and ``--min-labels``, else the surface's ``alarms`` in the config file, else 4 and 30."""
    loaded = load_config(config, warn=False)
    if surface is not None and loaded.has_surface(surface):
        try:
            alarms = loaded.surface_settings(surface, routing=False).alarms
        except UsageError as exc:
            fail(str(exc))
        return (window or alarms.window, labels or alarms.min_labels)
    note_surface(config, surface)
    return (window or 4, labels or 30)


def _print_judge(statuses: list[SurfaceStatus], *, by_week: bool) -> None:
    """The judge's live false-pass and false-fail rates per surface (and week), then the alarms."""
    if not statuses:
        return
    typer.echo("")
    typer.echo(
        "judge audit (live rates from labeled AUDIT_SAMPLE entries, inverse-probability weighted; "
        "95% Wilson interval on Kish's effective n):"
    )
    for status in statuses:
        flag = " [shipped default routing on a high-stakes surface]" if status.shipped_default else ""
        typer.echo(f"  surface {status.surface}{flag}")
        rows = [*status.window, *(status.weekly if by_week else ())]
        for rate in rows:
            typer.echo(f"    {rate.name.replace('_', ' ')} ({rate.week}): {rate.formatted()}")
        if status.psi is not None:
            typer.echo(f"    score drift vs calibration set: PSI {status.psi:.3f} (alarm above 0.25)")
        for alarm in status.alarms:
            typer.echo(f"    ALARM {alarm.kind}: {alarm.message}")


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
