"""Refit a judge's routing from a review desk built from WiCE + ExpertQA labels; measure it on AttributionBench dev.

The desk is the real path a team takes: every labeled pair of WiCE ``claim_dev`` and ExpertQA ``val`` (``--data``,
the shared data folder; see its README) becomes a one-claim answer citing its passage, guarded by the real guard
on a low-stakes surface that judges every citation with the judge (``--judge``, default lexical) under its
shipped routing, with an audit plan; the results and the review queue go to a SQLite store, and each
``AUDIT_SAMPLE`` entry is labeled by its human label (accept = supported, reject = partial or not). Then
:func:`citelock.evals._desk_fit.refit_from_desk` (what ``citelock calibrate --from-store DB --surface desk --fit``
runs) fits the routing on the weighted labels, and both routings are measured on AttributionBench dev, which
neither saw: false pass rate (not-yes passed / not-yes), false fail rate, yes pass rate and review rate, each with
a 95% bootstrap interval over items.

The desk holds, by default, only the held-out halves of WiCE and ExpertQA (``citelock.evals.item_split``: the
shipped judges were trained and their routings fitted on the other halves, so these look like traffic the judge
never saw), minus every ExpertQA question that AttributionBench dev also holds (its ExpertQA part reuses them).

Run: python scripts/false_pass_desk.py [--data ../shared/data] [--judge lexical|offline] [--desk-split heldout|all]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from citelock import assemble, serialize
from citelock.evals._calibration import judge_items, routing_rates_ci
from citelock.evals._datasets import LabeledItem, item_split, read_dataset
from citelock.evals._desk_fit import refit_from_desk
from citelock.guard import AuditPlan, Guard, SurfacePolicy
from citelock.judges import make_judge
from citelock.judges._routing import Routing, shipped_routing
from citelock.records import ReasonCode
from citelock.store import ResultStore, ReviewQueue

PLAN = AuditPlan(near_pass_rate=1.0, pass_rate=0.5, near_band=0.1, review_rate=0.5, fail_rate=0.5, seed=0)
"""The desk's audit plan: every pass just above the threshold, half of everything else."""


def build_desk(items: list[LabeledItem], judge: Any, db: Path) -> tuple[int, int]:
    """Guard every item as a one-claim answer, store it, label its audit samples. Returns (answers, labels)."""
    guard = Guard(SurfacePolicy(name="desk", stakes="low", sample_rate=1.0, on_fail="mark", audit=PLAN), judge)
    queue, results = ReviewQueue(db), ResultStore(db)
    gold: dict[str, str] = {}
    batch = []
    for i, item in enumerate(items):
        record = serialize(
            assemble("What do the sources say?", [{"id": "c1", "text": item.passages[0]}]), request_id=f"desk-{i}"
        )
        result = guard.run(record, {"claims": [{"text": item.claim, "citations": [{"chunk_id": "c1"}]}]})
        gold[record.request_id] = item.label
        batch.append(result)
    queue.enqueue_results(batch)
    results.append_many((r, None) for r in batch)
    labels = 0
    for entry, _ in queue.items(reason=ReasonCode.AUDIT_SAMPLE, status="open"):
        queue.resolve(entry.id, "accept" if gold[entry.request_id] == "yes" else "reject", reviewer="desk")
        labels += 1
    return len(batch), labels


def _rates(routing: Routing | None, scores: list[float], gold: list[str]) -> dict[str, Any]:
    if routing is None:
        return {}
    routes = [routing.route(s) for s in scores]
    out = routing_rates_ci(gold, routes, n_bootstrap=1000, seed=0)
    return {name: (m.value, m.low, m.high) for name, m in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--judge", default="lexical")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--desk-split",
        choices=("heldout", "all"),
        default="heldout",
        help="heldout (default): only the halves the shipped judges never trained on; all: both halves",
    )
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"no data folder at {args.data} (give --data)", file=sys.stderr)
        return 2
    judge = make_judge(args.judge)
    test = read_dataset("attributionbench", args.data / "attributionbench" / "dev.jsonl").items
    ab_questions = {i.group for i in test}  # AttributionBench's ExpertQA part reuses ExpertQA claims
    desk_items = [
        i
        for i in (
            *read_dataset("wice", args.data / "wice" / "claim_dev.jsonl").items,
            *read_dataset("expertqa", args.data / "expertqa" / "val.jsonl").items,
        )
        if i.group not in ab_questions and (args.desk_split == "all" or item_split(i) == "heldout")
    ]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "desk.db"
        answers, labels = build_desk(desk_items, judge, db)
        results = ResultStore(db).latest(surface="desk")
        items = ReviewQueue(db).items(surface="desk")
    before = shipped_routing(judge.name, judge.version)
    fit = refit_from_desk(results, items, surface="desk", before=before)
    judged = judge_items(test, judge)
    report = {
        "judge": f"{judge.name} {judge.version}",
        "desk": {"answers": answers, "audit_labels": labels, "fit": fit.train, "heldout": fit.heldout},
        "desk_heldout": {"shipped": fit.before_rates, "refit": fit.after_rates},
        "routings": {
            name: None if r is None else {"pass_at": r.pass_at, "fail_below": r.fail_below}
            for name, r in (("shipped", before), ("refit", fit.routing))
        },
        "attributionbench_dev": {
            "n": len(test),
            "shipped": _rates(before, judged.scores, judged.gold),
            "refit": _rates(fit.routing, judged.scores, judged.gold),
        },
        "target_false_pass": fit.routing.target_false_pass,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"judge {report['judge']}; desk: {answers} answers (WiCE claim_dev + ExpertQA val, split {args.desk_split}, "
        f"minus AttributionBench questions), {labels} audit labels"
    )
    print(
        f"refit on {fit.train} weighted labels, {fit.heldout} held out; "
        f"target false pass {fit.routing.target_false_pass}"
    )
    print(f"{'routing':<9}{'pass_at':>9}{'fail_below':>11}")
    for name, r in (("shipped", before), ("refit", fit.routing)):
        if r is not None:
            print(f"{name:<9}{r.pass_at:>9.3f}{r.fail_below:>11.3f}")
    print()
    print(f"{'set':<26}{'routing':<9}{'false pass':>24}{'false fail':>24}{'yes pass':>24}{'review':>24}")

    def cell(value: Any) -> str:
        if value is None:
            return "n/a"
        if isinstance(value, tuple):
            v, lo, hi = value
            return "n/a" if v is None else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        return f"{value:.3f}"

    for name in ("shipped", "refit"):
        rates = report["desk_heldout"][name] or {}
        print(
            f"{'desk held-out (weighted)':<26}{name:<9}{cell(rates.get('false_pass_rate')):>24}"
            f"{cell(rates.get('false_fail_rate')):>24}{'':>24}{cell(rates.get('review_rate')):>24}"
        )
    for name in ("shipped", "refit"):
        rates = report["attributionbench_dev"][name]
        print(
            f"{'AttributionBench dev':<26}{name:<9}{cell(rates.get('false_pass_rate')):>24}"
            f"{cell(rates.get('false_fail_rate')):>24}{cell(rates.get('yes_pass_rate')):>24}"
            f"{cell(rates.get('review_rate')):>24}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
