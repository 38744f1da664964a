"""``citelock calibrate``: measure a support judge against human labels, and hand-label pairs.

Two forms on one command (typer cannot put a positional FILE and sub-commands on the same group):

- ``citelock calibrate --format wice|expertqa|attributionbench|labels|queue FILE [--judge NAME] [--json] ...``
  By default it measures the judge's *shipped* routing on FILE without refitting: ``false_pass_rate``,
  ``yes_pass_rate``, ``false_fail_rate`` and ``review_rate`` with bootstrap 95% intervals, the two thresholds,
  and the label-level metrics. ``--fit`` refits the routing on FILE (in-sample), or with ``--split`` on FILE's
  train half and measures it on the held-out half; ``--write CAL.json [--surface NAME]`` saves the fitted
  routing in a calibration file (other surfaces already in the file are kept). ``--format queue`` reads a
  review queue database (FILE is its SQLite path or URL): accepted support findings are human-yes labels.
- ``citelock calibrate label PAIRS.jsonl --out LABELS.jsonl`` (interactive; resumable)
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

import citelock.judges as judges
from citelock.cli._app import EXIT_OK, app
from citelock.cli._config import ConfigOption, note_surface
from citelock.cli._io import (
    existing_file,
    fail,
    iter_json_lines,
    loads_checked,
    read_json,
    reading,
    shown,
    text_option,
)
from citelock.errors import UsageError
from citelock.evals._calibration import (
    CALIBRATION_DEFINITIONS,
    ROUTING_DEFINITIONS,
    CalibrationReport,
    JudgedItems,
    RoutingReport,
    evaluate_routing,
    judge_items,
)
from citelock.evals._datasets import DATASET_FORMATS, Dataset, LabeledItem, item_split, read_dataset, read_pairs
from citelock.evals._routing_fit import fit_routing
from citelock.judges._protocol import Judge
from citelock.judges._routing import Routing, load_calibration, load_surface_routing, save_calibration, shipped_routing

__all__ = ["calibrate_command", "make_judge", "render_report", "render_routing_report"]


_KEYS = {"y": "yes", "p": "partial", "n": "no", "s": "skip"}


def make_judge(
    name: str, model: Path | None = None, base_url: str | None = None, api_model: str | None = None
) -> Judge:
    """Build a judge by CLI name (see :func:`citelock.judges.make_judge`); exit 2 on an unknown name."""
    try:
        return judges.make_judge(name, model=model, base_url=base_url, api_model=api_model)
    except UsageError as exc:
        fail(f"--judge: {exc}")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_report(report: CalibrationReport) -> str:
    """A human-readable table: confusion matrix, metrics with 95% CIs and their definitions."""
    lines = [
        f"judge {report.judge} {report.judge_version} on {report.dataset}: n={report.n} "
        f"({report.granularity} labels; bootstrap {report.n_bootstrap}x, seed {report.seed})",
        "",
    ]
    columns = list(next(iter(report.confusion.values())).keys()) if report.confusion else []
    lines.append("gold \\ judge  " + "".join(f"{c:>9}" for c in columns))
    for gold, row in report.confusion.items():
        lines.append(f"{gold:<13}" + "".join(f"{row[c]:>9}" for c in columns))
    lines.append("")
    for name, metric in report.metrics.items():
        lines.append(
            f"{name:<16} {_fmt(metric.value):>6}  [{_fmt(metric.low)}, {_fmt(metric.high)}]  "
            f"{CALIBRATION_DEFINITIONS[name]}"
        )
    if report.skipped:
        lines.append("")
        lines.append("skipped rows: " + ", ".join(f"{k}: {v}" for k, v in sorted(report.skipped.items())))
    if report.errors:
        lines.append(f"judge errors (counted as not passed): {len(report.errors)}; first: {report.errors[0]}")
    return "\n".join(lines)


def render_routing_report(report: RoutingReport) -> str:
    """The routing rates with 95% CIs and the thresholds, then the label-level report."""
    routing = report.routing
    if routing is None:
        head = "routing: none for this judge version; routed by label (yes passes, partial/no fail)"
    else:
        origin = "fitted on this file" if report.fitted else "shipped"
        head = (
            f"routing ({origin}, {routing.method}): pass_at={routing.pass_at:.4f} "
            f"fail_below={routing.fail_below:.4f} (targets: false pass {routing.target_false_pass}, "
            f"false fail {routing.target_false_fail}; fitted on {routing.n_calibration} items)"
        )
    lines = [head, f"score AUC (yes vs not yes): {_fmt(report.auc)}"]
    for name, metric in report.rates.items():
        lines.append(
            f"{name:<16} {_fmt(metric.value):>6}  [{_fmt(metric.low)}, {_fmt(metric.high)}]  "
            f"{ROUTING_DEFINITIONS[name]}"
        )
    lines.append("gold \\ route    " + "".join(f"{r:>9}" for r in ("pass", "review", "fail")))
    for gold, row in report.routes.items():
        lines.append(f"{gold:<16}" + "".join(f"{row[r]:>9}" for r in ("pass", "review", "fail")))
    lines.append("")
    lines.append("label-level (the judge's own yes/partial/no, no routing):")
    return "\n".join(lines) + "\n" + render_report(report.labels)


def _label_pairs(pairs_path: Path, out: Path) -> None:
    if out.is_dir():
        fail(f"--out {shown(out)} is a directory; expected the labels file to append to")
    with reading(existing_file(pairs_path, "pairs"), "pairs"):
        pairs = read_pairs(pairs_path)
    done: set[str] = set()
    if out.exists():
        for number, line in iter_json_lines(out, "labels"):
            row = loads_checked(line, f"labels file {shown(out)} line {number}")
            if not isinstance(row, dict) or "id" not in row:
                fail(f"labels file {shown(out)} line {number}: expected a JSON object with an 'id'")
            done.add(str(row["id"]))
    todo = [p for p in pairs if p["id"] not in done]
    typer.echo(f"{len(pairs)} pairs, {len(pairs) - len(todo)} already labeled in {shown(out)}, {len(todo)} to go")
    labeled = 0
    with out.open("a", encoding="utf-8") as handle:
        for index, pair in enumerate(todo, start=1):
            typer.echo(
                f"\n[{index}/{len(todo)}] id={pair['id']}\nPASSAGE:\n{pair['passage']}\n\nCLAIM:\n{pair['claim']}"
            )
            while True:
                answer = typer.prompt("Does the passage alone support the claim? y/p/n, s(kip), q(uit)").strip().lower()
                if answer in _KEYS or answer == "q":
                    break
                typer.echo("answer y (yes), p (partial), n (no), s (skip) or q (quit)")
            if answer == "q":
                break
            row = {"id": pair["id"], "claim": pair["claim"], "passage": pair["passage"], "label": _KEYS[answer]}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()
            labeled += 1
    typer.echo(f"labeled {labeled} pairs this session; labels in {shown(out)}")


@app.command("calibrate")
def calibrate_command(
    args: Annotated[
        list[str] | None,
        typer.Argument(help="FILE to calibrate on, or: label PAIRS.jsonl (with --out) to hand-label pairs"),
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help=f"dataset format: {', '.join(DATASET_FORMATS)}")] = None,
    judge: Annotated[
        str, typer.Option("--judge", help=f"judge: {', '.join(judges.JUDGE_NAMES)} (default {judges.DEFAULT_JUDGE})")
    ] = judges.DEFAULT_JUDGE,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="judge a seeded random sample of N items")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of the sample and the bootstrap")] = 0,
    split: Annotated[
        str,
        typer.Option(
            "--split",
            help="all, train or heldout: the fixed split by claim id / question (the shipped judge's); "
            "with --fit: fit on train, measure on heldout",
        ),
    ] = "all",
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=1, help="bootstrap resamples")] = 1000,
    model: Annotated[
        Path | None, typer.Option("--model", help="GGUF file for --judge llm (default: bundled SmolLM2-135M)")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="--judge llm on an OpenAI-compatible server at this /v1 URL (not in-process)"),
    ] = None,
    api_model: Annotated[
        str | None, typer.Option("--api-model", help="with --base-url: the server's model (default: first listed)")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="label mode: where labels are appended")] = None,
    fit: Annotated[bool, typer.Option("--fit", help="refit the routing on FILE instead of the shipped one")] = False,
    target_false_pass: Annotated[
        float, typer.Option("--target-false-pass", help="with --fit: false pass rate bound (alpha)")
    ] = 0.05,
    target_false_fail: Annotated[
        float, typer.Option("--target-false-fail", help="with --fit: false fail rate bound (beta)")
    ] = 0.2,
    delta: Annotated[
        float | None,
        typer.Option(
            "--delta", help="with --fit: Learn-then-Test, bounds hold with probability 1-delta (default: CRC)"
        ),
    ] = None,
    routing_file: Annotated[
        Path | None, typer.Option("--routing", help="measure the routing of --surface in this calibration file")
    ] = None,
    write: Annotated[
        Path | None, typer.Option("--write", help="with --fit: write the routing to this calibration file")
    ] = None,
    surface: Annotated[str, typer.Option("--surface", help="surface name for --write / --routing")] = "*",
    from_store: Annotated[
        str | None,
        typer.Option("--from-store", help="with --fit --surface: refit from the review desk's audit labels in DB"),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Calibrate a support judge on human-labeled data, or hand-label pairs (``calibrate label``)."""
    positional = list(args or [])
    note_surface(config, surface if surface != "*" else None)
    if from_store is not None:
        _calibrate_store_form(
            positional,
            from_store,
            surface=surface,
            fit=fit,
            write=write,
            target_false_pass=target_false_pass,
            target_false_fail=target_false_fail,
            as_json=as_json,
        )
    if positional and positional[0] == "label":
        if len(positional) != 2 or out is None:
            fail("usage: citelock calibrate label PAIRS.jsonl --out LABELS.jsonl")
        _label_pairs(Path(positional[1]), out)
        raise typer.Exit(EXIT_OK)
    if len(positional) != 1:
        fail(f"expected one dataset FILE, got {len(positional)} arguments")
    fmt = _check_options(
        fmt,
        split=split,
        fit=fit,
        write=write,
        routing_file=routing_file,
        target_false_pass=target_false_pass,
        target_false_fail=target_false_fail,
        delta=delta,
        surface=surface,
        base_url=base_url,
        model=model,
    )
    # Files named by options are checked before the (possibly long) judging run, not after it.
    existing = _existing_calibration(write)
    measured = _measured_routing(routing_file, surface)
    path = Path(positional[0])
    dataset, items, fit_items = _load_items(fmt, path, fit=fit, split=split, limit=limit, seed=seed)
    the_judge = make_judge(judge, model, base_url, api_model)
    if measured is not None and not measured.applies_to(the_judge.name, the_judge.version):
        fail(
            f"calibration file {shown(routing_file or '')}: the routing is for {measured.judge} "
            f"{measured.judge_version}, not {the_judge.name} {the_judge.version}"
        )
    judged, fitted_on = _judge_with_progress(items, fit_items, the_judge, judge)
    routing: Routing | None
    if fit:
        routing = _fit(
            fitted_on,
            the_judge,
            target_false_pass=target_false_pass,
            target_false_fail=target_false_fail,
            delta=delta,
            source=f"citelock calibrate --fit: {fmt}:{shown(path.name)}" + (" split=train" if fit_items else ""),
        )
    else:
        routing = measured if measured is not None else shipped_routing(the_judge.name, the_judge.version)
    where = f"{fmt}:{shown(path.name)}" + (f" split={'heldout' if fit_items else split}" if split != "all" else "")
    report = evaluate_routing(
        judged,
        routing,
        judge=the_judge,
        dataset=where,
        seed=seed,
        n_bootstrap=bootstrap,
        skipped=dict(dataset.skipped),
        fitted=fit,
        fit_on=len(fit_items),
    )
    if write is not None and routing is not None:
        existing[surface] = routing
        save_calibration(write, existing)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        typer.echo(render_routing_report(report))
        if write is not None:
            typer.echo(f"wrote the routing for surface {surface!r} to {shown(write)}")


def _calibrate_store_form(
    positional: list[str],
    from_store: str,
    *,
    surface: str,
    fit: bool,
    write: Path | None,
    target_false_pass: float,
    target_false_fail: float,
    as_json: bool,
) -> NoReturn:
    """``--from-store DB``: refit from the review desk's audit labels, then exit 0."""
    if positional:
        fail("--from-store reads the labels from the database: give no FILE")
    from citelock.cli._calibrate_store import calibrate_from_store

    calibrate_from_store(
        from_store,
        surface=text_option("--surface", surface),
        fit=fit,
        write=write,
        target_false_pass=target_false_pass if target_false_pass != 0.05 else None,
        target_false_fail=target_false_fail if target_false_fail != 0.2 else None,
        as_json=as_json,
    )
    raise typer.Exit(EXIT_OK)


def _check_options(
    fmt: str | None,
    *,
    split: str,
    fit: bool,
    write: Path | None,
    routing_file: Path | None,
    target_false_pass: float,
    target_false_fail: float,
    delta: float | None,
    surface: str,
    base_url: str | None,
    model: Path | None,
) -> str:
    """Exit 2 on the first option that is missing, malformed or contradicts another; return the format."""
    if fmt is None:
        fail(f"--format is required: one of {', '.join(DATASET_FORMATS)}")
    if fmt not in DATASET_FORMATS:
        fail(f"--format {fmt!r}: expected one of {', '.join(DATASET_FORMATS)}")
    if split not in ("all", "train", "heldout"):
        fail(f"--split {split!r}: expected all, train or heldout")
    if write is not None and not fit:
        fail("--write saves a fitted routing: give --fit too")
    if fit and routing_file is not None:
        fail("give either --fit (refit on FILE) or --routing (measure a calibration file), not both")
    for option, value in (("--target-false-pass", target_false_pass), ("--target-false-fail", target_false_fail)):
        if not 0.0 < value < 1.0:
            fail(f"{option} must be between 0 and 1 (exclusive), got {value}")
    if delta is not None and not 0.0 < delta < 1.0:
        fail(f"--delta must be between 0 and 1 (exclusive), got {delta}")
    if not text_option("--surface", surface).strip():
        fail("--surface is empty; expected a surface name or '*'")
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        fail(f"--base-url {base_url!r}: expected an http(s) URL, e.g. http://127.0.0.1:8080/v1")
    if model is not None:
        existing_file(model, "--model GGUF")
    return fmt


def _existing_calibration(write: Path | None) -> dict[str, Routing]:
    """The surfaces already in the ``--write`` file (kept when it is rewritten); exit 2 if it is unusable."""
    existing: dict[str, Routing] = {}
    if write is not None:
        if write.is_dir():
            fail(f"--write {shown(write)} is a directory; expected a calibration file path")
        if write.exists():
            read_json(write, "calibration")
            with reading(write, "calibration"):
                existing = load_calibration(write)
    return existing


def _measured_routing(routing_file: Path | None, surface: str) -> Routing | None:
    """The routing of ``surface`` in the ``--routing`` calibration file (None without one); exit 2 if unusable."""
    if routing_file is None:
        return None
    read_json(routing_file, "calibration")
    with reading(routing_file, "calibration"):
        return load_surface_routing(routing_file, surface)


def _load_items(
    fmt: str, path: Path, *, fit: bool, split: str, limit: int | None, seed: int
) -> tuple[Dataset, list[LabeledItem], list[LabeledItem]]:
    """Read the dataset and pick the items to measure on and, with ``--fit --split``, the ones to fit on."""
    if fmt != "queue":  # a queue is a database path or URL, opened by the reader
        existing_file(path, f"{fmt} dataset")
    with reading(path, f"{fmt} dataset"):
        dataset = read_dataset(fmt, path)
    items = dataset.items
    fit_items: list[LabeledItem] = []
    if fit and split != "all":
        fit_items = [i for i in items if item_split(i) == "train"]
        items = [i for i in items if item_split(i) == "heldout"]
    elif split != "all":
        items = [i for i in items if item_split(i) == split]
    if limit is not None and limit < len(items):
        items = random.Random(seed).sample(items, limit)
    if not items:
        fail(f"{shown(path)}: no labeled items to calibrate on (format {fmt}, split {split})")
    return dataset, items, fit_items


def _judge_with_progress(
    items: list[LabeledItem], fit_items: list[LabeledItem], the_judge: Judge, judge: str
) -> tuple[JudgedItems, JudgedItems]:
    """Judge the measured items and the fit items (the measured ones when there are none) under a progress bar."""
    bar: Any = None
    try:
        from tqdm import tqdm

        bar = tqdm(total=len(items) + len(fit_items), desc=f"judging ({judge})", unit="item", disable=None, leave=False)
    except ImportError:  # the progress bar is cosmetic; the eval extra brings tqdm
        bar = None
    try:
        progress = None if bar is None else bar.update
        judged = judge_items(items, the_judge, progress=progress)
        fitted_on = judge_items(fit_items, the_judge, progress=progress) if fit_items else judged
    finally:
        if bar is not None:
            bar.close()
    return judged, fitted_on


def _fit(
    fitted_on: JudgedItems,
    the_judge: Judge,
    *,
    target_false_pass: float,
    target_false_fail: float,
    delta: float | None,
    source: str,
) -> Routing:
    """Fit the routing on the judged fit items (unscored ones left out); exit 2 if it cannot be fitted."""
    usable = [(s, g) for s, g in zip(fitted_on.scores, fitted_on.gold, strict=True) if s != float("-inf")]
    try:
        return fit_routing(
            [s for s, _ in usable],
            [g for _, g in usable],
            judge=the_judge.name,
            judge_version=the_judge.version,
            target_false_pass=target_false_pass,
            target_false_fail=target_false_fail,
            delta=delta,
            source=source,
        )
    except UsageError as exc:
        fail(str(exc))
