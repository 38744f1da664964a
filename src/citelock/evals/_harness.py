"""The seeded defect benchmark: every check alone, their union, the judge added, and the production order.

For each seeded item the harness records which claims each check flags:

- ``resolve_store``: a citation id that is not in the chunk store (resolution against the *store*);
- ``resolve_context``: a citation id that is not in this prompt (resolution against the *assembled context*);
- ``spans``: guard ① span verification (``SPAN_*`` codes);
- ``coverage``: guard ② (``UNCITED_CLAIM``);
- ``numbers``: the number pre-check (``NUMBER_MISMATCH``);
- ``faithfulness``: a context-scoped faithfulness grader (claim vs the whole context, citations ignored);
- ``judge``: the per-citation support judge ③ alone, on every citation whose id is in the prompt;
- ``production``: :func:`citelock.guard.guard` in production order (①②numbers first, ③ on survivors only).

A seeded defect is *caught* by a check when the check flags the claim that carries it. On ``clean`` items
every flag is a false alarm. Rows are journaled (resumable); :func:`summarize_defects` aggregates them.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citelock.evals._defects import DEFECT_CLASSES, DefectCorpus, SeededItem, generate_corpus
from citelock.evals._faithfulness import FaithfulnessMode, grade_faithfulness, scramble_citations
from citelock.evals._journal import Journal
from citelock.guard import Guard, SurfacePolicy, check
from citelock.judges import Judge
from citelock.reasons import Layer, ReasonCode, codes_in

__all__ = [
    "CHECKS",
    "FREE_CHECKS",
    "DefectsRun",
    "DefectsSummary",
    "evaluate_item",
    "judge_label",
    "run_defects",
    "summarize_defects",
]

CHECKS: tuple[str, ...] = (
    "resolve_store",
    "resolve_context",
    "spans",
    "coverage",
    "numbers",
    "faithfulness",
    "judge",
    "production",
)
FREE_CHECKS: tuple[str, ...] = ("resolve_context", "spans", "coverage", "numbers")
"""The deterministic checks (no model call)."""

_SPAN_CODES = codes_in("span")
# relevance off: the seeded corpus draws its questions apart from its claims (it measures citation defects, and an
# OFF_QUESTION on a "clean" item would count as a false alarm of a check this harness does not measure).
_POLICY = SurfacePolicy(name="eval-defects", stakes="high", relevance="off")


def judge_label(judge: Judge) -> str:
    """``name version``, with ``(stand-in)`` appended for a judge that declares ``stand_in = True``."""
    label = f"{judge.name} {judge.version}"
    return label + " (stand-in)" if getattr(judge, "stand_in", False) else label


def evaluate_item(
    item: SeededItem, store_ids: Collection[str], judge: Judge, *, mode: FaithfulnessMode = "joined"
) -> dict[str, Any]:
    """Run every check on one seeded item and return its journal row (JSON-ready)."""
    record, answer = item.record, item.answer
    flags: dict[str, set[int]] = {name: set() for name in CHECKS}
    prompt_ids = set(record.prompt_ids)
    for ci, claim in enumerate(answer.claims):
        for citation in claim.citations:
            if citation.chunk_id not in prompt_ids:
                flags["resolve_context"].add(ci)
            if citation.chunk_id not in store_ids:
                flags["resolve_store"].add(ci)
    report = check(record, answer, known_ids=store_ids, relevance=False)
    for f in report.findings:
        if f.reason in _SPAN_CODES:
            flags["spans"].add(f.claim_index)
        elif f.reason == ReasonCode.UNCITED_CLAIM:
            flags["coverage"].add(f.claim_index)
        elif f.reason == ReasonCode.NUMBER_MISMATCH:
            flags["numbers"].add(f.claim_index)
    faith = grade_faithfulness(record, answer, judge, mode=mode)
    flags["faithfulness"] = set(faith.unsupported)
    scrambled = grade_faithfulness(record, scramble_citations(answer, item.item_id), judge, mode=mode)
    alone = Guard(_POLICY, judge, ordering=False).run(record, answer, known_ids=store_ids)
    flags["judge"] = {f.claim_index for f in alone.report.findings if f.layer == Layer.SUPPORT}
    production = Guard(_POLICY, judge).run(record, answer, known_ids=store_ids)
    flags["production"] = {f.claim_index for f in production.report.findings}
    expected_codes = sorted(
        {
            (e.claim_index, e.reason.value)
            for e in item.expected
            if not (e.citation_index is None and e.layer == Layer.SUPPORT)
        }
    )
    produced = {(f.claim_index, f.reason.value) for f in production.report.findings}
    return {
        "item_id": item.item_id,
        "defect": item.defect,
        "topic": item.topic,
        "format": answer.format,
        "supported": item.supported,
        "claims": len(answer.claims),
        "defective": sorted({e.claim_index for e in item.expected}),
        "flags": {name: sorted(v) for name, v in flags.items()},
        "production_codes": sorted(produced),
        "expected_codes": expected_codes,
        "codes_ok": all(tuple(code) in produced for code in expected_codes),
        "faith_labels": list(faith.labels),
        "faith_labels_scrambled": list(scrambled.labels),
        "faith_calls": faith.calls,
        "judge_calls_all": alone.accounting.judge_calls + alone.accounting.diagnosis_calls,
        "judge_calls_ordered": production.accounting.judge_calls + production.accounting.diagnosis_calls,
        "judge_errors": alone.accounting.errors + production.accounting.errors,
        "citations": len(report.citations),
    }


@dataclass(frozen=True)
class DefectsRun:
    """A finished (or resumed) defect benchmark run: its configuration and one row per item."""

    config: dict[str, Any]
    rows: list[dict[str, Any]]
    resumed: int
    seconds: float


def run_defects(
    judge: Judge,
    *,
    seed: int = 0,
    per_class: int = 60,
    mode: FaithfulnessMode = "joined",
    journal_path: Path | None = None,
    fresh: bool = False,
    progress: bool = True,
    command: str = "",
    corpus: DefectCorpus | None = None,
) -> DefectsRun:
    """Generate the corpus and run every check on every item (resuming from ``journal_path`` if given).

    Args:
        judge: The support judge (the per-citation judge and the faithfulness grader's entailment).
        seed: Corpus seed.
        per_class: Items per defect class.
        mode: Faithfulness grader mode.
        journal_path: JSONL journal of finished items; None keeps rows in memory only.
        fresh: Discard an existing journal instead of resuming.
        progress: Show a progress bar.
        command: The command line that reproduces the run (recorded in the configuration).
        corpus: A pre-generated corpus (must match ``seed``/``per_class``); generated when None.
    """
    from citelock._version import __version__

    config: dict[str, Any] = {
        "benchmark": "defects",
        "seed": seed,
        "per_class": per_class,
        "faithfulness_mode": mode,
        "judge": judge_label(judge),
        "citelock": __version__,
    }
    started = time.perf_counter()
    corpus = corpus or generate_corpus(seed=seed, per_class=per_class)
    store_ids = corpus.store_ids
    journal = Journal(journal_path, config, fresh=fresh) if journal_path is not None else None
    rows: dict[str, dict[str, Any]] = dict(journal.rows) if journal else {}
    todo = [item for item in corpus.items if item.item_id not in rows]
    for item in _progress(todo, progress, "defects", len(corpus.items), len(rows)):
        row = json.loads(json.dumps(evaluate_item(item, store_ids, judge, mode=mode)))  # as journaled
        if journal:
            journal.append(row)
        rows[item.item_id] = row
    ordered = [rows[item.item_id] for item in corpus.items]
    meta = {
        **config,
        "command": command,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "store_chunks": len(corpus.store),
        "items": len(ordered),
    }
    return DefectsRun(meta, ordered, journal.resumed if journal else 0, time.perf_counter() - started)


def _progress(items: list[SeededItem], enabled: bool, desc: str, total: int, done: int) -> Iterable[SeededItem]:
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, total=total, initial=done, unit="item", file=sys.stderr)  # type: ignore[no-any-return]


@dataclass
class DefectsSummary:
    """Aggregates of a defect run (all counts are items unless the name says otherwise).

    Attributes:
        n: Items per class.
        caught: ``caught[check][class]``: items whose seeded defect the check flags (on ``clean``: items with
            any flag, i.e. false alarms).
        union_free: Deterministic checks + faithfulness grader, per class.
        union_judge: ``union_free`` plus the per-citation judge, per class.
        codes_ok: Items where production assigned every expected reason code, per class.
        collateral: Flags on non-defective claims of defective items, per check (false alarms off ``clean``).
        matrix_truth: 2x2 ``[resolution pass/fail][supported/unsupported]`` with ground-truth support.
        matrix_grader: the same with the faithfulness grader's verdict.
        calls: Model calls: ``judge_all``, ``judge_ordered``, ``faithfulness``.
        scramble_moved: Items whose faithfulness verdicts moved when citations were replaced by nonsense.
        judge_errors: Judge calls that raised.
        missed: Per check name, item ids of defective items the production guard or union+judge missed.
    """

    n: dict[str, int]
    caught: dict[str, dict[str, int]]
    union_free: dict[str, int]
    union_judge: dict[str, int]
    codes_ok: dict[str, int]
    collateral: dict[str, int]
    matrix_truth: dict[str, dict[str, int]]
    matrix_grader: dict[str, dict[str, int]]
    calls: dict[str, int]
    scramble_moved: int
    judge_errors: int
    missed: dict[str, list[str]] = field(default_factory=dict)


def _hit(row: Mapping[str, Any], names: Iterable[str]) -> bool:
    flagged: set[int] = set()
    for name in names:
        flagged.update(row["flags"][name])
    if row["defect"] == "clean":
        return bool(flagged)
    return bool(flagged & set(row["defective"]))


def summarize_defects(rows: list[dict[str, Any]]) -> DefectsSummary:
    """Aggregate journal rows into the benchmark's tables."""
    classes = [c for c in DEFECT_CLASSES if any(r["defect"] == c for r in rows)]
    n = {c: sum(r["defect"] == c for r in rows) for c in classes}
    caught = {name: {c: 0 for c in classes} for name in CHECKS}
    union_free = {c: 0 for c in classes}
    union_judge = {c: 0 for c in classes}
    codes_ok = {c: 0 for c in classes}
    collateral = {name: 0 for name in CHECKS}
    matrix_truth = {"pass": {"supported": 0, "unsupported": 0}, "fail": {"supported": 0, "unsupported": 0}}
    matrix_grader = {"pass": {"supported": 0, "unsupported": 0}, "fail": {"supported": 0, "unsupported": 0}}
    missed: dict[str, list[str]] = {"union_judge": [], "production": []}
    calls = {"judge_all": 0, "judge_ordered": 0, "faithfulness": 0}
    moved = 0
    errors = 0
    for r in rows:
        c = r["defect"]
        for name in CHECKS:
            caught[name][c] += _hit(r, [name])
            if c != "clean":
                collateral[name] += bool(set(r["flags"][name]) - set(r["defective"]))
        union_free[c] += _hit(r, [*FREE_CHECKS, "faithfulness"])
        judge_hit = _hit(r, [*FREE_CHECKS, "faithfulness", "judge"])
        union_judge[c] += judge_hit
        codes_ok[c] += bool(r["codes_ok"]) if c != "clean" else not r["flags"]["production"]
        if c != "clean" and not judge_hit:
            missed["union_judge"].append(r["item_id"])
        if c != "clean" and not _hit(r, ["production"]):
            missed["production"].append(r["item_id"])
        resolution = "fail" if r["flags"]["resolve_context"] else "pass"
        matrix_truth[resolution]["supported" if r["supported"] else "unsupported"] += 1
        graded = not r["flags"]["faithfulness"]
        matrix_grader[resolution]["supported" if graded else "unsupported"] += 1
        calls["judge_all"] += r["judge_calls_all"]
        calls["judge_ordered"] += r["judge_calls_ordered"]
        calls["faithfulness"] += r["faith_calls"]
        moved += r["faith_labels"] != r["faith_labels_scrambled"]
        errors += r["judge_errors"]
    return DefectsSummary(
        n=n,
        caught=caught,
        union_free=union_free,
        union_judge=union_judge,
        codes_ok=codes_ok,
        collateral=collateral,
        matrix_truth=matrix_truth,
        matrix_grader=matrix_grader,
        calls=calls,
        scramble_moved=moved,
        judge_errors=errors,
        missed=missed,
    )
