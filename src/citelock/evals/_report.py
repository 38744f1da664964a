"""Markdown reports and PNG charts for ``citelock eval``: every number next to its definition and the command.

Tables are produced from run rows, never typed by hand. Charts use matplotlib (the ``eval`` extra) with the
non-interactive Agg backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from citelock.errors import MissingExtraError
from citelock.evals._defects import DEFECT_CLASSES
from citelock.evals._harness import CHECKS, FREE_CHECKS, DefectsRun, DefectsSummary

__all__ = [
    "CHECK_DEFINITIONS",
    "COMPARE_DEFINITIONS",
    "markdown_table",
    "pct",
    "render_compare_report",
    "render_defects_report",
    "write_compare_report",
    "write_defects_report",
]

CHECK_DEFINITIONS: dict[str, str] = {
    "resolve_store": "every cited id exists in the chunk store (resolution against the store)",
    "resolve_context": "every cited id is one of the chunks assembled into this prompt (guard ① id check)",
    "spans": "every span is verbatim in the cited chunk as sent (guard ① SPAN_* codes)",
    "coverage": "every factual claim carries a citation (guard ② UNCITED_CLAIM)",
    "numbers": "every number of a claim occurs in its cited passage (NUMBER_MISMATCH, free)",
    "faithfulness": "context-scoped faithfulness grader: the claim vs the whole context, citations ignored",
    "judge": "per-citation support judge ③ alone: the claim vs the one cited passage, on every citation "
    "whose id is in the prompt (with best-evidence diagnosis)",
    "production": "citelock.guard.guard in production order: ①, ②, numbers, then ③ only on survivors",
}

_SHORT = {
    "resolve_store": "resolve@store",
    "resolve_context": "resolve@context",
    "spans": "spans ①",
    "coverage": "coverage ②",
    "numbers": "numbers",
    "faithfulness": "faithfulness",
    "judge": "judge ③",
    "production": "production",
}


def pct(part: int, whole: int) -> str:
    """``part/whole (xx.x%)``, or ``0/0`` when ``whole`` is zero."""
    if whole == 0:
        return "0/0"
    return f"{part}/{whole} ({100 * part / whole:.1f}%)"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table (cells stringified, pipes escaped)."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _matrix(m: Mapping[str, Mapping[str, int]], what: str) -> str:
    return markdown_table(
        ["resolution against the assembled context", f"supported ({what})", f"unsupported ({what})"],
        [[label, m[key]["supported"], m[key]["unsupported"]] for key, label in (("pass", "pass"), ("fail", "fail"))],
    )


def _per_class(s: DefectsSummary) -> str:
    header = [
        "class",
        "n",
        "resolve@context",
        "resolve@store",
        "faithfulness",
        "judge ③",
        "union (free + faithfulness)",
        "union + judge",
        "production guard",
        "right reason code",
    ]
    rows = []
    for c in [c for c in DEFECT_CLASSES if c in s.n]:
        n = s.n[c]
        rows.append(
            [
                f"`{c}`" + (" (false alarms)" if c == "clean" else ""),
                n,
                s.caught["resolve_context"][c],
                s.caught["resolve_store"][c],
                s.caught["faithfulness"][c],
                s.caught["judge"][c],
                s.union_free[c],
                s.union_judge[c],
                s.caught["production"][c],
                s.codes_ok[c],
            ]
        )
    return markdown_table(header, rows)


def _alone(s: DefectsSummary) -> str:
    defective = sum(n for c, n in s.n.items() if c != "clean")
    clean = s.n.get("clean", 0)
    rows = []
    for name in CHECKS:
        hits = sum(v for c, v in s.caught[name].items() if c != "clean")
        rows.append(
            [_SHORT[name], pct(hits, defective), s.caught[name].get("clean", 0), s.collateral[name],
             CHECK_DEFINITIONS[name]]
        )  # fmt: skip
    union_hits = sum(v for c, v in s.union_free.items() if c != "clean")
    judge_hits = sum(v for c, v in s.union_judge.items() if c != "clean")
    rows.append(
        ["union", pct(union_hits, defective), s.union_free.get("clean", 0), "-",
         "any of " + ", ".join(_SHORT[x] for x in FREE_CHECKS) + ", faithfulness"]
    )  # fmt: skip
    rows.append(
        ["union + judge", pct(judge_hits, defective), s.union_judge.get("clean", 0), "-",
         "the union plus the per-citation judge ③"]
    )  # fmt: skip
    header = ["check", "seeded defects caught", f"false alarms on `clean` (of {clean})",
              "defective items with a flag on a clean claim", "definition"]  # fmt: skip
    return markdown_table(header, rows)


def _calls(s: DefectsSummary) -> str:
    all_calls, ordered = s.calls["judge_all"], s.calls["judge_ordered"]
    saved = all_calls - ordered
    rows: list[list[Any]] = [
        ["judge ③ on every citation whose id is in the prompt (grade everything)", all_calls],
        ["judge ③ only on citations that passed ①, ② and numbers (production order)", ordered],
        ["saved by running the free checks first", pct(saved, all_calls)],
        ["faithfulness grader (one call per factual claim, or per chunk in per_chunk mode)", s.calls["faithfulness"]],
    ]
    return markdown_table(["model calls (judge invocations, diagnosis included)", "count"], rows)


def _judge_note(judge: str) -> str:
    """What the judge column measures: a stand-in's numbers are the pipeline's logic, not a judge's accuracy."""
    if "(stand-in)" in judge:
        return (
            "**The judge is a STAND-IN**: the seeded corpus's own entailment rule (below), not a trained judge. "
            "Numbers in the `faithfulness`, `judge ③`, union+judge and production columns measure the pipeline's "
            "logic, not a real judge's accuracy."
        )
    return f"The judge is the real judge `{judge}`, used both per citation and as the faithfulness grader's entailment."


def _defects_settings(run: DefectsRun, s: DefectsSummary) -> str:
    """The run's settings table."""
    cfg = run.config
    return markdown_table(
        ["setting", "value"],
        [
            ["seed", cfg["seed"]],
            ["answers per class", cfg["per_class"]],
            ["classes", len(s.n)],
            ["chunk store", f"{cfg['store_chunks']} chunks over 5 topics; each context holds at most 5"],
            ["judge (name version)", cfg["judge"]],
            ["faithfulness grader mode", cfg["faithfulness_mode"]],
            ["citelock version", cfg["citelock"]],
            ["python", cfg["python"]],
            ["run time", f"{run.seconds:.1f} s ({run.resumed} items resumed from the journal)"],
        ],
    )


def _defects_snippet(cfg: Mapping[str, Any], s: DefectsSummary) -> str:
    """The README snippet: the headline tables of the defect report."""
    return "\n".join(
        [
            f"Seeded defect benchmark (`{cfg.get('command') or 'citelock eval defects'}`; judge: {cfg['judge']}; "
            f"{cfg['per_class']} answers per class, seed {cfg['seed']}):",
            "",
            _per_class(s),
            "",
            _matrix(s.matrix_truth, "ground truth"),
            "",
            f"Faithfulness verdicts moved by replacing every citation with nonsense: {s.scramble_moved}. "
            f"Judge calls: {s.calls['judge_all']} grading everything vs {s.calls['judge_ordered']} with the "
            "free checks first. Full report: docs/eval/defects/report.md.",
            "",
        ]
    )


def render_defects_report(run: DefectsRun, s: DefectsSummary) -> tuple[str, str]:
    """The full markdown report and a README snippet (the headline tables)."""
    cfg = run.config
    defective = sum(n for c, n in s.n.items() if c != "clean")
    judge_missed = s.missed.get("union_judge", [])
    lines = [
        "# Seeded defect benchmark",
        "",
        f"Reproduce: `{cfg.get('command') or 'citelock eval defects'}`",
        "",
        _defects_settings(run, s),
        "",
        _judge_note(str(cfg["judge"])),
        "",
        "**Entailment used by the seeded benchmark.** Every chunk sentence is a unique generated fact. A claim "
        "is supported by a passage iff the claim is one of the passage's sentences *as visible in the prompt*. "
        "Invented claims, a fact with one number changed, a fact with an appended clause (`X, and Y.` over `X.`: "
        "partial) and a fact whose sentence was cut off the prompt are supported by no chunk of the context. "
        "*Context-scoped supported* means supported by some chunk the model could see, whatever id it cited.",
        "",
        "A seeded defect is **caught** by a check when the check flags the claim that carries it. On `clean` "
        "answers every flag is a **false alarm**.",
        "",
        "## Resolution vs context-scoped faithfulness (2×2, answers)",  # noqa: RUF001
        "",
        "Resolution *pass* = every cited id is a chunk of this prompt. Columns from the ground truth:",
        "",
        _matrix(s.matrix_truth, "ground truth"),
        "",
        "and from the faithfulness grader's verdict:",
        "",
        _matrix(s.matrix_grader, "grader"),
        "",
        "The two axes are independent: an answer can cite real ids and be unfaithful, or be faithful to the "
        "context and cite ids that do not resolve.",
        "",
        "## Per class: what each check catches (answers)",
        "",
        _per_class(s),
        "",
        "*right reason code*: the production guard assigned every expected code to the defective claim (for "
        "`clean`: raised nothing). `double_fault`'s invented claim has no resolvable citation, so no judge sees "
        "it; its expected code is the id code and the faithfulness grader is what flags the invented claim.",
        "",
        "## Each check alone, the union, and the judge added",
        "",
        _alone(s),
        "",
        "## Model calls",
        "",
        _calls(s),
        "",
        "## Self-check: is the faithfulness grader id-blind?",
        "",
        f"Every citation (id and span) was replaced by nonsense and the faithfulness grader re-run: "
        f"**{s.scramble_moved}** of {sum(s.n.values())} answers changed verdict "
        "(must be 0 for a context-scoped grader: it cannot see citations, so it cannot check them).",
        "",
        "## Misses",
        "",
        (
            f"The union with the per-citation judge caught all {defective} seeded defects."
            if not judge_missed
            else f"The union with the per-citation judge missed {len(judge_missed)} of {defective}: "
            + ", ".join(f"`{x}`" for x in judge_missed[:40])
            + (" …" if len(judge_missed) > 40 else "")
        ),
        f"Judge calls that raised: {s.judge_errors}.",
        "",
        "![catch rate per class](catch_rates.png)",
        "",
        "![model calls](model_calls.png)",
        "",
    ]
    return "\n".join(lines), _defects_snippet(cfg, s)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("eval", "matplotlib") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _charts(s: DefectsSummary, out: Path) -> None:
    plt = _pyplot()
    classes = [c for c in DEFECT_CLASSES if c in s.n and c != "clean"]
    series = [
        ("resolve@store", [s.caught["resolve_store"][c] / s.n[c] for c in classes]),
        ("resolve@context", [s.caught["resolve_context"][c] / s.n[c] for c in classes]),
        ("faithfulness", [s.caught["faithfulness"][c] / s.n[c] for c in classes]),
        ("judge ③", [s.caught["judge"][c] / s.n[c] for c in classes]),
        ("union + judge", [s.union_judge[c] / s.n[c] for c in classes]),
    ]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    width = 0.8 / len(series)
    for k, (label, values) in enumerate(series):
        ax.bar([i + k * width for i in range(len(classes))], values, width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(classes))], classes, rotation=35, ha="right")
    ax.set_ylabel("share of seeded defects caught")
    ax.set_ylim(0, 1.05)
    ax.set_title("Seeded defects caught per class, by check")
    ax.legend(ncols=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    fig.tight_layout()
    fig.savefig(out / "catch_rates.png", dpi=110, metadata={"Software": None})
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.2))
    labels = ["grade everything", "free checks first"]
    values = [s.calls["judge_all"], s.calls["judge_ordered"]]
    ax.barh(labels, values, color=["#999999", "#2b7bba"])
    for i, v in enumerate(values):
        ax.text(v, i, f" {v}", va="center")
    ax.set_xlabel("per-citation judge calls")
    ax.set_title("Model calls on the seeded corpus")
    fig.tight_layout()
    fig.savefig(out / "model_calls.png", dpi=110, metadata={"Software": None})
    plt.close(fig)


def write_defects_report(run: DefectsRun, s: DefectsSummary, out: Path) -> tuple[Path, str]:
    """Write ``report.md``, ``snippet.md`` and the PNG charts to ``out``; return the report path and text."""
    out.mkdir(parents=True, exist_ok=True)
    report, snippet = render_defects_report(run, s)
    (out / "report.md").write_text(report, encoding="utf-8")
    (out / "snippet.md").write_text(snippet, encoding="utf-8")
    _charts(s, out)
    return out / "report.md", report


COMPARE_DEFINITIONS: dict[str, str] = {
    "parsed": "answers that came back parseable (the rest failed: error type counted)",
    "fabricated ids": "citations whose id is not one of this question's chunks (FABRICATED_ID) / citations",
    "stale ids": "citations of a chunk the budget dropped from the prompt (STALE_ID) / citations",
    "non-verbatim spans": "spans not verbatim in the cited chunk as sent (SPAN_* codes) / citations with a span",
    "uncited claims": "factual claims without a citation (UNCITED_CLAIM) / factual claims",
    "judge support": "citations that passed provenance and the judge said yes / citations judged",
    "abstentions": "parsed answers saying the sources do not contain the answer (no claims) / parsed answers",
    "claims not verbatim": "cited claims whose text (minus a quote lead-in) is not verbatim in a cited chunk / "
    "cited claims",
    "clean answers": "parsed answers that make claims, with no fabricated/stale id, non-verbatim span or uncited "
    "claim (abstentions are not counted clean)",
    "latency": "mean generation wall time per answer (p50 in brackets)",
    "tokens": "mean prompt / completion tokens per answer",
    "hit max_tokens (all answers)": "answers whose generation stopped at max_tokens, parsed or failed",
}


def _rate(part: int, whole: int) -> str:
    return pct(part, whole)


def _compare_rows(summary: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """The per-mode table's header and rows: one metric per row, one mode per column, then its definition."""
    modes = list(summary)
    header = ["metric", *modes, "definition"]

    def line(name: str, cells: list[Any]) -> list[Any]:
        return [name, *cells, COMPARE_DEFINITIONS.get(name, "")]

    s = summary
    rows = [
        line("answers", [s[m]["answers"] for m in modes]),
        line("parsed", [_rate(s[m]["parsed"], s[m]["answers"]) for m in modes]),
        line("failures", [", ".join(f"{k}: {v}" for k, v in s[m]["failures"].items()) or "0" for m in modes]),
        line("claims (factual)", [f"{s[m]['claims']} ({s[m]['factual']})" for m in modes]),
        line("fabricated ids", [_rate(s[m]["fabricated"], s[m]["citations"]) for m in modes]),
        line("stale ids", [_rate(s[m]["stale"], s[m]["citations"]) for m in modes]),
        line("non-verbatim spans", [_rate(s[m]["non_verbatim"], s[m]["spans"]) for m in modes]),
        line("uncited claims", [_rate(s[m]["uncited"], s[m]["factual"]) for m in modes]),
        line("abstentions", [_rate(s[m].get("abstained", 0), s[m]["parsed"]) for m in modes]),
        line(
            "claims not verbatim",
            [_rate(s[m].get("claims_not_verbatim", 0), s[m].get("cited_claims", 0)) for m in modes],
        ),
        line("judge support", [_rate(s[m]["supported"], s[m]["judged"]) for m in modes]),
        line("clean answers", [_rate(s[m]["clean_answers"], s[m]["parsed"]) for m in modes]),
        line(
            "latency",
            [
                "-"
                if s[m]["latency_mean_s"] is None
                else f"{s[m]['latency_mean_s']:.1f} s ({s[m]['latency_p50_s']:.1f})"
                for m in modes
            ],
        ),
        line(
            "tokens",
            [
                "-"
                if s[m]["prompt_tokens_mean"] is None
                else f"{s[m]['prompt_tokens_mean']:.0f} / {s[m]['completion_tokens_mean'] or 0:.0f}"
                for m in modes
            ],
        ),
        line("hit max_tokens (all answers)", [s[m]["hit_max_tokens"] for m in modes]),
        line("span policy used", [", ".join(f"{k}: {v}" for k, v in s[m]["span_policies"].items()) for m in modes]),
    ]
    return header, rows


def _human_part(human: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The section on ExpertQA's human support labels per system (a reference point)."""
    human_rows = []
    for system, counts in human.items():
        total = sum(counts.values())
        complete = counts.get("Complete", 0)
        partial = counts.get("Partial", 0) + counts.get("Incomplete", 0)
        human_rows.append(
            [system, total, pct(complete, total), pct(partial, total), pct(counts.get("Missing", 0), total)]
        )
    return [
        "## ExpertQA's human support labels per system (reference)",
        "",
        "Claims of each system's answers as ExpertQA's annotators labeled their support "
        "(Complete = supported; Partial/Incomplete = partly; Missing = no evidence given). These are other "
        "systems (GPT-4 based) on the same questions: a reference point, not the same answers.",
        "",
        markdown_table(["system", "claims", "Complete", "Partial/Incomplete", "Missing"], human_rows),
        "",
    ]


def render_compare_report(
    config: Mapping[str, Any],
    summary: Mapping[str, Mapping[str, Any]],
    human: Mapping[str, Mapping[str, int]],
    *,
    seconds: float,
    resumed: int,
) -> str:
    """The naive-vs-constrained markdown report."""
    header, rows = _compare_rows(summary)
    expertqa = str(config.get("source", "ExpertQA")).startswith("ExpertQA")
    title = "real passages (ExpertQA val)" if expertqa else f"your questions ({config.get('source')})"
    chunk_note = (
        "Chunks are each question's distinct ExpertQA evidence passages (`e1..eN`, first-seen order); the "
        if expertqa
        else "Chunks are the ones each question names in the chunks file, in its order; the "
    )
    human_part = _human_part(human) if expertqa else []
    return "\n".join(
        [
            f"# Naive vs constrained on {title}",
            "",
            f"Reproduce: `{config.get('command', 'citelock eval compare')}`",
            "",
            markdown_table(["setting", "value"], [[k, v] for k, v in config.items() if k != "command"]),
            "",
            f"Run time: {seconds:.0f} s in this invocation ({resumed} answers resumed from the journal).",
            "",
            chunk_note + 'context is assembled under the character budget with `on_overflow="drop"` (whole chunks '
            "dropped and recorded). The chunk store for STALE vs FABRICATED is the question's own passages.",
            "",
            "## Per mode",
            "",
            markdown_table(header, rows),
            "",
            *human_part,
            "![per-mode rates](compare_rates.png)",
            "",
        ]
    )


def write_compare_report(
    out: Path,
    config: Mapping[str, Any],
    summary: Mapping[str, Mapping[str, Any]],
    human: Mapping[str, Mapping[str, int]],
    *,
    seconds: float,
    resumed: int,
) -> tuple[Path, str]:
    """Write ``report.md`` and ``compare_rates.png`` to ``out``; return the report path and text."""
    out.mkdir(parents=True, exist_ok=True)
    text = render_compare_report(config, summary, human, seconds=seconds, resumed=resumed)
    (out / "report.md").write_text(text, encoding="utf-8")
    plt = _pyplot()
    modes = list(summary)
    metrics = [
        ("fabricated ids", "fabricated", "citations"),
        ("non-verbatim spans", "non_verbatim", "spans"),
        ("uncited claims", "uncited", "factual"),
        ("judge support", "supported", "judged"),
    ]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(modes))
    for k, mode in enumerate(modes):
        values = [(summary[mode][num] / summary[mode][den]) if summary[mode][den] else 0.0 for _, num, den in metrics]
        ax.bar([i + k * width for i in range(len(metrics))], values, width, label=mode)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(metrics))], [m[0] for m in metrics])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate")
    ax.set_title("Naive vs constrained on ExpertQA passages")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "compare_rates.png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out / "report.md", text
