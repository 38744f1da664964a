"""Generation that answers: the slot check's ranking offered to the constraint and to the prompt.

For a factoid question (:func:`citelock.guard._near_miss.slot_applies`) the pipeline asks :func:`rank_request`
before it builds the constraint. Every sentence of the assembled chunks is scored by the slot check against
every other sentence of the prompt; the top :data:`ADMIT_TOP` that reach :func:`admit_below` form the
**admitted sentence set**. The per-request grammar of the ``quote`` and ``quote_sentence`` policies (where the
claim *is* the quote) admits only those (:func:`citelock.constraint.build_schema`'s ``admitted``): every other
sentence is excluded by construction, so a small model cannot quote the near miss next to the answer. With
them the chunks are also re-assembled best first (the prompt's chunk order), so any backend, constrained or
not, reads the likely answer first; the ``sentence`` schema's enums list every sentence best first. The other
policies keep the caller's chunk order (answers and tests built on it stay valid).

When no sentence qualifies, :func:`none_qualifies` is True: a surface that abstains before generating abstains
(no tokens), through :func:`citelock.guard.should_abstain`. The ``id`` policy takes no sentence set (its spans are
free), and questions that ask for no slot are not ranked.
"""

from __future__ import annotations

from collections.abc import Sequence

from citelock.constraint._schema import chunk_sentences
from citelock.guard._near_miss import RankedSentence, rank_sentences, slot_applies, slot_routing
from citelock.records import Chunk, Context

__all__ = ["ADMIT_TOP", "RankedRequest", "admit_below", "none_qualifies", "rank_request"]

ADMIT_TOP = 3
"""How many sentences the grammar admits per request (the slot check's top ones)."""

_RANKED_POLICIES = frozenset({"quote", "quote_sentence", "sentence", "substring"})
_EXCLUDING = frozenset({"quote", "quote_sentence"})
"""The policies whose grammar admits only the top sentences. ``sentence`` gets the ranking as its enum order and
``substring`` as the prompt's chunk order: a citation of theirs names a span, not the claim, so a near-miss span
beside a claim that answers is no near-miss answer, and answers built elsewhere keep their citations valid."""


def admit_below() -> float:
    """A sentence scoring below this is not admitted: the low-stakes ``fail_below`` (the guard would fail it)."""
    return slot_routing("low").fail_below


class RankedRequest:
    """The ranking of one request: chunks best first, and the admitted sentence set (None: no restriction).

    Attributes:
        chunks: The context's chunks, the one holding the best sentence first (ties keep prompt order).
        admitted: Per chunk id, its admitted sentences (normalized, as the constraint splits them), best first;
            None when the request is not ranked (no slot asked, the ``id`` policy) or nothing qualifies.
        ranked: Every sentence with its score, best first.
    """

    def __init__(
        self, chunks: Sequence[Chunk], admitted: dict[str, list[str]] | None, ranked: Sequence[RankedSentence]
    ) -> None:
        self.chunks = list(chunks)
        self.admitted = admitted
        self.ranked = list(ranked)


def rank_request(context: Context, policy: str | None, top: int = ADMIT_TOP) -> RankedRequest | None:
    """The ranking of an assembled request, or None when it is not ranked (see the module docstring)."""
    question = context.question
    if policy not in _RANKED_POLICIES or not question or not slot_applies(question):
        return None
    ranked = rank_sentences(question, {c.id: chunk_sentences(c.text) for c in context.chunks}, across=True)
    floor = admit_below()
    admitted: dict[str, list[str]] = {}
    if policy in _EXCLUDING:
        for r in ranked[:top]:
            if r.score >= floor:
                admitted.setdefault(r.chunk_id, []).append(r.sentence)
    elif policy == "sentence":  # every sentence stays citable, listed best first (the enum order)
        for r in ranked:
            admitted.setdefault(r.chunk_id, []).append(r.sentence)
    order = list(context.chunks)
    if policy in _EXCLUDING:  # the prompt lists the chunks best first where the grammar is ranked too
        first: dict[str, int] = {}
        for i, r in enumerate(ranked):
            first.setdefault(r.chunk_id, i)
        order.sort(key=lambda c: first.get(c.id, len(ranked)))
    return RankedRequest(order, admitted or None, ranked)


def none_qualifies(question: str | None, chunks: Sequence[str]) -> bool:
    """True when the question asks for a slot and no sentence of ``chunks`` reaches :func:`admit_below`."""
    if not question or not slot_applies(question):
        return False
    best = rank_sentences(question, {str(i): chunk_sentences(t) for i, t in enumerate(chunks)}, across=True)[:1]
    return not best or best[0].score < admit_below()
