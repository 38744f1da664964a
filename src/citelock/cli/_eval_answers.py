"""``citelock eval answers``: the guard on real answers against human labels (ExpertQA), per system and overall."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock.cli._app import EXIT_OK
from citelock.cli._eval import JUDGES, eval_app, make_judge
from citelock.cli._io import existing_file, fail, reading
from citelock.errors import UsageError
from citelock.judges import DEFAULT_JUDGE

__all__ = ["answers"]

ON_FAIL = ("block", "drop_claim", "mark")
SPLITS = ("all", "tune", "heldout")
_RATES = (
    "complete_pass_rate",
    "unsupported_block_rate",
    "review_rate",
    "uncited_precision",
    "uncited_recall",
    "number_false_alarm_rate",
    "complete_served_rate",
    "unsupported_served_rate",
)
_COUNTS = (
    "answers",
    "claims",
    "cited_with_text",
    "claims_skipped_no_text",
    "evidence_skipped_no_text",
    "answers_not_guarded",
    "answers_blocked",
    "answers_kept",
    "answers_repaired",
)


def _human(summary: dict[str, Any], header: str) -> str:
    from citelock.evals._answers import METRIC_DEFINITIONS

    lines = [header, ""]
    for key in (*_COUNTS, *_RATES):
        value = summary[key]
        shown = "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))
        lines.append(f"  {key:<26} {shown:>8}  {METRIC_DEFINITIONS[key]}")
    lines += ["", "  per system:  answers  blocked  complete_pass  unsupported_block  uncited_P  uncited_R  num_FA"]

    def fmt(v: float | None) -> str:
        return "  n/a" if v is None else f"{v:.3f}"

    for system, s in summary["per_system"].items():
        lines.append(
            f"  {system:<24} {s['answers']:>4} {s['answers_blocked']:>8}  {fmt(s['complete_pass_rate']):>13}"
            f"  {fmt(s['unsupported_block_rate']):>17}  {fmt(s['uncited_precision']):>9}"
            f"  {fmt(s['uncited_recall']):>9}  {fmt(s['number_false_alarm_rate']):>6}"
        )
    return "\n".join(lines)


@eval_app.command("answers")
def answers(
    file: Annotated[Path, typer.Argument(help="the labeled answers (ExpertQA val.jsonl)")],
    fmt: Annotated[str, typer.Option("--format", help="the file's format: expertqa")] = "expertqa",
    judge: Annotated[str, typer.Option("--judge", help=f"one of {', '.join(JUDGES)}")] = DEFAULT_JUDGE,
    stakes: Annotated[str, typer.Option("--stakes", help="low or high (high judges every citation)")] = "high",
    on_fail: Annotated[
        str, typer.Option("--on-fail", help="block, drop_claim or mark: what the surface does with a failing claim")
    ] = "block",
    split: Annotated[
        str, typer.Option("--split", help="all, or the tune / heldout half of the questions (stable hash)")
    ] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="print the figures as JSON")] = False,
) -> None:
    """Guard every real answer in FILE and set the findings against the human labels, per system and overall."""
    from citelock.evals._answers import evaluate_answers, read_expertqa_answers, summarize_answers
    from citelock.guard import SurfacePolicy

    if fmt != "expertqa":
        fail(f"--format must be expertqa, got {fmt!r}")
    if stakes not in ("low", "high"):
        fail(f"--stakes must be low or high, got {stakes!r}")
    if on_fail not in ON_FAIL:
        fail(f"--on-fail must be one of {', '.join(ON_FAIL)}, got {on_fail!r}")
    if split not in SPLITS:
        fail(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    policy = SurfacePolicy.model_validate({"name": "eval-answers", "stakes": stakes, "on_fail": on_fail})
    chosen = make_judge(judge)
    with reading(existing_file(file, "ExpertQA"), "ExpertQA"):
        cases = read_expertqa_answers(file, split=split)  # type: ignore[arg-type]
    try:
        outcomes = evaluate_answers(cases, policy=policy, judge=chosen)
    except UsageError as exc:
        fail(str(exc))
    summary = summarize_answers(outcomes)
    config = {"format": fmt, "judge": judge, "stakes": stakes, "on_fail": on_fail, "split": split}
    if as_json:
        typer.echo(json.dumps({"config": config, **summary}, indent=2))
    else:
        header = f"citelock eval answers: {file} ({', '.join(f'{k}={v}' for k, v in config.items())})"
        typer.echo(_human(summary, header))
    raise typer.Exit(EXIT_OK)
