"""Right answers through the real pipeline and the bundled model, before and after the slot ranking (issue #35).

Each held-out question of the near-miss set (``scripts/near_miss_set.py``: SQuAD 2.0 train articles, passed
with ``--squad PATH``; the same split and draw) is asked with the README's own command, in process::

    citelock answer -q QUESTION --chunks CORPUS.jsonl --top-k 4 --policy quote --surface docs --stakes high
        --on-fail drop_claim --json

where the corpus is every paragraph of the held-out articles, one chunk each. Outcomes per question:

- **right**: printed with ``guard: OK`` (exit 0) and a served claim holds a gold answer;
- **near-miss OK**: printed with ``guard: OK`` and claims, none holding a gold answer (OK that does not answer);
- **blocked**: the guard did not pass it (exit 1);
- **abstained**: no claims (the pipeline abstained before generating, or the model abstained).

For unanswerable questions, **served** is an answer with claims printed OK. ``before`` runs the same code with the
slot check turned off (no ranking, no admitted set, the focus check only): what main did before this change.

``--split tune`` asks the calibration half's questions instead (the corpus is then the calibration articles): the
half the admission rule (:data:`citelock.guard._ranked.ADMIT_TOP`, :data:`~citelock.guard._ranked.ADMIT_FLOOR`)
is chosen on; ``--admit-top`` / ``--admit-floor`` override them for that. ``--model first`` replaces the bundled
model by a scripted one that quotes, whole, the first sentence the schema offers (what a small model that copies
whatever is first does): with one admitted sentence it is the only answer the grammar allows, so it measures the
ranking and the admission rule in seconds, without the model. Figures for the README come from the bundled model.

Usage:
    python scripts/near_miss_answers.py --squad PATH [--questions 30] [--unanswerable 8] [--arms before,after]
        [--split heldout|tune] [--model bundled|first] [--admit-top N] [--admit-floor F] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from near_miss_set import Question, load_questions

from citelock import _request
from citelock.cli import app
from citelock.guard import _near_miss, _ranked

README = ["--top-k", "4", "--policy", "quote", "--surface", "docs", "--stakes", "high", "--on-fail", "drop_claim"]


def _corpus(path: Path, articles: set[str], out: Path) -> int:
    data = json.loads(path.read_text(encoding="utf-8"))
    n = 0
    with out.open("w", encoding="utf-8") as f:
        for article in data["data"]:
            if article["title"] not in articles:
                continue
            for i, paragraph in enumerate(article["paragraphs"]):
                row = {"id": f"{article['title'][:24]}-{i}", "text": paragraph["context"], "source": article["title"]}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    return n


def _pick(questions: Sequence[Question], answerable: bool, n: int, split: str = "heldout") -> list[Question]:
    """Round-robin over the half's articles, in the set's own (seeded) order."""
    by_article: dict[str, list[Question]] = {}
    for q in questions:
        if q.split == split and bool(q.gold) == answerable:
            by_article.setdefault(q.article, []).append(q)
    out: list[Question] = []
    while len(out) < n and any(by_article.values()):
        for article in sorted(by_article):
            if by_article[article] and len(out) < n:
                out.append(by_article[article].pop(0))
    return out


def _arm(name: str) -> None:
    """``before``: the slot check off everywhere it is consulted (ranking, admission, abstention, the guard)."""
    on = name == "after"
    _near_miss.slot_applies = _SLOT_APPLIES if on else (lambda question: False)  # type: ignore[assignment]
    _ranked.slot_applies = _near_miss.slot_applies  # type: ignore[attr-defined]
    _request.rank_request = _RANK_REQUEST if on else (lambda *args, **kwargs: None)  # type: ignore[assignment]


_RANK_REQUEST = _request.rank_request
_SLOT_APPLIES = _near_miss.slot_applies


def _first_quoter() -> Any:
    """A scripted constrained backend that quotes, whole, the first sentence the schema offers (no model)."""
    from citelock.backends import FakeBackend
    from citelock.backends._local import LOCAL_LIMITS
    from citelock.constraint import quote_tails

    def script(record: Any, schema: Any) -> dict[str, Any]:
        for chunk_id in schema.ids:
            quotes = quote_tails(schema.sentences.get(chunk_id, ()), schema.options.max_text_chars)
            if quotes:  # the longest quote of the first offered sentence that fits the bound
                return {"claims": [{"text": quotes[0], "citations": [{"chunk_id": chunk_id}]}]}
        return {"claims": [], "abstained": True}

    return FakeBackend(script, limits=LOCAL_LIMITS, name="first", model="first-offered")


def _ask(runner: CliRunner, q: Question, corpus: Path, db: Path) -> dict[str, Any]:
    args = ["answer", "-q", q.question, "--chunks", str(corpus), *README, "--json", "--db", str(db)]
    started = time.perf_counter()
    res = runner.invoke(app, args)
    seconds = time.perf_counter() - started
    if res.exit_code not in (0, 1):
        return {"outcome": "error", "detail": (res.stdout or "")[-300:], "seconds": seconds}
    data = json.loads(res.stdout[res.stdout.index("{") :])
    claims = [c["text"] for c in data["answer"]["claims"]]
    served = data["result"]["decision"] != "block"
    if not claims:
        outcome = "abstained"
    elif res.exit_code != 0 or not served:
        outcome = "blocked"
    elif any(a.lower() in c.lower() for a in q.answers for c in claims):
        outcome = "right"
    else:
        outcome = "near_miss_ok"
    return {"outcome": outcome, "claims": claims, "seconds": round(seconds, 2)}


def main(argv: Sequence[str] | None = None) -> int:
    """Run both arms over the capped held-out questions and print the rates."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--squad", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--questions", type=int, default=30, help="answerable held-out questions")
    parser.add_argument("--unanswerable", type=int, default=8)
    parser.add_argument("--arms", default="before,after")
    parser.add_argument("--out", type=Path, default=None, help="write every outcome as JSON here")
    parser.add_argument("--split", choices=("heldout", "tune"), default="heldout", help="tune: the calibration half")
    parser.add_argument("--model", choices=("bundled", "first"), default="bundled")
    parser.add_argument("--admit-top", type=int, default=None, help="override ADMIT_TOP (choose it on --split tune)")
    parser.add_argument("--admit-floor", type=float, default=None, help="override ADMIT_FLOOR['high'] (likewise)")
    args = parser.parse_args(argv)
    if args.admit_top is not None:
        _ranked.ADMIT_TOP = args.admit_top
    if args.admit_floor is not None:
        _ranked.ADMIT_FLOOR = {**_ranked.ADMIT_FLOOR, "high": args.admit_floor}  # type: ignore[attr-defined]
    if args.model == "first":
        from citelock.backends import _registry

        fake = _first_quoter()
        _registry.make_backend = lambda kind, **options: fake  # type: ignore[assignment]
    if not args.squad.is_file():
        print(f"no SQuAD file at {args.squad}: pass --squad, a SQuAD 2.0 train JSON file", file=sys.stderr)
        return 2
    questions = load_questions(args.squad, args.seed, 80)
    asked = _pick(questions, True, args.questions, args.split) + _pick(questions, False, args.unanswerable, args.split)
    runner = CliRunner()
    report: dict[str, Any] = {
        "split": args.split,
        "model": args.model,
        "admit_top": _ranked.ADMIT_TOP,
        "admit_floor": getattr(_ranked, "ADMIT_FLOOR", None),
        "questions": args.questions,
        "unanswerable": args.unanswerable,
        "arms": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        report["chunks"] = _corpus(args.squad, {q.article for q in asked}, corpus)
        for arm in args.arms.split(","):
            _arm(arm)
            db = Path(tmp) / f"{arm}.db"
            rows = [{"question": q.question, "answerable": bool(q.gold), **_ask(runner, q, corpus, db)} for q in asked]
            ans = Counter(r["outcome"] for r in rows if r["answerable"])
            una = Counter(r["outcome"] for r in rows if not r["answerable"])
            n, m = max(1, args.questions), max(1, args.unanswerable)
            report["arms"][arm] = {
                "answerable": dict(ans),
                "unanswerable": dict(una),
                "right_of_answerable": round(ans["right"] / n, 3),
                "ok_without_gold_of_questions": round(
                    (ans["near_miss_ok"] + una["near_miss_ok"] + una["right"]) / (n + m), 3
                ),
                "unanswerable_served": round((una["near_miss_ok"] + una["right"]) / m, 3),
                "seconds": round(sum(r["seconds"] for r in rows), 1),
            }
            if args.out is not None:
                args.out.with_suffix(f".{arm}.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
            print(arm, json.dumps(report["arms"][arm]), flush=True)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
