r"""Naive vs constrained on real passages: ExpertQA questions with the passages its systems were given.

Each question's distinct evidence passages (ExpertQA ``evidence`` entries ``"[n] URL\n\npassage"``, header
removed) become its chunks ``e1..eN`` in first-seen order. Questions answered by a retrieve-and-read system
(``rr_*``: the passages were in that system's prompt) come first; ``post_hoc_*`` questions (passages retrieved
after the fact for the same question) extend the set when more questions are asked for, and every row says
which kind it is. Contexts are kept short with :func:`citelock.assemble`'s budget and ``on_overflow="drop"``
(whole chunks dropped and recorded, never a cut tail).

Every mode answers every question through :func:`citelock.answer` on the same model. A mode is any callable
``(question, chunks) -> GuardedAnswer``, so the harness runs the local backends, a server, or a fake.

A team's own questions load with :func:`load_questions`: a questions file (JSON lines ``{"question", "chunks":
[ids]}``, as ``examples/questions.jsonl``) and a chunks file (JSON lines ``{"id", "text"}``, as
``examples/corpus.jsonl``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from citelock.constraint import quote_body
from citelock.errors import CitelockError, InputError, TruncatedOutputError, UnparsedAnswerError
from citelock.evals._datasets import parse_evidence
from citelock.evals._journal import Journal
from citelock.judges import Judge
from citelock.pipeline import GuardedAnswer
from citelock.reasons import codes_in
from citelock.records import Chunk
from citelock.text import normalize

__all__ = [
    "ModeFn",
    "QAItem",
    "SYSTEM_KINDS",
    "evaluate_answer",
    "human_support",
    "load_expertqa",
    "load_questions",
    "run_compare",
    "summarize_compare",
]

ModeFn = Callable[[str, Sequence[Chunk]], GuardedAnswer]
SYSTEM_KINDS = ("rr", "post_hoc")
_SPAN_CODES = {code.value for code in codes_in("span")}


@dataclass(frozen=True)
class QAItem:
    """One ExpertQA question with its passages as chunks."""

    item_id: str
    question: str
    system: str
    chunks: tuple[Chunk, ...]


def _passage(evidence: str) -> tuple[str | None, str | None]:
    parsed = parse_evidence(evidence)
    return parsed.text, parsed.url


def load_expertqa(path: Path, *, kinds: Sequence[str] = SYSTEM_KINDS, limit: int | None = None) -> list[QAItem]:
    """Read ExpertQA ``val.jsonl`` into :class:`QAItem` values (``rr_*`` questions first).

    Args:
        path: The ExpertQA JSON-lines file.
        kinds: System kinds to take questions from, in order (``rr``, ``post_hoc``).
        limit: Keep the first ``limit`` questions.

    Raises:
        InputError: the file is missing or a line is not an ExpertQA row.
    """
    if not path.is_file():
        raise InputError(f"ExpertQA file {path} not found; expected the val.jsonl of ExpertQA")
    by_kind: dict[str, list[QAItem]] = {k: [] for k in kinds}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            question = row["question"]
            answers = row["answers"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"ExpertQA file {path} line {number}: not a row with question/answers ({exc})") from None
        for system, answer in answers.items():
            kind = next((k for k in kinds if system.startswith(k + "_")), None)
            if kind is None:
                continue
            seen: dict[str, str | None] = {}
            for claim in answer.get("claims", []):
                for evidence in claim.get("evidence", []):
                    text, url = _passage(evidence)
                    if text and text not in seen:
                        seen[text] = url
            if not seen:
                continue
            chunks = tuple(
                Chunk(id=f"e{i + 1}", text=text, source=url, rank=i + 1) for i, (text, url) in enumerate(seen.items())
            )
            by_kind[kind].append(QAItem(f"q{number:03d}", question, system, chunks))
    items = [item for kind in kinds for item in by_kind[kind]]
    return items[:limit] if limit is not None else items


def _json_lines(path: Path, what: str) -> list[tuple[int, Any]]:
    if not path.is_file():
        raise InputError(f"{what} file {path} not found; expected JSON lines")
    out: list[tuple[int, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(f"{what} file {path} line {number}: not JSON ({exc.msg})") from None
    return out


def load_questions(questions: Path, chunks: Path, *, limit: int | None = None) -> list[QAItem]:
    """Read a team's own questions and chunks into :class:`QAItem` values (system ``own``).

    Args:
        questions: JSON lines, one question each: ``{"question": str, "chunks": [chunk ids, best first]}`` and
            optionally ``"id"`` (default: ``q`` and the line number).
        chunks: JSON lines, one chunk each: ``{"id": str, "text": str}`` (other keys, such as ``source``, kept).
        limit: Keep the first ``limit`` questions.

    Raises:
        InputError: a file is missing, a line is not JSON of that shape, a chunk id is duplicated, or a question
            names a chunk id the chunks file does not have.
    """
    by_id: dict[str, Chunk] = {}
    for number, row in _json_lines(chunks, "chunks"):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("text"), str):
            raise InputError(
                f'chunks file {chunks} line {number}: expected {{"id": str, "text": str}}, got {row!r:.80}'
            )
        if row["id"] in by_id:
            raise InputError(f"chunks file {chunks} line {number}: duplicate chunk id {row['id']!r}")
        by_id[row["id"]] = Chunk(id=row["id"], text=row["text"], source=row.get("source"))
    items: list[QAItem] = []
    for number, row in _json_lines(questions, "questions"):
        ids = row.get("chunks") if isinstance(row, dict) else None
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) or not isinstance(ids, list):
            raise InputError(
                f'questions file {questions} line {number}: expected {{"question": str, "chunks": [ids]}}, '
                f"got {row!r:.80}"
            )
        missing = [i for i in ids if i not in by_id]
        if missing or not ids:
            raise InputError(
                f"questions file {questions} line {number}: chunk ids {missing or '[] (none)'} are not in {chunks}"
            )
        item_id = str(row.get("id") or f"q{number:03d}")
        items.append(QAItem(item_id, row["question"], "own", tuple(by_id[i] for i in ids)))
    return items[:limit] if limit is not None else items


def human_support(path: Path, systems: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """ExpertQA's human support labels per system: claim counts by ``support`` value (cited claims only)."""
    wanted = set(systems) if systems is not None else None
    out: dict[str, Counter[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for system, answer in json.loads(line)["answers"].items():
            if wanted is not None and system not in wanted:
                continue
            counts = out.setdefault(system, Counter())
            for claim in answer.get("claims", []):
                counts[str(claim.get("support") or "N/A")] += 1
    return {system: dict(counts) for system, counts in sorted(out.items())}


def _failure_finish_reason(exc: CitelockError) -> str | None:
    """Why generation stopped for an answer that failed, when the error says (``length``: cut at max_tokens)."""
    if isinstance(exc, UnparsedAnswerError):
        return exc.generation.finish_reason
    if isinstance(exc, TruncatedOutputError):
        return "length"
    return None


def _hit_max_tokens(row: Mapping[str, Any]) -> bool:
    """The answer's generation stopped at max_tokens, whether or not it parsed (the typed ``finish_reason``)."""
    return row.get("finish_reason") == "length"


def evaluate_answer(item: QAItem, mode: str, fn: ModeFn, judge: Judge | None) -> dict[str, Any]:
    """Answer one question in one mode, guard it, judge the surviving citations; return the journal row."""
    row: dict[str, Any] = {
        "item_id": f"{item.item_id}:{mode}",
        "question_id": item.item_id,
        "mode": mode,
        "system": item.system,
        "chunks": len(item.chunks),
    }
    started = time.perf_counter()
    try:
        result = fn(item.question, item.chunks)
    except CitelockError as exc:
        row.update(
            ok=False,
            error_type=type(exc).__name__,
            error=str(exc)[:300],
            finish_reason=_failure_finish_reason(exc),
            wall_s=time.perf_counter() - started,
        )
        return row
    texts = {c.id: c.text for c in item.chunks}
    bodies = {c.id: normalize(c.text) for c in item.chunks}
    cited = [claim for claim in result.answer.claims if claim.citations]
    # A claim is verbatim when its text, minus a quote lead-in, is in one of its cited chunks (both normalized):
    # what the quote policy promises, measured here independently of the guard.
    not_verbatim = [
        claim.text
        for claim in cited
        if not any(normalize(quote_body(claim.text)) in bodies.get(c.chunk_id, "\0") for c in claim.citations)
    ]
    report = result.report
    counts = Counter(f.reason.value for f in report.findings)
    judged = supported = 0
    for c in report.citations:
        if judge is None or not c.passed or c.chunk_id not in texts:
            continue
        judged += 1
        claim = result.answer.claims[c.claim_index].text
        supported += judge.judge(claim, texts[c.chunk_id]).label == "yes"
    gen = result.generation
    row.update(
        ok=True,
        wall_s=time.perf_counter() - started,
        span_policy=result.span_policy,
        downgrade=result.downgrade_reason,
        dropped=len(result.dropped_chunks),
        claims=len(result.answer.claims),
        abstained=result.answer.abstained,
        abstained_before_generation=result.abstained_before_generation,
        off_question=counts.get("OFF_QUESTION", 0),
        cited_claims=len(cited),
        claims_not_verbatim=len(not_verbatim),
        not_verbatim_texts=not_verbatim[:3],
        factual=sum(c.factual for c in report.claims),
        citations=len(report.citations),
        spans=sum(c.span is not None for c in report.citations),
        fabricated=counts.get("FABRICATED_ID", 0) + counts.get("ID_NOT_IN_PROMPT", 0),
        stale=counts.get("STALE_ID", 0),
        non_verbatim=sum(n for code, n in counts.items() if code in _SPAN_CODES),
        uncited=counts.get("UNCITED_CLAIM", 0),
        number_mismatch=counts.get("NUMBER_MISMATCH", 0),
        judged=judged,
        supported=supported,
        latency_s=gen.latency_s,
        prompt_tokens=gen.prompt_tokens,
        completion_tokens=gen.completion_tokens,
        finish_reason=gen.finish_reason,
        text=(result.answer.raw or result.answer.model_dump_json())[:600],
    )
    return row


def run_compare(
    items: Sequence[QAItem],
    modes: Mapping[str, ModeFn],
    judge: Judge | None,
    *,
    journal_path: Path | None,
    header: Mapping[str, Any],
    fresh: bool = False,
    progress: bool = True,
) -> tuple[list[dict[str, Any]], int]:
    """Run every mode on every item, journaling each finished (item, mode); return rows and resumed count."""
    journal = Journal(journal_path, header, fresh=fresh) if journal_path is not None else None
    rows: dict[str, dict[str, Any]] = dict(journal.rows) if journal else {}
    todo = [(item, mode) for item in items for mode in modes if f"{item.item_id}:{mode}" not in rows]
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items) * len(modes), initial=len(rows), desc="compare", unit="answer", file=sys.stderr)
    for item, mode in todo:
        row = json.loads(json.dumps(evaluate_answer(item, mode, modes[mode], judge)))
        if journal:
            journal.append(row)
        rows[row["item_id"]] = row
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    ordered = [rows[f"{item.item_id}:{mode}"] for item in items for mode in modes if f"{item.item_id}:{mode}" in rows]
    return ordered, journal.resumed if journal else 0


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize_compare(rows: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per mode: answers, failures by type, and rates with their numerators and denominators.

    ``abstained`` counts parsed answers that say the sources do not contain the answer; they make no claims and
    are not counted in ``clean_answers``. ``abstained_before_generation`` counts those the pipeline abstained
    on without generating (no assembled chunk relevant enough); ``off_question`` counts answers flagged
    ``OFF_QUESTION`` (counted apart: ``clean_answers`` stays about citations). ``judge_support`` is
    ``supported / judged`` (cited pairs the judge said yes to / pairs judged). ``claims_not_verbatim`` counts
    cited claims whose text (minus a quote lead-in) is in none of their cited chunks: zero by construction under
    ``quote``.

    ``hit_max_tokens`` counts every answer of the mode whose generation stopped at max_tokens, parsed or not
    (a constrained answer cut short fails to parse, so counting parsed answers only would miss it).

    ``answers_with_markers`` counts parsed answers with at least one cited claim: for the naive arm, how often the
    model writes ``[id]`` markers at all (its marker rate is this over ``parsed``).
    """
    out: dict[str, dict[str, Any]] = {}
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        ok = [r for r in mine if r.get("ok")]
        failures = Counter(r["error_type"] for r in mine if not r.get("ok"))
        lat = sorted(r["latency_s"] for r in ok)

        def total(key: str, rows_: Sequence[Mapping[str, Any]] = ok) -> int:
            return int(sum(r.get(key) or 0 for r in rows_))

        out[mode] = {
            "answers": len(mine),
            "parsed": len(ok),
            "failures": dict(failures),
            "claims": total("claims"),
            "abstained": sum(1 for r in ok if r.get("abstained")),
            "abstained_before_generation": sum(1 for r in ok if r.get("abstained_before_generation")),
            "off_question": total("off_question"),
            "cited_claims": total("cited_claims"),
            "claims_not_verbatim": total("claims_not_verbatim"),
            "factual": total("factual"),
            "citations": total("citations"),
            "spans": total("spans"),
            "fabricated": total("fabricated"),
            "stale": total("stale"),
            "non_verbatim": total("non_verbatim"),
            "uncited": total("uncited"),
            "judged": total("judged"),
            "supported": total("supported"),
            "clean_answers": sum(
                1
                for r in ok
                if not (r.get("abstained") or r["fabricated"] or r["stale"] or r["non_verbatim"] or r["uncited"])
            ),
            "judge_support": (total("supported") / total("judged")) if total("judged") else None,
            "latency_mean_s": _mean(lat),
            "latency_p50_s": lat[len(lat) // 2] if lat else None,
            "prompt_tokens_mean": _mean([r["prompt_tokens"] for r in ok if r.get("prompt_tokens") is not None]),
            "completion_tokens_mean": _mean(
                [r["completion_tokens"] for r in ok if r.get("completion_tokens") is not None]
            ),
            "hit_max_tokens": sum(1 for r in mine if _hit_max_tokens(r)),
            "answers_with_markers": sum(1 for r in ok if r.get("cited_claims")),
            "span_policies": dict(Counter(str(r.get("span_policy")) for r in ok)),
        }
    return out
