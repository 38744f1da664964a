"""``citelock calibrate``: measure a support judge against human labels, and hand-label pairs.

Two forms on one command (typer cannot put a positional FILE and sub-commands on the same group):

- ``citelock calibrate --format wice|expertqa|attributionbench|labels FILE [--judge NAME] [--json] ...``
- ``citelock calibrate label PAIRS.jsonl --out LABELS.jsonl`` (interactive; resumable)
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock import judges
from citelock._cli._app import EXIT_OK, app
from citelock._cli._io import fail
from citelock._errors import CitelockError, UsageError
from citelock.evals._calibration import CALIBRATION_DEFINITIONS, CalibrationReport, calibrate
from citelock.evals._datasets import DATASET_FORMATS, read_dataset, read_pairs, wice_split
from citelock.judges._protocol import Judge

__all__ = ["calibrate_command", "make_judge", "render_report"]


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


def _label_pairs(pairs_path: Path, out: Path) -> None:
    try:
        pairs = read_pairs(pairs_path)
    except CitelockError as exc:
        fail(str(exc))
    done: set[str] = set()
    if out.exists():
        for number, line in enumerate(out.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                done.add(str(json.loads(line)["id"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                fail(f"labels file {out} line {number}: expected a JSON object with an 'id'")
    todo = [p for p in pairs if p["id"] not in done]
    typer.echo(f"{len(pairs)} pairs, {len(pairs) - len(todo)} already labeled in {out}, {len(todo)} to go")
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
    typer.echo(f"labeled {labeled} pairs this session; labels in {out}")


@app.command("calibrate")
def calibrate_command(
    args: Annotated[
        list[str] | None,
        typer.Argument(help="FILE to calibrate on, or: label PAIRS.jsonl (with --out) to hand-label pairs"),
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help=f"dataset format: {', '.join(DATASET_FORMATS)}")] = None,
    judge: Annotated[str, typer.Option("--judge", help=f"judge: {', '.join(judges.JUDGE_NAMES)}")] = "offline",
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="judge a seeded random sample of N items")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of the sample and the bootstrap")] = 0,
    split: Annotated[
        str, typer.Option("--split", help="WiCE only: all, train or heldout (the offline judge's split)")
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
) -> None:
    """Calibrate a support judge on human-labeled data, or hand-label pairs (``calibrate label``)."""
    positional = list(args or [])
    if positional and positional[0] == "label":
        if len(positional) != 2 or out is None:
            fail("usage: citelock calibrate label PAIRS.jsonl --out LABELS.jsonl")
        _label_pairs(Path(positional[1]), out)
        raise typer.Exit(EXIT_OK)
    if len(positional) != 1:
        fail(f"expected one dataset FILE, got {len(positional)} arguments")
    if fmt is None:
        fail(f"--format is required: one of {', '.join(DATASET_FORMATS)}")
    if split not in ("all", "train", "heldout"):
        fail(f"--split {split!r}: expected all, train or heldout")
    if split != "all" and fmt != "wice":
        fail(f"--split applies to --format wice only, got --format {fmt}")
    path = Path(positional[0])
    try:
        dataset = read_dataset(fmt, path)
    except CitelockError as exc:
        fail(str(exc))
    items = dataset.items
    if split != "all":
        items = [i for i in items if wice_split(i.id) == split]
    if limit is not None and limit < len(items):
        items = random.Random(seed).sample(items, limit)
    if not items:
        fail(f"{path}: no labeled items to calibrate on (format {fmt}, split {split})")
    try:
        the_judge = make_judge(judge, model, base_url, api_model)
    except CitelockError as exc:
        fail(str(exc))
    bar: Any = None
    try:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc=f"judging ({judge})", unit="item", disable=None, leave=False)
    except ImportError:  # the progress bar is cosmetic; the eval extra brings tqdm
        bar = None
    try:
        report = calibrate(
            items,
            the_judge,
            dataset=f"{fmt}:{path.name}" + (f" split={split}" if split != "all" else ""),
            seed=seed,
            n_bootstrap=bootstrap,
            skipped=dict(dataset.skipped),
            progress=None if bar is None else bar.update,
        )
    finally:
        if bar is not None:
            bar.close()
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        typer.echo(render_report(report))
