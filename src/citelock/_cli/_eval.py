"""``citelock eval``: the seeded defect benchmark (``defects``) and naive vs constrained (``compare``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock._cli._app import EXIT_FINDINGS, EXIT_OK, app
from citelock._cli._io import fail
from citelock._errors import CitelockError

__all__ = ["eval_app", "make_judge"]

eval_app = typer.Typer(
    name="eval",
    help="Measure citelock: the seeded defect benchmark and naive vs constrained answers on real passages.",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")

JUDGES = ("offline", "lexical", "seeded-entailment")


def make_judge(name: str) -> Any:
    """Instantiate a judge by CLI name.

    ``offline`` and ``lexical`` are the package's real judges (``citelock.judges.OfflineJudge`` /
    ``LexicalJudge``); ``seeded-entailment`` is the seeded corpus's own rule, a stand-in that reports label
    as such.
    """
    if name == "seeded-entailment":
        from citelock.evals._oracle import SeededEntailmentJudge

        return SeededEntailmentJudge()
    import citelock.judges as judges

    cls_name = {"offline": "OfflineJudge", "lexical": "LexicalJudge"}.get(name)
    if cls_name is None:
        fail(f"--judge must be one of {', '.join(JUDGES)}, got {name!r}")
    cls = getattr(judges, cls_name, None)
    if cls is None:
        fail(f"--judge {name}: citelock.judges.{cls_name} is not available in this installation")
    return cls()


def _command(*words: object) -> str:
    """The command line that reproduces a run, rebuilt from the options actually used."""
    return " ".join(shlex.quote(str(w)) for w in ("citelock", "eval", *words))


@eval_app.command("defects")
def defects(
    out: Annotated[Path, typer.Option("--out", help="folder for report.md, charts and the run journal")] = Path(
        "docs/eval/defects"
    ),
    seed: Annotated[int, typer.Option("--seed", help="corpus seed")] = 0,
    per_class: Annotated[int, typer.Option("--per-class", min=1, help="answers per defect class")] = 60,
    judge: Annotated[str, typer.Option("--judge", help=f"one of {', '.join(JUDGES)}")] = "offline",
    faithfulness: Annotated[
        str, typer.Option("--faithfulness", help="grader mode: joined (one call per claim) or per_chunk")
    ] = "joined",
    fresh: Annotated[bool, typer.Option("--fresh", help="discard the journal instead of resuming")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="show a progress bar")] = True,
) -> None:
    """Run the seeded defect benchmark and write a markdown report with charts (exit 1 if a defect is missed)."""
    from citelock.evals._harness import run_defects, summarize_defects
    from citelock.evals._report import write_defects_report

    if faithfulness not in ("joined", "per_chunk"):
        fail(f"--faithfulness must be joined or per_chunk, got {faithfulness!r}")
    chosen = make_judge(judge)
    try:
        run = run_defects(
            chosen,
            seed=seed,
            per_class=per_class,
            mode=faithfulness,  # type: ignore[arg-type]
            journal_path=out / "items.jsonl",
            fresh=fresh,
            progress=progress,
            command=_command(
                "defects",
                "--out",
                out,
                "--seed",
                seed,
                "--per-class",
                per_class,
                "--judge",
                judge,
                "--faithfulness",
                faithfulness,
            ),
        )
    except CitelockError as exc:
        fail(str(exc))
    summary = summarize_defects(run.rows)
    path, text = write_defects_report(run, summary, out)
    typer.echo(text)
    typer.echo(f"report written to {path}", err=True)
    missed = summary.missed.get("union_judge", [])
    clean_alarms = summary.union_judge.get("clean", 0)
    raise typer.Exit(EXIT_FINDINGS if missed or clean_alarms else EXIT_OK)
