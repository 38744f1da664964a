"""The seeded defect corpus against the deterministic guard.

Expectations come from the class definitions (see citelock.evals._defects), never from running the guard:
every defective citation of a class the deterministic guard owns must get exactly its reason code, and the
guard must raise nothing on `clean` nor on the judge-owned classes' (valid) citations.
"""

from __future__ import annotations

from collections import Counter

import pytest

from citelock.evals import DEFECT_CLASSES, DefectCorpus, SeededItem, expected_guard_reasons, generate_corpus
from citelock.guard import check
from citelock.text import normalize

PER_CLASS = 60
GUARD_LAYERS = {"provenance", "coverage", "numbers"}


@pytest.fixture(scope="module")
def corpus() -> DefectCorpus:
    return generate_corpus(seed=7, per_class=PER_CLASS)


def _of(corpus: DefectCorpus, defect: str) -> list[SeededItem]:
    return [item for item in corpus.items if item.defect == defect]


def _guard_triples(item: SeededItem, store: frozenset[str] | None) -> list[tuple[int, int | None, str]]:
    report = check(item.record, item.answer, known_ids=store)
    got = [(f.claim_index, f.citation_index, f.reason.value) for f in report.findings if f.layer in GUARD_LAYERS]
    return sorted(got, key=lambda t: (t[0], -1 if t[1] is None else t[1], t[2]))


def _defective_citation(item: SeededItem) -> tuple[str, str | None, str]:
    """(claim text, span, cited id) of the item's seeded defective citation."""
    e = next(e for e in item.expected if e.citation_index is not None)
    claim = item.answer.claims[e.claim_index]
    citation = claim.citations[e.citation_index]
    return claim.text, citation.span, citation.chunk_id


def test_every_class_has_enough_items(corpus: DefectCorpus) -> None:
    counts = Counter(item.defect for item in corpus.items)
    assert set(counts) == set(DEFECT_CLASSES)
    assert all(n >= 50 for n in counts.values()), counts
    assert len({item.item_id for item in corpus.items}) == len(corpus.items)


@pytest.mark.slow
def test_generation_is_deterministic(corpus: DefectCorpus) -> None:
    again = generate_corpus(seed=7, per_class=PER_CLASS)
    assert [i.record.model_dump() for i in again.items] == [i.record.model_dump() for i in corpus.items]
    assert [i.answer for i in again.items] == [i.answer for i in corpus.items]
    other = generate_corpus(seed=8, per_class=3)
    assert [i.answer for i in other.items] != [i.answer for i in corpus.items[: len(other.items)]]


def test_store_is_bigger_than_every_context(corpus: DefectCorpus) -> None:
    for item in corpus.items:
        ids = {pc.id for pc in item.record.chunks}
        assert ids < corpus.store_ids
    assert any(item.record.dropped for item in corpus.items), "some contexts must drop a chunk for the budget"


def test_texts_exercise_escaping_and_unicode(corpus: DefectCorpus) -> None:
    joined = "\n".join(c.text for c in corpus.store)
    for needle in ("&", "<", "“", "ø", "€", "\n"):
        assert needle in joined
    sent = "".join(item.record.messages[1].content for item in corpus.items[:50])
    assert "&amp;" in sent and "&lt;" in sent


def test_free_text_answers_parse_into_the_intended_claims(corpus: DefectCorpus) -> None:
    free = [item for item in corpus.items if item.answer.format == "free_text"]
    assert len(free) >= 100
    for item in free:
        got = tuple((c.text, tuple(x.chunk_id for x in c.citations)) for c in item.answer.claims)
        assert got == item.intended, item.item_id


def test_class_invariants_hold_by_construction(corpus: DefectCorpus) -> None:
    store_text = {c.id: c.text for c in corpus.store}
    for item in _of(corpus, "fabricated_id"):
        _, _, cid = _defective_citation(item)
        assert cid not in corpus.store_ids and cid not in item.record.prompt_ids
    for item in _of(corpus, "stale_id"):
        _, _, cid = _defective_citation(item)
        assert cid in corpus.store_ids and cid not in item.record.prompt_ids
    for item in _of(corpus, "truncated_span"):
        _, span, cid = _defective_citation(item)
        assert span is not None
        placed = next(pc for pc in item.record.chunks if pc.id == cid)
        assert placed.status == "truncated"
        assert normalize(span) in normalize(store_text[cid])
        assert all(normalize(span) not in text for text in item.record.normalized)
    for item in _of(corpus, "question_echo_span"):
        _, span, _ = _defective_citation(item)
        assert span is not None and item.record.question is not None
        assert normalize(span) in normalize(item.record.question)
        assert all(normalize(span) not in normalize(t) for t in store_text.values())
    for item in _of(corpus, "span_not_in_chunk"):
        _, span, _ = _defective_citation(item)
        assert span is not None
        assert all(normalize(span) not in text for text in item.record.normalized)
    for item in _of(corpus, "span_in_other_chunk"):
        e = next(e for e in item.expected if e.citation_index is not None)
        _, span, cid = _defective_citation(item)
        assert span is not None and e.related_chunk_id is not None and e.related_chunk_id != cid
        assert span in store_text[e.related_chunk_id] and span not in store_text[cid]
    for item in _of(corpus, "partial_support"):
        claim, span, cid = _defective_citation(item)
        fact = next(f.text for f in corpus.facts[cid] if claim.startswith(f.text[:-1]))
        assert len(claim) > len(fact) and claim.startswith(fact[:-1] + ", ")
        assert span is None or span == fact


def test_context_scoped_support_follows_the_class_definitions(corpus: DefectCorpus) -> None:
    supported = {"clean", "fabricated_id", "missing_id", "wrong_chunk", "span_not_in_chunk", "span_in_other_chunk"}
    unsupported = {
        "unsupported_prose",
        "double_fault",
        "truncated_span",
        "question_echo_span",
        "partial_support",
        "number_mismatch",
    }
    for item in corpus.items:
        if item.defect in supported:
            assert item.supported, item.item_id
        elif item.defect in unsupported:
            assert not item.supported, item.item_id
    stale = {item.supported for item in _of(corpus, "stale_id")}
    assert stale == {True, False}, "stale ids must cite both in-context claims and claims from the stale chunk"


@pytest.mark.parametrize("defect", DEFECT_CLASSES)
def test_guard_assigns_the_seeded_reason_codes(corpus: DefectCorpus, defect: str) -> None:
    wrong = []
    for item in _of(corpus, defect):
        want = expected_guard_reasons(item, with_store=True)
        got = _guard_triples(item, corpus.store_ids)
        if got != want:
            wrong.append(f"{item.item_id}: expected {want}, guard said {got}")
    assert not wrong, f"{len(wrong)} of {PER_CLASS} wrong:\n" + "\n".join(wrong[:10])


@pytest.mark.parametrize("defect", DEFECT_CLASSES)
def test_without_a_store_stale_and_fabricated_are_id_not_in_prompt(corpus: DefectCorpus, defect: str) -> None:
    wrong = []
    for item in _of(corpus, defect):
        want = expected_guard_reasons(item, with_store=False)
        got = _guard_triples(item, None)
        if got != want:
            wrong.append(f"{item.item_id}: expected {want}, guard said {got}")
    assert not wrong, f"{len(wrong)} of {PER_CLASS} wrong:\n" + "\n".join(wrong[:10])


def test_clean_answers_raise_nothing_at_all(corpus: DefectCorpus) -> None:
    for item in _of(corpus, "clean"):  # relevance off: the corpus draws its questions apart from its claims
        report = check(item.record, item.answer, known_ids=corpus.store_ids, relevance=False)
        assert report.ok and not report.findings, (item.item_id, report.counts)
        assert all(c.passed for c in report.citations)


def test_span_in_other_chunk_names_the_chunk_that_holds_the_span(corpus: DefectCorpus) -> None:
    for item in _of(corpus, "span_in_other_chunk"):
        e = next(e for e in item.expected if e.citation_index is not None)
        report = check(item.record, item.answer, known_ids=corpus.store_ids)
        finding = next(f for f in report.findings if f.reason.value == "SPAN_IN_OTHER_CHUNK")
        assert finding.related_chunk_id == e.related_chunk_id


def test_a_broken_guard_would_fail_this_suite(corpus: DefectCorpus) -> None:
    # The expectations are not derived from the guard: a guard that never flags anything disagrees with them.
    defective = [item for item in corpus.items if expected_guard_reasons(item)]
    assert len(defective) >= 8 * 50
