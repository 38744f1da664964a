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
COMPARE_BACKENDS = ("local", "outlines", "openai", "instructor")
_COMPARE_OPTIONS = {"max_claims": 2, "max_citations": 1, "max_text_chars": 100, "max_span_chars": 60}


def _mode_fns(
    names: list[str],
    naive: Any,
    constrained: Any,
    *,
    max_chars: int,
    max_tokens: int,
    naive_template: str | None,
) -> dict[str, Any]:
    """One callable per mode: ``naive`` on the free-text backend, every span policy on the constrained one."""
    from citelock.constraint import SchemaOptions
    from citelock.pipeline import answer
    from citelock.prompt import load_template

    options = SchemaOptions(**_COMPARE_OPTIONS)
    template = None
    if naive_template is not None:
        name, _, version = naive_template.partition(".v")
        template = load_template(name, version or None)

    def make(name: str) -> Any:
        backend = naive if name == "naive" else constrained
        policy = "id" if name == "naive" else name

        def run(question: str, chunks: Any) -> Any:
            return answer(
                question,
                chunks,
                backend=backend,
                policy=policy,  # type: ignore[arg-type]
                template=template if name == "naive" else None,
                max_chars=max_chars,
                on_overflow="drop",
                max_tokens=max_tokens,
                options=options,
                known_ids=[c.id for c in chunks],
                render="none",
            )

        return run

    return {name: make(name) for name in names}


def local_modes(
    names: list[str], *, model: str, max_chars: int, max_tokens: int, naive_template: str | None = None
) -> dict[str, Any]:
    """Mode callables on the bundled local model: ``naive`` (free text) and the constrained span policies."""
    from citelock.backends._local import LocalBackend, NaiveBackend

    return _mode_fns(
        names,
        NaiveBackend(model),
        LocalBackend(model),
        max_chars=max_chars,
        max_tokens=max_tokens,
        naive_template=naive_template,
    )


def outlines_modes(
    names: list[str], *, model: str, max_chars: int, max_tokens: int, naive_template: str | None = None
) -> dict[str, Any]:
    """Mode callables on outlines' llama.cpp model over ``model`` (a bundled name or a GGUF path), loaded once.

    ``naive`` is the same outlines model writing free text (no output type); the span policies go through
    :class:`~citelock.backends.OutlinesBackend`.
    """
    from citelock.backends._outlines import OutlinesBackend

    constrained = OutlinesBackend(model)
    naive = OutlinesBackend(constrained.model, constrain=False)
    return _mode_fns(
        names, naive, constrained, max_chars=max_chars, max_tokens=max_tokens, naive_template=naive_template
    )


def server_modes(
    names: list[str],
    *,
    backend: str,
    base_url: str | None,
    model: str | None,
    server: str | None,
    delivery: str | None,
    max_chars: int,
    max_tokens: int,
    naive_template: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Mode callables on an OpenAI-compatible server, and what the report says about it.

    ``naive`` is the server's model writing free text (no constraint sent); the span policies go through
    ``openai`` (the strongest delivery the server takes, or ``delivery``) or ``instructor``.
    """
    from citelock.backends._instructor import InstructorBackend
    from citelock.backends._openai import OpenAIBackend

    naive = OpenAIBackend(base_url=base_url, model=model, server=server, constrain=False)
    constrained: Any
    if backend == "instructor":
        if delivery is not None:
            fail("--delivery is for --backend openai (instructor sends forced tool calls)")
        constrained = InstructorBackend(base_url=base_url, model=model, server=server)
        how = f"instructor ({constrained.mode})"
    else:
        constrained = OpenAIBackend(base_url=base_url, model=model, server=server, delivery=delivery)
        how = f"openai, delivery {constrained.delivery.name}"
    served = naive.model  # asks the server once (a typed error when it is not there)
    info = {
        "backend": how,
        "server": f"{naive.provider} at {base_url or 'https://api.openai.com/v1'}",
        "model": served,
    }
    fns = _mode_fns(
        names, naive, constrained, max_chars=max_chars, max_tokens=max_tokens, naive_template=naive_template
    )
    return fns, info


def _check_compare_options(
    modes: str,
    kinds: str,
    *,
    backend: str,
    base_url: str | None,
    server: str | None,
    delivery: str | None,
    questions: Path | None,
    chunks: Path | None,
    data: Path | None,
    naive_template: str | None,
    judge: str,
    judge_base_url: str | None,
    model: str | None,
) -> tuple[list[str], list[str]]:
    """Exit 2 on the first ``compare`` option that is malformed or contradicts another; the modes and kinds."""
    names = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [m for m in names if m not in MODES]
    if bad or not names:
        fail(f"--modes must name some of {', '.join(MODES)}, got {modes!r}")
    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    if any(k not in ("rr", "post_hoc") for k in kind_list) or not kind_list:
        fail(f"--kinds must be a comma list of rr, post_hoc; got {kinds!r}")
    if backend not in COMPARE_BACKENDS:
        fail(f"--backend must be one of {', '.join(COMPARE_BACKENDS)}, got {backend!r}")
    in_process = backend in ("local", "outlines")
    if in_process and (base_url or server or delivery):
        fail("--base-url, --server and --delivery need --backend openai or instructor")
    if not in_process and base_url is None and server not in (None, "openai"):
        fail(f"--backend {backend} needs --base-url (the server's /v1 URL), or --server openai")
    if (questions is None) != (chunks is None):
        fail("--questions and --chunks go together (your questions and the chunks they name)")
    if questions is not None and data is not None:
        fail("--data (ExpertQA) or --questions/--chunks (your own), not both")
    if naive_template is not None and not naive_template.startswith("answer_naive"):
        fail(f"--naive-template must name an answer_naive version (answer_naive.v2), got {naive_template!r}")
    if judge == "none" and judge_base_url is not None:
        fail("--judge-base-url needs --judge llm, got --judge none")
    if backend == "local" and model not in (None, "smollm2", "gemma3"):
        fail(f"--model with --backend local must be smollm2 or gemma3, got {model!r}")
    return names, kind_list


def _compare_modes(
    names: list[str],
    *,
    backend: str,
    base_url: str | None,
    model: str | None,
    server: str | None,
    delivery: str | None,
    max_chars: int,
    max_tokens: int,
    naive_template: str | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The mode callables on ``--backend``, and what the report says about where they run."""
    if backend == "local":
        local_model = model or "smollm2"
        fns = local_modes(
            names, model=local_model, max_chars=max_chars, max_tokens=max_tokens, naive_template=naive_template
        )
        return fns, {"backend": "local (llama.cpp in-process)", "model": local_model}
    if backend == "outlines":
        gguf = model or "smollm2"
        fns = outlines_modes(
            names, model=gguf, max_chars=max_chars, max_tokens=max_tokens, naive_template=naive_template
        )
        return fns, {"backend": "outlines (its llama.cpp model, in-process)", "model": gguf}
    return server_modes(
        names,
        backend=backend,
        base_url=base_url,
        model=model,
        server=server,
        delivery=delivery,
        max_chars=max_chars,
        max_tokens=max_tokens,
        naive_template=naive_template,
    )


def _compare_config(
    n_questions: int,
    names: list[str],
    where: dict[str, Any],
    *,
    source: str,
    naive_template: str | None,
    max_chars: int,
    max_tokens: int,
    judge: str,
) -> dict[str, Any]:
    """The run's settings, the journal's header and the report's configuration table."""
    from citelock._version import __version__

    return {
        "benchmark": "compare",
        "questions": n_questions,
        "source": source,
        "modes": ",".join(names),
        **where,
        "naive prompt": naive_template or "answer_naive (newest)",
        "max_chars": max_chars,
        "max_tokens": max_tokens,
        "span bounds": ", ".join(f"{k}={v}" for k, v in _COMPARE_OPTIONS.items()),
        "temperature": 0.0,
        "judge": judge,
        "citelock": __version__,
    }


def _echo_naive_markers(naive: dict[str, Any]) -> None:
    """How often the naive arm wrote ``[id]`` markers at all, on stderr."""
    typer.echo(
        f"naive marker rate: {naive['answers_with_markers']}/{naive['parsed']} parsed answers cite at least once; "
        f"{naive['cited_claims']}/{naive['claims']} claims carry a marker",
        err=True,
    )


def _run_compare(
    out: Path,
    items: list[Any],
    fns: dict[str, Any],
    chosen: Any,
    config: dict[str, Any],
    command: str,
    names: list[str],
    *,
    expertqa: Path | None,
    fresh: bool,
    progress: bool,
) -> None:
    """Answer every item in every mode (resuming the journal), write the report and print it.

    ``expertqa`` is the ExpertQA file the items came from (its human support labels go into the report), or
    None for your own questions.
    """
    import time

    from citelock.evals._compare import human_support, run_compare, summarize_compare
    from citelock.evals._report import write_compare_report

    started = time.perf_counter()
    try:
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
        human_support(expertqa, systems) if expertqa is not None else {},
        seconds=time.perf_counter() - started,
        resumed=resumed,
    )
    typer.echo(text)
    if "naive" in summary:
        _echo_naive_markers(summary["naive"])
    typer.echo(f"report written to {shown(report_path)}", err=True)


@eval_app.command("compare")
def compare(
    out: Annotated[Path, typer.Option("--out", help="folder for report.md, chart and the run journal")] = Path(
        "docs/eval/compare"
    ),
    data: Annotated[Path | None, typer.Option("--data", help="ExpertQA val.jsonl (default: shared data)")] = None,
    questions: Annotated[
        Path | None, typer.Option("--questions", help='your questions, JSON lines {"question", "chunks": [ids]}')
    ] = None,
    chunks: Annotated[
        Path | None, typer.Option("--chunks", help='your chunks, JSON lines {"id", "text"} (with --questions)')
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="first N questions (CI subset)")] = None,
    kinds: Annotated[str, typer.Option("--kinds", help="ExpertQA system kinds, in order: rr,post_hoc")] = "rr,post_hoc",
    modes: Annotated[str, typer.Option("--modes", help=f"comma list of {', '.join(MODES)}")] = ",".join(MODES),
    backend: Annotated[
        str, typer.Option("--backend", help=f"{', '.join(COMPARE_BACKENDS)}: where both arms run")
    ] = "local",
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="--backend openai/instructor: the server's /v1 URL")
    ] = None,
    server: Annotated[
        str | None,
        typer.Option("--server", help="server kind: llama-cpp-python, llama.cpp, vllm, sglang, openai"),
    ] = None,
    delivery: Annotated[
        str | None, typer.Option("--delivery", help="--backend openai: how the constraint travels (default: strongest)")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="local: smollm2 or gemma3; outlines: those or a GGUF path; a server: its model name (default: first)",
        ),
    ] = None,
    naive_template: Annotated[
        str | None,
        typer.Option("--naive-template", help="the naive arm's prompt, e.g. answer_naive.v2 (default: newest)"),
    ] = None,
    max_chars: Annotated[int, typer.Option("--max-chars", min=1, help="prompt character budget")] = 3000,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="generation cap per answer")] = 120,
    judge: Annotated[str, typer.Option("--judge", help="offline, lexical, llm or none")] = "offline",
    judge_base_url: JudgeBaseUrl = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="discard the journal instead of resuming")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="show a progress bar")] = True,
) -> None:
    """Answer questions naively and under each span policy on the same model (local or served); write a report.

    Questions come from ExpertQA (``--data``) or from your own files (``--questions`` and ``--chunks``). Both arms
    run on the bundled model (``--backend local``; ``--backend outlines`` for outlines' llama.cpp model over it or
    over ``--model PATH.gguf``) or on your server (``--backend openai --base-url URL --model
    M``, or ``instructor``); the naive arm gets the same instructions as the constrained one plus an example of
    the ``[id]`` marker format (``answer_naive``, newest version unless ``--naive-template`` says otherwise).
    """
    from citelock.evals._compare import load_expertqa, load_questions
    from citelock.evals._harness import judge_label

    output_folder(out)
    names, kind_list = _check_compare_options(
        modes,
        kinds,
        backend=backend,
        base_url=base_url,
        server=server,
        delivery=delivery,
        questions=questions,
        chunks=chunks,
        data=data,
        naive_template=naive_template,
        judge=judge,
        judge_base_url=judge_base_url,
        model=model,
    )
    path = data or _shared_data() / "expertqa" / "val.jsonl"
    chosen = None if judge == "none" else make_judge(judge, judge_base_url)
    if questions is not None and chunks is not None:
        items = load_questions(questions, chunks, limit=limit)
    else:
        with reading(existing_file(path, "ExpertQA"), "ExpertQA"):
            items = load_expertqa(path, kinds=kind_list, limit=limit)
    fns, where = _compare_modes(
        names,
        backend=backend,
        base_url=base_url,
        model=model,
        server=server,
        delivery=delivery,
        max_chars=max_chars,
        max_tokens=max_tokens,
        naive_template=naive_template,
    )
    config = _compare_config(
        len(items),
        names,
        where,
        source=f"{questions} + {chunks}" if questions is not None else f"ExpertQA ({','.join(kind_list)})",
        naive_template=naive_template,
        max_chars=max_chars,
        max_tokens=max_tokens,
        judge=judge_label(chosen) if chosen is not None else "none (support not estimated)",
    )
    command = _command(
        "compare", "--out", out,
        *(["--questions", questions, "--chunks", chunks] if questions is not None else ["--kinds", kinds]),
        *(["--limit", limit] if limit else []), "--modes", modes, "--backend", backend,
        *(["--base-url", base_url] if base_url else []), *(["--server", server] if server else []),
        *(["--delivery", delivery] if delivery else []), *(["--model", model] if model else []),
        *(["--naive-template", naive_template] if naive_template else []),
        "--max-chars", max_chars, "--max-tokens", max_tokens, "--judge", judge,
        *(["--judge-base-url", judge_base_url] if judge_base_url else []),
    )  # fmt: skip
    _run_compare(
        out,
        items,
        fns,
        chosen,
        config,
        command,
        names,
        expertqa=path if questions is None else None,
        fresh=fresh,
        progress=progress,
    )
    raise typer.Exit(EXIT_OK)
