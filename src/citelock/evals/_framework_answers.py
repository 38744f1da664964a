"""Framework-style answers with seeded citation defects, for detect-only mode (issue 39).

Built from the seeded defect corpus (:func:`citelock.evals.generate_corpus`): each item's context becomes the
numbered sources a framework would show (``Source 1:`` ...), and each answer is prose with ``[n]`` markers and
quotations, as ``CitationQueryEngine``, ``AnswerBuilder`` and LangChain's quoted-answer how-to produce them. An
answer holds one or two clean sentences (a verbatim quotation of the cited source, marked ``[n]``, ``[n, m]`` or
``[n-m]``) and, except for ``clean``, one defective sentence:

- ``out_of_range``: a verbatim quotation whose marker names a source number past the last (``ID_NOT_IN_PROMPT``);
- ``fabricated_quote``: a quotation paraphrased from its source, in no source (``SPAN_NOT_IN_CHUNK``);
- ``stitched_quote``: verbatim pieces of one source that are never contiguous, joined by an ellipsis or run
  together (``SPAN_STITCHED``);
- ``misattributed_quote``: a verbatim quotation of one source, marked as another (``SPAN_IN_OTHER_CHUNK``).

``python -m citelock.evals._framework_answers --seed 101 --per-class 60`` prints the figures docs/measured.md
quotes: per class, the defects detect-only mode found with the expected code, and the clean quotations it flagged;
beside them what Haystack's ``AnswerBuilder`` notices of the same answers (it warns about out-of-range markers,
nothing else), when haystack is installed.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from citelock.evals._defects import generate_corpus
from citelock.guard import Guard
from citelock.integrations import Detector
from citelock.records import ReasonCode

__all__ = ["CLASSES", "FrameworkAnswer", "framework_answers", "measure"]

CLASSES: tuple[str, ...] = ("clean", "out_of_range", "fabricated_quote", "stitched_quote", "misattributed_quote")
_EXPECTED = {
    "out_of_range": ReasonCode.ID_NOT_IN_PROMPT,
    "fabricated_quote": ReasonCode.SPAN_NOT_IN_CHUNK,
    "stitched_quote": ReasonCode.SPAN_STITCHED,
    "misattributed_quote": ReasonCode.SPAN_IN_OTHER_CHUNK,
}
_LEADS = ("According to the sources,", "The documents say", "Source material states", "As reported,")


@dataclass(frozen=True)
class FrameworkAnswer:
    """One framework-style answer: the numbered sources, the text, and where its seeded defect is.

    Attributes:
        item_id: ``class-NNN``.
        defect: One of :data:`CLASSES`.
        sources: The sources' texts, numbered from 1 in this order.
        text: The answer.
        defect_sentence: Index of the defective sentence (None for ``clean``).
        expected: The reason code detect-only mode must give it (None for ``clean``).
    """

    item_id: str
    defect: str
    sources: tuple[str, ...]
    text: str
    defect_sentence: int | None
    expected: ReasonCode | None


def _quote(fact: str) -> str:
    return fact.rstrip(".")


def _marker(rng: random.Random, number: int, count: int) -> str:
    roll = rng.random()
    if roll < 0.2 and count > 1:
        other = rng.choice([n for n in range(1, count + 1) if n != number])
        return f"[{min(number, other)}, {max(number, other)}]"
    if roll < 0.35 and number < count:
        return f"[{number}-{number + 1}]"
    return f"[{number}]"


def _stitch(rng: random.Random, facts: Sequence[str]) -> str | None:
    """Verbatim pieces of one source that are never contiguous, or None when the source is too short."""
    if len(facts) < 3:
        return None
    i, j = sorted(rng.sample(range(len(facts)), 2))
    a, b = _quote(facts[i]).split(), _quote(facts[j]).split()
    if rng.random() < 0.5:
        return " ".join(a[: max(2, len(a) // 2)]) + " ... " + " ".join(b[len(b) // 2 :])
    if j == i + 1 or len(a) < 8 or len(b) < 9:
        return " ".join(a[: max(2, len(a) // 2)]) + " ... " + " ".join(b[len(b) // 2 :])
    return " ".join(a) + " " + " ".join(b[1:])


def framework_answers(seed: int = 101, per_class: int = 60) -> list[FrameworkAnswer]:
    """The corpus: ``per_class`` answers of each class in :data:`CLASSES`, deterministic from ``seed``."""
    base = generate_corpus(seed=seed, per_class=per_class, classes=("clean",))
    items = [i for i in base.items if i.defect == "clean"]
    out: list[FrameworkAnswer] = []
    for defect in CLASSES:
        for number, item in enumerate(items):
            rng = random.Random(f"{seed}:{defect}:{number}")
            chunks = [pc.chunk for pc in item.record.chunks if pc.status == "complete"]
            facts = [[f.text for f in base.facts[c.id] if f.text in c.text] for c in chunks]
            count = len(chunks)
            sentences = []
            for _ in range(rng.randint(1, 2)):
                k = rng.randrange(count)
                fact = rng.choice(facts[k])
                sentences.append(f'{rng.choice(_LEADS)} "{_quote(fact)}" {_marker(rng, k + 1, count)}.')
            bad = _defective(rng, defect, count, facts)
            at = None
            if bad is not None:
                at = rng.randint(0, len(sentences))
                sentences.insert(at, bad)
            out.append(
                FrameworkAnswer(
                    item_id=f"{defect}-{number:03d}",
                    defect=defect,
                    sources=tuple(c.text for c in chunks),
                    text=" ".join(sentences),
                    defect_sentence=at,
                    expected=_EXPECTED.get(defect),
                )
            )
    return out


def _defective(rng: random.Random, defect: str, count: int, facts: list[list[str]]) -> str | None:
    """The defective sentence of one answer (None for ``clean``); ``facts[k]`` are source ``k + 1``'s sentences."""
    lead = rng.choice(_LEADS)
    if defect == "clean":
        return None
    if defect == "out_of_range":
        k = rng.randrange(count)
        return f'{lead} "{_quote(rng.choice(facts[k]))}" [{count + rng.randint(1, 3)}].'
    if defect == "fabricated_quote":
        k = rng.randrange(count)
        words = _quote(rng.choice(facts[k])).split()
        words.insert(rng.randint(1, len(words) - 1), rng.choice(("reportedly", "notably", "allegedly")))
        return f'{lead} "{" ".join(words)}" [{k + 1}].'
    if defect == "stitched_quote":
        options = [k for k in range(count) if len(facts[k]) >= 3]
        k = rng.choice(options)
        stitched = _stitch(rng, facts[k])
        return f'{lead} "{stitched}" [{k + 1}].'
    home, other = rng.sample(range(count), 2)
    return f'{lead} "{_quote(rng.choice(facts[home]))}" [{other + 1}].'


@dataclass(frozen=True)
class Tally:
    """Per class: answers, defects found with the expected code, defects found at all, clean sentences flagged."""

    answers: int = 0
    found_code: int = 0
    found_any: int = 0
    clean_sentences: int = 0
    clean_flagged: int = 0
    baseline_found: int = 0


def measure(answers: Sequence[FrameworkAnswer], *, baseline: bool = True) -> dict[str, Tally]:
    """Run detect-only mode (free checks, relevance off) on every answer; tally per class."""
    detector = Detector(Guard(relevance="off"))
    builder = _answer_builder() if baseline else None
    tallies: dict[str, Tally] = {}
    for answer in answers:
        found = detector.run(answer.text, list(answer.sources))
        flagged = {f.claim_index for f in found.findings}
        codes = {f.reason for f in found.findings if f.claim_index == answer.defect_sentence}
        sentences = len(found.answer.claims) - (answer.defect_sentence is not None)
        clean_flagged = len(flagged - {answer.defect_sentence})
        t = tallies.get(answer.defect, Tally())
        tallies[answer.defect] = Tally(
            answers=t.answers + 1,
            found_code=t.found_code + (answer.expected in codes),
            found_any=t.found_any + bool(codes),
            clean_sentences=t.clean_sentences + sentences,
            clean_flagged=t.clean_flagged + clean_flagged,
            baseline_found=t.baseline_found + (builder(answer) if builder is not None else 0),
        )
    return tallies


def _answer_builder() -> Callable[[FrameworkAnswer], int] | None:
    """Haystack's ``AnswerBuilder`` as the baseline: 1 when it warns about the answer (an out-of-range marker)."""
    try:
        import logging

        from haystack import Document
        from haystack.components.builders import AnswerBuilder
    except ImportError:
        return None
    builder = AnswerBuilder(reference_pattern=r"\[(\d+)\]")

    def warns(answer: FrameworkAnswer) -> int:
        records: list[logging.LogRecord] = []

        class _Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                records.append(record)

        handler = _Keep()
        log = logging.getLogger("haystack.components.builders.answer_builder")
        log.addHandler(handler)
        try:
            docs = [Document(content=s) for s in answer.sources]
            builder.run(query="q", replies=[answer.text], documents=docs)
        finally:
            log.removeHandler(handler)
        return int(any(r.levelno >= logging.WARNING for r in records))

    return warns


def main(argv: Sequence[str] | None = None) -> None:
    """Print the tallies as a Markdown table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=101)
    parser.add_argument("--per-class", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    tallies = measure(framework_answers(args.seed, args.per_class))
    if args.json:
        print(json.dumps({k: vars(v) for k, v in tallies.items()}, indent=2))
        return
    print(
        "| class | answers | found, expected code | found, any code | clean sentences flagged | AnswerBuilder warns |"
    )
    print("|---|---|---|---|---|---|")
    for name in CLASSES:
        t = tallies[name]
        defects = "" if name == "clean" else f"{t.found_code}/{t.answers}"
        anyc = "" if name == "clean" else f"{t.found_any}/{t.answers}"
        flagged = f"{t.clean_flagged}/{t.clean_sentences}"
        print(f"| {name} | {t.answers} | {defects} | {anyc} | {flagged} | {t.baseline_found}/{t.answers} |")


if __name__ == "__main__":
    main()
