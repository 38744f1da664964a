"""What the tiered policy saves, measured on the seeded defect corpus in one run.

Runs the guard under four settings over the same answers and prints, per setting: judge calls (cited pairs and
diagnosis), citations saved by ordering and by sampling, how many seeded defects were caught (a seeded
(claim, reason) present among the findings) and which ones were missed. The judge is the corpus's own
entailment rule (``SeededEntailmentJudge``, a labelled stand-in): this measures call accounting, not judge
quality.

    python benchmarks/bench_policy.py [--seed 0] [--per-class 30]
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from citelock.evals import generate_corpus
from citelock.evals._oracle import SeededEntailmentJudge
from citelock.guard import Guard, JudgeAccounting, SurfacePolicy


@dataclass
class Row:
    name: str
    accounting: JudgeAccounting
    caught: int
    seeded: int
    blocked: int
    missed: Counter[str]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-class", type=int, default=30)
    args = parser.parse_args()
    corpus = generate_corpus(args.seed, args.per_class)
    store = corpus.store_ids
    settings = [
        ("high stakes, judge everything (no ordering)", SurfacePolicy(name="h", stakes="high"), False),
        ("high stakes, cheapest first", SurfacePolicy(name="h", stakes="high"), True),
        ("low stakes, 25% sample, cheapest first", SurfacePolicy(name="l", stakes="low", sample_rate=0.25), True),
        ("low stakes, no judge", SurfacePolicy(name="l", stakes="low", sample_rate=0.0), True),
    ]
    rows = []
    for name, policy, ordering in settings:
        judge = SeededEntailmentJudge()
        total = JudgeAccounting()
        caught = seeded = blocked = 0
        missed: Counter[str] = Counter()
        for item in corpus.items:
            result = Guard(policy, judge if policy.sample_rate > 0 else None, ordering=ordering).run(
                item.record, item.answer, known_ids=store
            )
            total = total + result.accounting
            found = {(f.claim_index, f.reason) for f in result.report.findings}
            seeded += len(item.expected)
            for e in item.expected:
                hit = (e.claim_index, e.reason) in found
                caught += hit
                if not hit:
                    missed[f"{item.defect}/{e.reason.value}"] += 1
            blocked += result.decision == "block"
        rows.append(Row(name, total, caught, seeded, blocked, missed))

    base = rows[0].accounting.judge_calls + rows[0].accounting.diagnosis_calls
    table = Table(
        "setting",
        "judge calls (cited + diagnosis)",
        "vs judge-everything",
        "saved by ordering",
        "saved by sampling",
        "seeded defects caught",
        "answers blocked",
        title=f"tiered policy on the seeded corpus: {len(corpus.items)} answers, seed {args.seed}",
    )
    for row in rows:
        a = row.accounting
        calls = a.judge_calls + a.diagnosis_calls
        table.add_row(
            row.name,
            f"{calls} ({a.judge_calls} + {a.diagnosis_calls})",
            f"{calls / base:.2f}x" if base else "-",
            str(a.saved_by_ordering),
            str(a.saved_by_sampling),
            f"{row.caught}/{row.seeded} ({row.caught / row.seeded:.1%})",
            str(row.blocked),
        )
    console = Console()
    console.print(table)
    for row in rows:
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(row.missed.items())) or "none"
        console.print(f"missed under '{row.name}': {shown}")
    console.print(
        "double_fault/UNSUPPORTED is the invented claim of an answer whose citation fails provenance: its id is"
        " not in the prompt, so no passage exists to judge it under any setting (the answer is blocked anyway)."
    )


if __name__ == "__main__":
    main()
