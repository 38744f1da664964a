r"""The guard on real answers against human labels: ExpertQA answers, every system, claim by claim.

Each ExpertQA answer becomes what citelock would see in production:

- **chunks**: the distinct evidence passages of the answer's claims (``"[n] URL\n\npassage"``, parsed by
  :func:`~citelock.evals._datasets.parse_evidence`), id ``s<n>`` after the marker (``s<n>-2`` ... when one
  marker carries different passages), serialized with the default template into a :class:`PromptRecord`;
- **answer**: one claim per ``claim_string`` (inline ``[n]`` markers removed, as the free-text parser does),
  citing the chunks of that claim's evidence that have passage text.

Evidence without passage text (only ``"[n] URL"``: all of ``bing_chat`` and ``gpt4``) is never judged: it is
skipped and counted. A claim whose every piece of evidence lacks text cannot be checked at all; it is left out
of the answer (counted as ``claims_skipped_no_text``) rather than turned into an uncited claim, which would
make the coverage figures lie.

Then :func:`citelock.guard.guard` runs on each (record, answer) under a :class:`SurfacePolicy`, and
:func:`summarize_answers` sets its findings against the human labels (``support`` and ``worthiness``). Every
rate comes with its numerator and denominator. ``split`` divides by question (a stable hash of the question
text), so a rule tuned on ``tune`` is reported on ``heldout``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from citelock.errors import InputError
from citelock.evals._datasets import parse_evidence
from citelock.guard import Guard, GuardResult, SurfacePolicy
from citelock.judges import Judge
from citelock.prompt import serialize
from citelock.records import Answer, Chunk, Citation, Claim, Context, PromptRecord, ReasonCode

__all__ = [
    "METRIC_DEFINITIONS",
    "AnswerCase",
    "AnswerOutcome",
    "ClaimGold",
    "Split",
    "build_case",
    "evaluate_answers",
    "question_split",
    "read_expertqa_answers",
    "summarize_answers",
]

Split = Literal["all", "tune", "heldout"]

_MARKERS = re.compile(r"\s*\[\d+(?:\s*[,;]\s*\d+)*\]")
_COMPLETE = "Complete"
_UNSUPPORTED = ("Partial", "Incomplete")

METRIC_DEFINITIONS: dict[str, str] = {
    "answers": "answers read (one per system that answered each question)",
    "claims": "claims in those answers (ExpertQA claim_string)",
    "cited_with_text": "claims citing at least one passage that has text",
    "claims_skipped_no_text": "cited claims left out: every cited passage is a URL only (never judged)",
    "evidence_skipped_no_text": "evidence entries skipped because they are a URL only (never judged)",
    "answers_not_guarded": "answers with no claim left to guard (every claim's evidence is a URL only)",
    "complete_pass_rate": "human-Complete cited claims that got no finding",
    "unsupported_block_rate": "human Partial/Incomplete cited claims that got a finding",
    "review_rate": "cited claims with a citation routed to review",
    "uncited_precision": "UNCITED_CLAIM findings on claims annotators said need a citation",
    "uncited_recall": "uncited claims that need a citation (worthiness Yes) flagged UNCITED_CLAIM",
    "number_false_alarm_rate": "human-Complete cited claims flagged NUMBER_MISMATCH",
    "off_question_flag_rate": "answers with a claim annotators marked relevant (Very / A bit relevant) flagged "
    "OFF_QUESTION: a false-alarm figure (each is an answer to its own question)",
    "complete_served_rate": "human-Complete cited claims served (not dropped, marked or blocked)",
    "unsupported_served_rate": "human Partial/Incomplete cited claims served unmarked (lower is better)",
    "answers_blocked": "answers refused whole (decision block)",
    "answers_kept": "answers served (decision pass or repaired)",
    "answers_repaired": "answers served with failing claims dropped or marked (decision repaired)",
}


def question_split(question: str) -> Literal["tune", "heldout"]:
    """The fixed split of ExpertQA questions: half (by a hash of the question text) is held out.

    Every answer to one question falls in the same half, so a rule tuned on ``tune`` never saw a sentence of
    the ``heldout`` questions.
    """
    key = " ".join(question.split()).lower()
    digest = hashlib.sha256(f"citelock-expertqa-split:{key}".encode()).digest()
    return "heldout" if digest[0] % 2 == 0 else "tune"


@dataclass(frozen=True)
class ClaimGold:
    """The human labels of one ExpertQA claim and where it sits in the guarded answer.

    Attributes:
        position: The claim's index in the guarded :class:`Answer`, or None when it was left out (no text).
        text: The claim as guarded (markers removed).
        support: ExpertQA ``support`` (Complete, Partial, Incomplete, Missing, ...), or None.
        worthiness: ExpertQA ``worthiness`` ("Yes": the sentence needs a citation), or None.
        cited: The guarded claim cites at least one passage with text.
        informativeness: ExpertQA ``informativeness`` ("Very relevant", "A bit relevant", ...), or None.
    """

    position: int | None
    text: str
    support: str | None
    worthiness: str | None
    cited: bool
    informativeness: str | None = None


@dataclass(frozen=True)
class AnswerCase:
    """One ExpertQA answer made into a guard input, with the human labels of its claims."""

    case_id: str
    question: str
    system: str
    split: Literal["tune", "heldout"]
    record: PromptRecord
    answer: Answer | None
    claims: tuple[ClaimGold, ...]
    skipped: Counter[str] = field(default_factory=Counter)


_RELEVANT = ("Very relevant", "A bit relevant")


def _claim_text(claim_string: str) -> str:
    text = _MARKERS.sub("", claim_string)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return re.sub(r"\s{2,}", " ", text).strip()


def build_case(case_id: str, question: str, system: str, answer: Mapping[str, Any]) -> AnswerCase:
    """Turn one ExpertQA answer (``answers[system]``) into a guard input (see the module docstring).

    Raises:
        InputError: the answer has no ``claims`` list or a claim has no ``claim_string``.
    """
    raw_claims = answer.get("claims")
    if not isinstance(raw_claims, list):
        raise InputError(f"{case_id}: answers[{system!r}].claims should be a list, got {type(raw_claims).__name__}")
    skipped: Counter[str] = Counter()
    ids: dict[tuple[int | None, str], str] = {}
    chunks: list[Chunk] = []
    claims: list[Claim] = []
    golds: list[ClaimGold] = []
    for index, item in enumerate(raw_claims):
        text = item.get("claim_string") if isinstance(item, Mapping) else None
        if not isinstance(text, str):
            raise InputError(f"{case_id}: answers[{system!r}].claims[{index}] has no claim_string")
        evidence = [e for e in (item.get("evidence") or []) if isinstance(e, str)]
        citations: list[Citation] = []
        for raw in evidence:
            parsed = parse_evidence(raw)
            if parsed.text is None:
                skipped["evidence_skipped_no_text"] += 1
                continue
            key = (parsed.marker, parsed.text)
            if key not in ids:
                base = f"s{parsed.marker}" if parsed.marker is not None else f"s{len(ids) + 1}"
                taken = {c.id for c in chunks}
                chunk_id, n = base, 1
                while chunk_id in taken:
                    n += 1
                    chunk_id = f"{base}-{n}"
                ids[key] = chunk_id
                chunks.append(Chunk(id=chunk_id, text=parsed.text, source=parsed.url, rank=len(chunks) + 1))
            if all(c.chunk_id != ids[key] for c in citations):
                citations.append(Citation(chunk_id=ids[key]))
        support = item.get("support")
        worthiness = item.get("worthiness")
        informative = item.get("informativeness")
        informative = informative if isinstance(informative, str) else None
        clean = _claim_text(text)
        if evidence and not citations:
            skipped["claims_skipped_no_text"] += 1
            golds.append(ClaimGold(None, clean, support, worthiness, cited=False, informativeness=informative))
            continue
        golds.append(
            ClaimGold(len(claims), clean, support, worthiness, cited=bool(citations), informativeness=informative)
        )
        claims.append(Claim(text=clean, citations=tuple(citations)))
    record = serialize(Context(question=question, chunks=tuple(chunks)), request_id=case_id.replace("/", "-"))
    return AnswerCase(
        case_id=case_id,
        question=question,
        system=system,
        split=question_split(question),
        record=record,
        answer=Answer(claims=tuple(claims)) if claims else None,
        claims=tuple(golds),
        skipped=skipped,
    )


def read_expertqa_answers(path: Path, *, split: Split = "all") -> list[AnswerCase]:
    """Read every answer of every system in an ExpertQA JSON-lines file as :class:`AnswerCase` values.

    Args:
        path: ExpertQA ``val.jsonl`` (rows ``{"question", "answers": {system: {"claims": [...]}}}``).
        split: ``all``, or only the questions of the ``tune`` or ``heldout`` half (:func:`question_split`).

    Raises:
        InputError: the file is unreadable or a row is not an ExpertQA row.
    """
    if split not in ("all", "tune", "heldout"):
        raise InputError(f"split must be all, tune or heldout, got {split!r}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"ExpertQA file {path}: cannot read it ({exc.strerror}); expected val.jsonl") from None
    cases: list[AnswerCase] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"ExpertQA file {path} line {number}: not valid JSON ({exc.msg})") from None
        question = row.get("question") if isinstance(row, dict) else None
        answers = row.get("answers") if isinstance(row, dict) else None
        if not isinstance(question, str) or not isinstance(answers, dict):
            raise InputError(
                f"ExpertQA file {path} line {number}: expected an object with 'question' (string) and "
                "'answers' (object of system -> answer)"
            )
        if split != "all" and question_split(question) != split:
            continue
        for system, answer in sorted(answers.items()):
            if not isinstance(answer, dict):
                raise InputError(f"ExpertQA file {path} line {number}: answers[{system!r}] should be an object")
            cases.append(build_case(f"line{number}/{system}", question, system, answer))
    return cases


@dataclass(frozen=True)
class AnswerOutcome:
    """One guarded answer: the case and the policy's result (None when no claim could be guarded)."""

    case: AnswerCase
    result: GuardResult | None


def evaluate_answers(cases: Iterable[AnswerCase], *, policy: SurfacePolicy, judge: Judge | None) -> list[AnswerOutcome]:
    """Guard every case's answer against its record under ``policy`` (a case with no claim left is not run)."""
    out = []
    for case in cases:
        result = None
        if case.answer is not None:
            result = Guard(policy, judge).run(case.record, case.answer)
        out.append(AnswerOutcome(case, result))
    return out


def _rate(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _count_claim(
    n: Counter[str], gold: ClaimGold, position: int, found: set[ReasonCode], *, served: set[int], review: set[int]
) -> None:
    """Count one labeled claim (at ``position``) of a guarded answer: its gold label against what the guard did."""
    if gold.cited:
        n["cited_with_text"] += 1
        n["review"] += position in review
        if gold.support == _COMPLETE:
            n["complete"] += 1
            n["complete_clean"] += not found
            n["complete_served"] += position in served
            n["complete_number_flagged"] += ReasonCode.NUMBER_MISMATCH in found
        elif gold.support in _UNSUPPORTED:
            n["unsupported"] += 1
            n["unsupported_flagged"] += bool(found)
            n["unsupported_served"] += position in served
    elif gold.worthiness not in ("Yes", "No"):
        n["uncited_unlabeled"] += 1  # no worthiness label: neither right nor wrong to flag
    else:
        needs = gold.worthiness == "Yes"
        flagged = ReasonCode.UNCITED_CLAIM in found
        n["uncited"] += 1
        n["uncited_needs_citation"] += needs
        n["uncited_flagged"] += flagged
        n["uncited_flagged_correct"] += needs and flagged


def _summary(outcomes: Sequence[AnswerOutcome]) -> dict[str, Any]:
    n: Counter[str] = Counter()
    for outcome in outcomes:
        case, result = outcome.case, outcome.result
        n["answers"] += 1
        n["claims"] += len(case.claims)
        n.update(case.skipped)
        if result is None:
            n["answers_not_guarded"] += 1
            continue
        n["answers_blocked" if result.decision == "block" else "answers_kept"] += 1
        n["answers_repaired"] += result.decision == "repaired"
        served = {c.claim_index for c in result.claims if c.action == "serve"}
        reasons: dict[int, set[ReasonCode]] = {}
        for finding in result.report.findings:
            reasons.setdefault(finding.claim_index, set()).add(finding.reason)
        review = {s.claim_index for s in result.support if s.route == "review"}
        if any(g.informativeness in _RELEVANT for g in case.claims if g.position is not None):
            n["relevant_answers"] += 1
            n["relevant_answers_off_question"] += ReasonCode.OFF_QUESTION in reasons.get(-1, set())
        for gold in case.claims:
            if gold.position is not None:
                found = reasons.get(gold.position, set())
                _count_claim(n, gold, gold.position, found, served=served, review=review)
    return {
        "answers": n["answers"],
        "claims": n["claims"],
        "cited_with_text": n["cited_with_text"],
        "claims_skipped_no_text": n["claims_skipped_no_text"],
        "evidence_skipped_no_text": n["evidence_skipped_no_text"],
        "answers_not_guarded": n["answers_not_guarded"],
        "complete_pass_rate": _rate(n["complete_clean"], n["complete"]),
        "unsupported_block_rate": _rate(n["unsupported_flagged"], n["unsupported"]),
        "review_rate": _rate(n["review"], n["cited_with_text"]),
        "uncited_precision": _rate(n["uncited_flagged_correct"], n["uncited_flagged"]),
        "uncited_recall": _rate(n["uncited_flagged_correct"], n["uncited_needs_citation"]),
        "number_false_alarm_rate": _rate(n["complete_number_flagged"], n["complete"]),
        "off_question_flag_rate": _rate(n["relevant_answers_off_question"], n["relevant_answers"]),
        "complete_served_rate": _rate(n["complete_served"], n["complete"]),
        "unsupported_served_rate": _rate(n["unsupported_served"], n["unsupported"]),
        "answers_blocked": n["answers_blocked"],
        "answers_repaired": n["answers_repaired"],
        "answers_kept": n["answers_kept"],
        "counts": {
            key: n[key]
            for key in (
                "complete",
                "complete_clean",
                "complete_number_flagged",
                "unsupported",
                "unsupported_flagged",
                "review",
                "uncited",
                "uncited_unlabeled",
                "uncited_needs_citation",
                "uncited_flagged",
                "uncited_flagged_correct",
                "relevant_answers",
                "relevant_answers_off_question",
            )
        },
    }


def summarize_answers(outcomes: Sequence[AnswerOutcome]) -> dict[str, Any]:
    """Overall and per-system figures (see :data:`METRIC_DEFINITIONS`); each rate is None when undefined."""
    systems = sorted({o.case.system for o in outcomes})
    return {
        **_summary(outcomes),
        "per_system": {s: _summary([o for o in outcomes if o.case.system == s]) for s in systems},
    }
