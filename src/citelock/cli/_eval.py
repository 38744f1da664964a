"""``citelock eval``: the seeded defect benchmark (``defects``) and naive vs constrained (``compare``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from citelock.cli._app import EXIT_FINDINGS, EXIT_OK, app
from citelock.cli._io import existing_file, fail, reading, shown, text_option
from citelock.errors import UsageError

__all__ = ["eval_app", "make_judge", "output_folder"]

eval_app = typer.Typer(
    name="eval",
    help="Measure citelock: the seeded defect benchmark and naive vs constrained answers on real passages.",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")

JUDGES = ("offline", "lexical", "llm", "seeded-entailment")

JudgeBaseUrl = Annotated[
    str | None,
    typer.Option("--judge-base-url", help="--judge llm: an OpenAI-compatible server's /v1 URL (default: in-process)"),
]


def make_judge(name: str, base_url: str | None = None) -> Any:
    """Instantiate a judge by CLI name.

    ``offline``, ``lexical`` and ``llm`` are the package's real judges (``llm`` in-process on the bundled model,
    or on a server with ``base_url``); ``seeded-entailment`` is the seeded corpus's own rule, a stand-in that
    reports label as such.
    """
    if base_url is not None and name != "llm":
        fail(f"--judge-base-url needs --judge llm, got --judge {name}")
    if name == "seeded-entailment":
        from citelock.evals._oracle import SeededEntailmentJudge

        return SeededEntailmentJudge()
    import citelock.judges as judges

    if base_url is not None and not base_url.startswith(("http://", "https://")):
        fail(f"--judge-base-url {base_url!r}: expected an http(s) URL, e.g. http://127.0.0.1:8080/v1")
    try:
        return judges.make_judge(name, base_url=base_url)
    except UsageError as exc:
        fail(f"--judge: {exc}; or seeded-entailment (a labeled stand-in)")


def output_folder(out: Path) -> Path:
    """Exit 2 unless ``--out`` can be a folder: absent (it is created) or an existing directory."""
    text_option("--out", str(out))  # its name goes into the report's text
    if out.exists() and not out.is_dir():
        fail(f"--out {shown(out)} is a file; expected a folder for the report (it is created if missing)")
    return out


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
    judge_base_url: JudgeBaseUrl = None,
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
    output_folder(out)
    chosen = make_judge(judge, judge_base_url)
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
                *(["--judge-base-url", judge_base_url] if judge_base_url else []),
                "--faithfulness",
                faithfulness,
            ),
        )
    except UsageError as exc:
        fail(str(exc))
    summary = summarize_defects(run.rows)
    path, text = write_defects_report(run, summary, out)
    typer.echo(text)
    typer.echo(f"report written to {shown(path)}", err=True)
    missed = summary.missed.get("union_judge", [])
    clean_alarms = summary.union_judge.get("clean", 0)
    raise typer.Exit(EXIT_FINDINGS if missed or clean_alarms else EXIT_OK)


def _shared_data() -> Path:
    import os

    env = os.environ.get("CITELOCK_SHARED_DATA")
    return Path(env) if env else Path.cwd().parent / "shared" / "data"


MODES = ("naive", "quote", "quote_sentence", "substring", "sentence", "id")


def local_modes(names: list[str], *, model: str, max_chars: int, max_tokens: int) -> dict[str, Any]:
    """Mode callables on the bundled local model: ``naive`` (free text) and the constrained span policies."""
    from citelock.backends._local import LocalBackend, NaiveBackend
    from citelock.constraint._schema import SchemaOptions
    from citelock.pipeline import answer

    options = SchemaOptions(max_claims=2, max_citations=1, max_text_chars=100, max_span_chars=60)
    constrained = LocalBackend(model)
    naive = NaiveBackend(model)

    def make(name: str) -> Any:
        backend = naive if name == "naive" else constrained
        policy = "id" if name == "naive" else name

        def run(question: str, chunks: Any) -> Any:
            return answer(
                question,
                chunks,
                backend=backend,
                policy=policy,  # type: ignore[arg-type]
                max_chars=max_chars,
                on_overflow="drop",
                max_tokens=max_tokens,
                options=options,
                store=[c.id for c in chunks],
                render="none",
            )

        return run

    return {name: make(name) for name in names}


@eval_app.command("compare")
def compare(
    out: Annotated[Path, typer.Option("--out", help="folder for report.md, chart and the run journal")] = Path(
        "docs/eval/compare"
    ),
    data: Annotated[Path | None, typer.Option("--data", help="ExpertQA val.jsonl (default: shared data)")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="first N questions (CI subset)")] = None,
    kinds: Annotated[str, typer.Option("--kinds", help="system kinds, in order: rr,post_hoc")] = "rr,post_hoc",
    modes: Annotated[str, typer.Option("--modes", help=f"comma list of {', '.join(MODES)}")] = ",".join(MODES),
    model: Annotated[str, typer.Option("--model", help="local model: smollm2 or gemma3")] = "smollm2",
    max_chars: Annotated[int, typer.Option("--max-chars", min=1, help="prompt character budget")] = 3000,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="generation cap per answer")] = 120,
    judge: Annotated[str, typer.Option("--judge", help="offline, lexical, llm or none")] = "offline",
    judge_base_url: JudgeBaseUrl = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="discard the journal instead of resuming")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="show a progress bar")] = True,
) -> None:
    """Answer ExpertQA questions naively and under each span policy on the same model; write a report."""
    import time

    from citelock._version import __version__
    from citelock.evals._compare import human_support, load_expertqa, run_compare, summarize_compare
    from citelock.evals._harness import judge_label
    from citelock.evals._report import write_compare_report

    output_folder(out)
    names = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [m for m in names if m not in MODES]
    if bad or not names:
        fail(f"--modes must name some of {', '.join(MODES)}, got {modes!r}")
    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    if any(k not in ("rr", "post_hoc") for k in kind_list) or not kind_list:
        fail(f"--kinds must be a comma list of rr, post_hoc; got {kinds!r}")
    path = data or _shared_data() / "expertqa" / "val.jsonl"
    if judge == "none" and judge_base_url is not None:
        fail("--judge-base-url needs --judge llm, got --judge none")
    if model not in ("smollm2", "gemma3"):
        fail(f"--model must be smollm2 or gemma3, got {model!r}")
    chosen = None if judge == "none" else make_judge(judge, judge_base_url)
    with reading(existing_file(path, "ExpertQA"), "ExpertQA"):
        items = load_expertqa(path, kinds=kind_list, limit=limit)
    config: dict[str, Any] = {
        "benchmark": "compare",
        "questions": len(items),
        "kinds": ",".join(kind_list),
        "modes": ",".join(names),
        "model": model,
        "max_chars": max_chars,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "judge": judge_label(chosen) if chosen is not None else "none (support not estimated)",
        "citelock": __version__,
    }
    command = _command(
        "compare", "--out", out, *(["--limit", limit] if limit else []), "--kinds", kinds, "--modes", modes,
        "--model", model, "--max-chars", max_chars, "--max-tokens", max_tokens, "--judge", judge,
        *(["--judge-base-url", judge_base_url] if judge_base_url else []),
    )  # fmt: skip
    started = time.perf_counter()
    try:
        fns = local_modes(names, model=model, max_chars=max_chars, max_tokens=max_tokens)
        rows, resumed = run_compare(
            items, fns, chosen, journal_path=out / "answers.jsonl", header=config, fresh=fresh, progress=progress
        )
    except UsageError as exc:
        fail(str(exc))
    summary = summarize_compare(rows, names)
    systems = sorted({i.system for i in items})
    report_path, text = write_compare_report(
        out,
        {**config, "command": command},
        summary,
        human_support(path, systems),
        seconds=time.perf_counter() - started,
        resumed=resumed,
    )
    typer.echo(text)
    typer.echo(f"report written to {shown(report_path)}", err=True)
    raise typer.Exit(EXIT_OK)
