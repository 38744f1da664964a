"""``citelock calibrate --from-store DB --surface S --fit``: refit a surface's routing from the desk's labels.

Reads the surface's labeled ``AUDIT_SAMPLE`` entries (accept = supported, reject = not) and the strata
populations its stored results recorded, fits the routing by weighted conformal risk control on ~70% of the
labels (:mod:`citelock.evals._desk_fit`), prints before (the routing the surface ran with) and after on the
other ~30%, and writes the routing into a calibration file (other surfaces already there are kept), pinned to
the judge name and version the scores came from.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from citelock.cli._io import fail, read_json, reading, shown
from citelock.cli._queue import resolve_db
from citelock.errors import UsageError
from citelock.evals._desk_fit import DeskFit, refit_from_desk
from citelock.judges._routing import Routing, load_calibration, save_calibration
from citelock.metrics._false_pass import routing_of
from citelock.store import ResultStore, ReviewQueue, make_engine

__all__ = ["calibrate_from_store", "render_desk_fit"]

DEFAULT_FILE = Path("calibration.json")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_desk_fit(fit: DeskFit) -> str:
    """Before/after on the held-out labels, and the thresholds."""
    lines = [
        f"surface {fit.surface}: refit on {fit.train} weighted audit labels, measured on {fit.heldout} held out",
        f"judge {fit.routing.judge} {fit.routing.judge_version}; method {fit.routing.method}; "
        f"targets false pass {fit.routing.target_false_pass}, false fail {fit.routing.target_false_fail}",
        "",
        f"{'routing':<10}{'pass_at':>10}{'fail_below':>12}{'false pass':>12}{'false fail':>12}{'review':>9}",
    ]
    for name, routing, rates in (("before", fit.before, fit.before_rates), ("after", fit.routing, fit.after_rates)):
        if routing is None:
            lines.append(f"{name:<10}{'unknown (the results name no routing)':>40}")
            continue
        r = rates or {}
        lines.append(
            f"{name:<10}{routing.pass_at:>10.3f}{routing.fail_below:>12.3f}{_fmt(r.get('false_pass_rate')):>12}"
            f"{_fmt(r.get('false_fail_rate')):>12}{_fmt(r.get('review_rate')):>9}"
        )
    if not fit.heldout:
        lines.append("no held-out labels: label more audit items to see before/after")
    lines.append("rates: weighted by each label's sampling (see `citelock metrics`); held-out part by entry id hash")
    return "\n".join(lines)


def calibrate_from_store(
    db: str,
    *,
    surface: str,
    fit: bool,
    write: Path | None,
    target_false_pass: float | None,
    target_false_fail: float | None,
    as_json: bool,
) -> None:
    """The ``--from-store`` form of ``citelock calibrate`` (exits 2 on unusable input)."""
    if not fit:
        fail("--from-store refits the routing from the desk's labels: give --fit")
    if surface == "*":
        fail("--from-store needs --surface NAME: the labels and the routing are per surface")
    target = resolve_db(db)
    out = write or DEFAULT_FILE
    if out.is_dir():
        fail(f"--write {shown(out)} is a directory; expected a calibration file path")
    existing: dict[str, Routing] = {}
    if out.exists():
        read_json(out, "calibration")
        with reading(out, "calibration"):
            existing = load_calibration(out)
    try:
        engine = make_engine(target)
        results = ResultStore(engine).latest(surface=surface)
        items = ReviewQueue(engine).items(surface=surface)
        before = next((r for r in map(routing_of, reversed(results)) if r is not None), None)
        desk = refit_from_desk(
            results,
            items,
            surface=surface,
            before=before,
            target_false_pass=target_false_pass,
            target_false_fail=target_false_fail,
        )
    except UsageError as exc:
        fail(f"--from-store {shown(target)}: {exc}")
    existing[surface] = desk.routing
    save_calibration(out, existing)
    if as_json:
        payload = {
            "surface": surface,
            "routing": json.loads(desk.routing.model_dump_json()),
            "before": None if desk.before is None else json.loads(desk.before.model_dump_json()),
            "train": desk.train,
            "heldout": desk.heldout,
            "before_rates": desk.before_rates,
            "after_rates": desk.after_rates,
            "written": str(out),
        }
        typer.echo(json.dumps(payload, indent=2, sort_keys=True))
        return
    typer.echo(render_desk_fit(desk))
    typer.echo(f"wrote the routing for surface {surface!r} to {shown(out)}")
