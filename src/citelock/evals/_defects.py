"""The seeded defect corpus: answers with known, labeled citation defects over a synthetic chunk store.

Deterministic from a seed. A chunk store of several topics (finance, law, medicine, logistics, climate) is
generated from topic vocabularies; each item retrieves a few chunks of one topic, assembles them with
:func:`citelock.assemble` under a character budget (sometimes dropping a chunk, recorded), serializes them
with :func:`citelock.serialize` (or, for ``truncated_span``, logs a prompt some other system assembled and cut
with :func:`citelock.record_from_messages`), and writes an answer with exactly one seeded defect (none for
``clean``) beside zero to two clean claims.

Ground truth is by construction. Every chunk sentence is a unique *fact*. The entailment the benchmark uses:
a claim is supported by a passage iff the claim is one of the passage's fact sentences *as visible in the
prompt*; an invented claim, a fact with a changed number, a fact with an appended clause, and a fact whose
sentence was cut from the prompt are supported by no passage of the context. "Context-scoped supported"
means: supported by some chunk the model could see in this prompt, whatever id the answer cited.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from citelock.evals._topics import TOPICS, Topic
from citelock.prompt import assemble, parse_free_text, record_from_messages, serialize
from citelock.reasons import REASONS, Layer, ReasonCode, codes_in
from citelock.records import Answer, Chunk, Citation, Claim, Context, PromptRecord

__all__ = [
    "DEFECT_CLASSES",
    "GUARD_LAYERS",
    "ClaimTruth",
    "DefectCorpus",
    "ExpectedFinding",
    "Fact",
    "SeededItem",
    "expected_guard_reasons",
    "generate_corpus",
]

DEFECT_CLASSES: tuple[str, ...] = (
    "clean",
    "fabricated_id",
    "stale_id",
    "missing_id",
    "unsupported_prose",
    "wrong_chunk",
    "double_fault",
    "truncated_span",
    "question_echo_span",
    "partial_support",
    "number_mismatch",
    "span_not_in_chunk",
    "span_in_other_chunk",
)

GUARD_LAYERS = frozenset({Layer.PROVENANCE, Layer.COVERAGE, Layer.NUMBERS})
"""Layers of the deterministic guard (free); ``support`` needs a judge."""

_FREE_TEXT_OK = frozenset(
    {
        "clean",
        "fabricated_id",
        "stale_id",
        "missing_id",
        "unsupported_prose",
        "wrong_chunk",
        "double_fault",
        "partial_support",
        "number_mismatch",
    }
)
_FIXED_TIME = datetime(2024, 1, 1, tzinfo=UTC)
_SLOT = re.compile(r"\{(n_(int|dec|pct|year|big)_\d)\}")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_JOINERS = (" ", " ", "\n", "  ", " \n")
_LEADS = ("Here is what the sources say:", "In summary:", "")
_CLOSINGS = ("I hope this helps.", "", "")


@dataclass(frozen=True)
class Fact:
    """One sentence of a chunk, with how it was rendered (so a number can be changed on purpose)."""

    text: str
    template: str
    values: tuple[tuple[str, str], ...]
    chunk_id: str
    numeric: bool


@dataclass(frozen=True)
class ExpectedFinding:
    """A seeded defect: where it is and the reason code that must be assigned to it.

    ``citation_index`` is None for claim-level defects (an uncited claim, or the invented claim of a
    ``double_fault`` whose citation fails provenance so no judge ever sees it).
    """

    claim_index: int
    citation_index: int | None
    reason: ReasonCode
    related_chunk_id: str | None = None

    @property
    def layer(self) -> Layer | None:
        """The guard layer that assigns :attr:`reason` (from :data:`citelock.reasons.REASONS`)."""
        return REASONS[self.reason].layer


@dataclass(frozen=True)
class ClaimTruth:
    """Ground truth for one claim of an answer.

    Attributes:
        factual: The claim states a fact (needs a citation).
        support_ids: Assembled chunks whose text *as visible in the prompt* supports the claim.
        store_support_ids: Store chunks whose full text supports the claim (visible or not).
        supported: Context-scoped faithfulness: ``bool(support_ids)`` for factual claims.
        cited_labels: Per citation, the true verdict of the cited passage for this claim
            (``yes``/``partial``/``no``), or None when the citation cannot resolve to a passage in the prompt.
    """

    factual: bool
    support_ids: tuple[str, ...]
    store_support_ids: tuple[str, ...]
    supported: bool
    cited_labels: tuple[str | None, ...]


@dataclass(frozen=True)
class SeededItem:
    """One generated answer with its seeded defect and ground truth."""

    item_id: str
    defect: str
    topic: str
    record: PromptRecord
    answer: Answer
    expected: tuple[ExpectedFinding, ...]
    truths: tuple[ClaimTruth, ...]
    intended: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def supported(self) -> bool:
        """Context-scoped ground truth: every factual claim is supported by a passage of this prompt."""
        return all(t.supported for t in self.truths if t.factual)


@dataclass(frozen=True)
class DefectCorpus:
    """A generated corpus: the chunk store and the items."""

    seed: int
    store: tuple[Chunk, ...]
    items: tuple[SeededItem, ...]
    facts: dict[str, tuple[Fact, ...]] = field(repr=False, default_factory=dict)

    @property
    def store_ids(self) -> frozenset[str]:
        """Ids of every chunk in the store."""
        return frozenset(c.id for c in self.store)


def expected_guard_reasons(item: SeededItem, *, with_store: bool = True) -> list[tuple[int, int | None, str]]:
    """The deterministic guard's expected findings as sorted ``(claim, citation, reason)`` triples.

    Without a store, ``STALE_ID`` and ``FABRICATED_ID`` are both ``ID_NOT_IN_PROMPT``.
    """
    out = []
    for e in item.expected:
        if e.layer not in GUARD_LAYERS:
            continue
        reason = e.reason
        if not with_store and reason in codes_in("id"):
            reason = ReasonCode.ID_NOT_IN_PROMPT
        out.append((e.claim_index, e.citation_index, reason.value))
    return sorted(out, key=lambda t: (t[0], -1 if t[1] is None else t[1], t[2]))


# ---------------------------------------------------------------------------------------------- the store


def _number(kind: str, rng: random.Random) -> str:
    if kind == "int":
        return str(rng.randint(2, 60))
    if kind == "dec":
        return f"{rng.randint(11, 999) / 10:.1f}".replace(".0", ".5")
    if kind == "pct":
        return str(rng.randint(2, 45))
    if kind == "year":
        return str(rng.randint(2012, 2024))
    return f"{rng.randint(1200, 950000):,}"


def _render(template: str, values: dict[str, str]) -> str:
    text = template.format(**values)
    return text[0].upper() + text[1:]


def _make_fact(topic: Topic, template: str, entity: str, rng: random.Random, chunk_id: str) -> Fact:
    places = rng.sample(topic.places, 2)
    values = {"E": entity, "P": places[0], "Q": places[1], "N": rng.choice(topic.people)}
    for slot, kind in _SLOT.findall(template):
        values[slot] = _number(kind, rng)
    return Fact(
        text=_render(template, values),
        template=template,
        values=tuple(sorted(values.items())),
        chunk_id=chunk_id,
        numeric=bool(_SLOT.search(template)),
    )


def _build_store(seed: int, per_topic: int) -> tuple[list[Chunk], dict[str, tuple[Fact, ...]]]:
    rng = random.Random(f"{seed}:store")
    chunks: list[Chunk] = []
    facts: dict[str, tuple[Fact, ...]] = {}
    seen: set[str] = set()
    for topic in TOPICS:
        for n in range(per_topic):
            chunk_id = f"{topic.prefix}-{n + 1:03d}"
            entity = topic.entities[n % len(topic.entities)]
            templates = [rng.choice(topic.numeric), rng.choice(topic.plain), rng.choice(topic.numeric)]
            if templates[0] == templates[2]:
                templates[2] = topic.numeric[(topic.numeric.index(templates[0]) + 1) % len(topic.numeric)]
            chosen: list[Fact] = []
            for slot, template in enumerate(templates):
                family = topic.plain if slot == 1 else topic.numeric
                start = family.index(template)
                candidates = [family[(start + k) % len(family)] for k in range(len(family))]
                fact = None
                for attempt in range(60):
                    made = _make_fact(topic, candidates[attempt // 12], entity, rng, chunk_id)
                    if made.text not in seen:
                        fact = made
                        break
                if fact is None:  # pragma: no cover - the vocabularies are large enough
                    raise RuntimeError(f"could not make a unique fact from {template!r}")
                seen.add(fact.text)
                chosen.append(fact)
            text = chosen[0].text
            for fact in chosen[1:]:
                text += rng.choice(_JOINERS) + fact.text
            chunks.append(
                Chunk(
                    id=chunk_id,
                    text=text,
                    source=f"seeded://{topic.name}/{chunk_id}",
                    strategy="seeded",
                    metadata={"topic": topic.name, "entity": entity},
                )
            )
            facts[chunk_id] = tuple(chosen)
    return chunks, facts


# ---------------------------------------------------------------------------------------------- one item


@dataclass
class _Spec:
    """A claim being built: text, citations (id, span), ground truth, the seeded defect."""

    text: str
    cites: list[tuple[str, str | None]]
    support_ids: tuple[str, ...]
    store_support_ids: tuple[str, ...]
    cited_labels: tuple[str | None, ...]
    factual: bool = True
    expected: list[tuple[int | None, ReasonCode, str | None]] = field(default_factory=list)


class _Builder:
    """Builds the items of a corpus (shares the store and one RNG per item)."""

    def __init__(self, seed: int, store: list[Chunk], facts: dict[str, tuple[Fact, ...]]) -> None:
        self.seed = seed
        self.store = store
        self.by_id = {c.id: c for c in store}
        self.facts = facts
        self.store_ids = frozenset(self.by_id)
        self.by_topic: dict[str, list[Chunk]] = {}
        for chunk in store:
            self.by_topic.setdefault(str(chunk.metadata["topic"]), []).append(chunk)
        self.fact_home = {f.text: f.chunk_id for fs in facts.values() for f in fs}

    # -- context ---------------------------------------------------------------------------------------

    def context(
        self, rng: random.Random, topic: Topic, question: str | None = None, entity: str | None = None
    ) -> tuple[Context, str]:
        pool = self.by_topic[topic.name]
        lead = rng.choice([c for c in pool if entity is None or c.metadata["entity"] == entity])
        entity = str(lead.metadata["entity"])
        same = [c for c in pool if c.metadata["entity"] == entity and c.id != lead.id]
        others = [c for c in pool if c.metadata["entity"] != entity]
        picked = [lead, *rng.sample(same, min(len(same), rng.randint(1, 2)))]
        picked += rng.sample(others, 5 - len(picked))
        if question is None:
            question = _render(rng.choice(topic.questions), {"E": entity})
        budget = None
        if rng.random() < 0.35:  # a budget one chunk short: assembly drops the last one, recorded
            record = serialize(assemble(question, picked[:-1]))
            budget = sum(len(m.content) for m in record.messages) + 5
        context = assemble(question, picked, max_chars=budget, on_overflow="drop")
        return context, entity

    def stale_id(self, rng: random.Random, context: Context, topic: Topic) -> str:
        dropped = [d.id for d in context.dropped]
        if dropped and rng.random() < 0.5:
            return rng.choice(dropped)
        pool = [c.id for c in self.by_topic[topic.name] if c.id not in context.ids]
        return rng.choice(pool)

    def fabricated_id(self, rng: random.Random, topic: Topic) -> str:
        while True:
            shape = rng.randint(0, 2)
            if shape == 0:
                candidate = f"{topic.prefix}-{rng.randint(500, 999):03d}"
            elif shape == 1:
                candidate = f"c-{rng.randint(1000, 9999)}"
            else:
                candidate = f"doc-{rng.randint(1, 99)}"
            if candidate not in self.store_ids:
                return candidate

    # -- claims ----------------------------------------------------------------------------------------

    def supporters(self, sentence: str, visible: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        in_prompt = tuple(cid for cid, text in visible.items() if sentence in text)
        in_store = tuple(c.id for c in self.store if sentence in c.text)
        return in_prompt, in_store

    def clean_spec(self, rng: random.Random, chunk: Chunk, visible: dict[str, str], fact: Fact | None = None) -> _Spec:
        fact = fact or rng.choice([f for f in self.facts[chunk.id] if f.text in visible[chunk.id]])
        span = fact.text if rng.random() < 0.7 else fact.text.split(",")[0].rstrip(".")
        sup, store_sup = self.supporters(fact.text, visible)
        return _Spec(fact.text, [(chunk.id, span)], sup, store_sup, ("yes",))


def _chunk_numbers(text: str) -> set[Decimal]:
    return {Decimal(m.group().replace(",", "")).normalize() for m in _NUMBER.finditer(text)}


def _alter_number(fact: Fact, chunk_text: str, known: Collection[str], rng: random.Random) -> str:
    """The fact with one number changed to a value the chunk does not contain (and no chunk states)."""
    slots = [(slot, kind) for slot, kind in _SLOT.findall(fact.template)]
    present = _chunk_numbers(chunk_text)
    for _ in range(100):
        values = dict(fact.values)
        slot, kind = rng.choice(slots)
        new = _number(kind, rng)
        if Decimal(new.replace(",", "")).normalize() in present or new == values[slot]:
            continue
        values[slot] = new
        text = _render(fact.template, values)
        if text not in known:
            return text
    raise RuntimeError(f"could not change a number of {fact.text!r}")  # pragma: no cover


def _paraphrase(sentence: str, topic: Topic, rng: random.Random) -> str:
    for old, new in rng.sample(topic.synonyms, len(topic.synonyms)):
        pattern = re.compile(rf"\b{re.escape(old)}\b")
        if pattern.search(sentence):
            return pattern.sub(new, sentence, count=1)
    words = sentence.split(" ")
    return " ".join([words[0], "reportedly", *words[1:]])


def _free_text(specs: Sequence[_Spec], lead: str, closing: str) -> str:
    lines = []
    body = []
    for spec in specs:
        ids = ", ".join(cid for cid, _ in spec.cites)
        text = spec.text
        if ids:
            stem, end = (text[:-1], text[-1]) if text.endswith(".") else (text, "")
            text = f"{stem} [{ids}]{end}"
        body.append(text)
    if lead:
        lines.append(lead)
    lines.append(" ".join(body) + (f" {closing}" if closing else ""))
    return "\n".join(lines)


def _item_context(b: _Builder, rng: random.Random, topic: Topic, defect: str) -> tuple[Context, str, str]:
    """The item's context, its entity and, for ``question_echo_span``, the invented phrase its question quotes."""
    if defect != "question_echo_span":
        context, entity = b.context(rng, topic)
        return context, entity, ""
    entity_probe = rng.choice(b.by_topic[topic.name])
    # The question quotes an invented statement about the retrieved entity; nothing in the context says it.
    entity = str(entity_probe.metadata["entity"])
    phrase = _render(
        rng.choice(topic.invented), {"E": entity, "P": rng.choice(topic.places), "N": rng.choice(topic.people)}
    ).rstrip(".")
    echo_phrase = phrase[0].lower() + phrase[1:] if phrase.startswith("The ") else phrase
    echo_question = f"Is it true that {echo_phrase}?"
    context, entity = b.context(rng, topic, echo_question, entity)
    return context, entity, echo_phrase


def _answer(specs: Sequence[_Spec], lead: str, closing: str, *, free_text: bool) -> Answer:
    """The answer the specs make: free text with ``[id]`` markers, parsed, or structured claims."""
    if free_text:
        return parse_free_text(_free_text(specs, lead, closing))
    claims = []
    if lead:
        claims.append(Claim(text=lead))
    claims += [
        Claim(text=s.text, citations=tuple(Citation(chunk_id=cid, span=span) for cid, span in s.cites)) for s in specs
    ]
    if closing:
        claims.append(Claim(text=closing))
    return Answer(claims=tuple(claims), format="structured")


def _ground_truth(all_specs: Sequence[_Spec]) -> tuple[list[ExpectedFinding], list[ClaimTruth]]:
    """The findings a correct guard reports and the truth of every claim, in claim order."""
    expected: list[ExpectedFinding] = []
    truths: list[ClaimTruth] = []
    for ci, spec in enumerate(all_specs):
        for xi, reason, related in spec.expected:
            expected.append(ExpectedFinding(ci, xi, reason, related))
        truths.append(
            ClaimTruth(
                factual=spec.factual,
                support_ids=spec.support_ids,
                store_support_ids=spec.store_support_ids,
                supported=bool(spec.support_ids) if spec.factual else True,
                cited_labels=spec.cited_labels,
            )
        )
    return expected, truths


def _make_item(b: _Builder, defect: str, number: int) -> SeededItem:
    rng = random.Random(f"{b.seed}:{defect}:{number}")
    topic = TOPICS[(number + DEFECT_CLASSES.index(defect)) % len(TOPICS)]
    context, entity, echo_phrase = _item_context(b, rng, topic, defect)
    chunks = list(context.chunks)
    visible = {c.id: c.text for c in chunks}
    truncated: tuple[Chunk, str] | None = None
    if defect == "truncated_span":
        victim = rng.choice(chunks)
        head = b.facts[victim.id][0].text
        truncated = (victim, head)
        visible[victim.id] = head

    use_free = defect in _FREE_TEXT_OK and rng.random() < 0.35
    n_clean = rng.randint(0, 2)
    specs: list[_Spec] = []
    used: set[str] = set()

    def fresh_clean(exclude: set[str]) -> _Spec:
        options = [
            (c, f)
            for c in chunks
            for f in b.facts[c.id]
            if f.text in visible[c.id] and f.text not in used and c.id not in exclude
        ]
        chunk, fact = rng.choice(options)
        used.add(fact.text)
        return b.clean_spec(rng, chunk, visible, fact)

    defective = _defective_spec(b, rng, defect, topic, context, visible, entity, truncated, echo_phrase, used)
    exclude = {truncated[0].id} if truncated and rng.random() < 0.5 else set()
    for _ in range(n_clean):
        specs.append(fresh_clean(exclude))
    if defective is not None:
        specs.insert(rng.randint(0, len(specs)), defective)
    elif not specs:
        specs.append(fresh_clean(set()))

    lead = rng.choice(_LEADS)
    closing = rng.choice(_CLOSINGS)
    answer = _answer(specs, lead, closing, free_text=use_free)
    # Lead and closing lines are non-factual claims: part of the answer, never defects.
    all_specs: list[_Spec] = []
    if lead:
        all_specs.append(_Spec(lead, [], (), (), (), factual=False))
    all_specs += specs
    if closing:
        all_specs.append(_Spec(closing, [], (), (), (), factual=False))
    expected, truths = _ground_truth(all_specs)
    record = _record(b, context, truncated, f"seed{b.seed}-{defect}-{number:03d}")
    return SeededItem(
        item_id=f"{defect}-{number:03d}",
        defect=defect,
        topic=topic.name,
        record=record,
        answer=answer,
        expected=tuple(expected),
        truths=tuple(truths),
        intended=tuple((s.text, tuple(cid for cid, _ in s.cites)) for s in all_specs),
    )


def _record(b: _Builder, context: Context, truncated: tuple[Chunk, str] | None, request_id: str) -> PromptRecord:
    record = serialize(context, request_id=request_id, metadata={"seeded": True})
    if truncated is not None:
        # Another system assembled this prompt and cut one chunk after its first sentence.
        from xml.sax.saxutils import escape

        victim, head = truncated
        user = record.messages[1].content
        full = escape(victim.text, {'"': "&quot;"})
        cut = escape(head, {'"': "&quot;"})
        assert user.count(full) == 1
        messages = [
            {"role": "system", "content": record.messages[0].content},
            {"role": "user", "content": user.replace(full, cut)},
        ]
        record = record_from_messages(
            messages, context.chunks, question=context.question, request_id=request_id, metadata={"seeded": True}
        )
    return record.model_copy(update={"created_at": _FIXED_TIME})


@dataclass
class _Draw:
    """What one item's defective claim is drawn from: the builder, the item's RNG and context, the facts used."""

    b: _Builder
    rng: random.Random
    topic: Topic
    context: Context
    visible: dict[str, str]
    entity: str
    truncated: tuple[Chunk, str] | None
    echo_phrase: str
    used: set[str]
    chunks: list[Chunk] = field(init=False)

    def __post_init__(self) -> None:
        self.chunks = list(self.context.chunks)

    def entity_chunks(self) -> list[Chunk]:
        """The context's chunks about the item's entity (all of them when none is)."""
        return [c for c in self.chunks if c.metadata["entity"] == self.entity] or self.chunks

    def pick_fact(self, numeric: bool | None = None, exclude: str | None = None) -> tuple[Chunk, Fact]:
        """A visible fact not used yet (marked used), optionally numeric or not and outside chunk ``exclude``."""
        options = [
            (c, f)
            for c in self.chunks
            for f in self.b.facts[c.id]
            if f.text in self.visible[c.id]
            and f.text not in self.used
            and c.id != exclude
            and (numeric is None or f.numeric == numeric)
        ]
        chunk, fact = self.rng.choice(options)
        self.used.add(fact.text)
        return chunk, fact

    def invented(self) -> str:
        """A statement about the entity that no chunk makes."""
        topic = self.topic
        return _render(
            self.rng.choice(topic.invented),
            {"E": self.entity, "P": self.rng.choice(topic.places), "N": self.rng.choice(topic.people)},
        )


def _defective_spec(
    b: _Builder,
    rng: random.Random,
    defect: str,
    topic: Topic,
    context: Context,
    visible: dict[str, str],
    entity: str,
    truncated: tuple[Chunk, str] | None,
    echo_phrase: str,
    used: set[str],
) -> _Spec | None:
    """The item's one defective claim (None for ``clean``), drawn with the item's RNG."""
    if defect == "clean":
        return None
    d = _Draw(b, rng, topic, context, visible, entity, truncated, echo_phrase, used)
    for make in (_id_defect, _support_defect, _span_defect):
        spec = make(d, defect)
        if spec is not None:
            return spec
    raise ValueError(f"unknown defect class {defect!r}; expected one of {DEFECT_CLASSES}")


def _id_defect(d: _Draw, defect: str) -> _Spec | None:
    """A claim whose citation names the wrong id: fabricated, missing or stale (``double_fault``: also unsupported)."""
    if defect in ("fabricated_id", "missing_id"):
        chunk, fact = d.pick_fact()
        spec = d.b.clean_spec(d.rng, chunk, d.visible, fact)
        if defect == "missing_id":
            spec.cites = []
            spec.cited_labels = ()
            spec.expected.append((None, ReasonCode.UNCITED_CLAIM, None))
        else:
            spec.cites = [(d.b.fabricated_id(d.rng, d.topic), spec.cites[0][1])]
            spec.cited_labels = (None,)
            spec.expected.append((0, ReasonCode.FABRICATED_ID, None))
        return spec
    if defect == "stale_id":
        stale = d.b.stale_id(d.rng, d.context, d.topic)
        if d.rng.random() < 0.5:  # the claim comes from the stale chunk: not in this context
            fact = d.rng.choice(d.b.facts[stale])
            sup, store_sup = d.b.supporters(fact.text, d.visible)
            spec = _Spec(fact.text, [(stale, fact.text)], sup, store_sup, (None,))
        else:  # the claim is true to the context, the id is a stale one
            chunk, fact = d.pick_fact()
            spec = d.b.clean_spec(d.rng, chunk, d.visible, fact)
            spec.cites = [(stale, spec.cites[0][1])]
            spec.cited_labels = (None,)
        spec.expected.append((0, ReasonCode.STALE_ID, None))
        return spec
    if defect == "double_fault":
        fabricated = d.rng.random() < 0.5
        bad = d.b.fabricated_id(d.rng, d.topic) if fabricated else d.b.stale_id(d.rng, d.context, d.topic)
        spec = _Spec(d.invented(), [(bad, None)], (), (), (None,))
        spec.expected.append((0, ReasonCode.FABRICATED_ID if fabricated else ReasonCode.STALE_ID, None))
        spec.expected.append((None, ReasonCode.UNSUPPORTED, None))
        return spec
    return None


def _support_defect(d: _Draw, defect: str) -> _Spec | None:
    """A claim its cited chunk does not (fully) support: invented, the wrong chunk, partly, a changed number."""
    if defect == "unsupported_prose":
        chunk = d.rng.choice(d.entity_chunks())
        span = d.rng.choice(d.b.facts[chunk.id]).text
        spec = _Spec(d.invented(), [(chunk.id, span)], (), (), ("no",))
        spec.expected.append((0, ReasonCode.UNSUPPORTED, None))
        return spec
    if defect == "wrong_chunk":
        home, fact = d.pick_fact(numeric=False)
        other = d.rng.choice([c for c in d.chunks if c.id != home.id])
        span = next(f.text for f in d.b.facts[other.id] if not f.numeric)
        sup, store_sup = d.b.supporters(fact.text, d.visible)
        spec = _Spec(fact.text, [(other.id, span)], sup, store_sup, ("no",))
        spec.expected.append((0, ReasonCode.WRONG_CHUNK, home.id))
        return spec
    if defect == "partial_support":
        chunk, fact = d.pick_fact()
        claim = f"{fact.text[:-1]}, {d.rng.choice(d.topic.extensions)}."
        spec = _Spec(claim, [(chunk.id, fact.text)], (), (), ("partial",))
        spec.expected.append((0, ReasonCode.PARTIAL_SUPPORT, None))
        return spec
    if defect == "number_mismatch":
        chunk, fact = d.pick_fact(numeric=True)
        claim = _alter_number(fact, chunk.text, d.b.fact_home, d.rng)
        quote = fact.text if d.rng.random() < 0.5 else None
        spec = _Spec(claim, [(chunk.id, quote)], (), (), ("no",))
        spec.expected.append((0, ReasonCode.NUMBER_MISMATCH, None))
        return spec
    return None


def _span_defect(d: _Draw, defect: str) -> _Spec | None:
    """A claim whose span is not where it says: cut off, only in the question, paraphrased, in another chunk."""
    if defect == "truncated_span":
        assert d.truncated is not None
        victim, _head = d.truncated
        fact = d.rng.choice(d.b.facts[victim.id][1:])
        d.used.add(fact.text)
        sup, store_sup = d.b.supporters(fact.text, d.visible)
        spec = _Spec(fact.text, [(victim.id, fact.text)], sup, store_sup, (None,))
        spec.expected.append((0, ReasonCode.SPAN_TRUNCATED, None))
        return spec
    if defect == "question_echo_span":
        chunk = d.rng.choice(d.entity_chunks())
        claim = d.echo_phrase[0].upper() + d.echo_phrase[1:] + "."
        spec = _Spec(claim, [(chunk.id, d.echo_phrase)], (), (), (None,))
        spec.expected.append((0, ReasonCode.SPAN_ONLY_IN_QUESTION, None))
        return spec
    if defect == "span_not_in_chunk":
        chunk, fact = d.pick_fact()
        span = _paraphrase(fact.text, d.topic, d.rng)
        sup, store_sup = d.b.supporters(fact.text, d.visible)
        spec = _Spec(fact.text, [(chunk.id, span)], sup, store_sup, (None,))
        spec.expected.append((0, ReasonCode.SPAN_NOT_IN_CHUNK, None))
        return spec
    if defect == "span_in_other_chunk":
        home, fact = d.pick_fact()
        other = d.rng.choice([c for c in d.chunks if c.id != home.id])
        sup, store_sup = d.b.supporters(fact.text, d.visible)
        spec = _Spec(fact.text, [(other.id, fact.text)], sup, store_sup, (None,))
        spec.expected.append((0, ReasonCode.SPAN_IN_OTHER_CHUNK, home.id))
        return spec
    return None


def generate_corpus(
    seed: int = 0,
    per_class: int = 60,
    *,
    classes: Sequence[str] = DEFECT_CLASSES,
    store_per_topic: int = 40,
) -> DefectCorpus:
    """Generate the seeded defect corpus.

    Args:
        seed: Everything (store, contexts, answers) is a deterministic function of the seed.
        per_class: Answers per defect class.
        classes: Which classes to generate (default: all of :data:`DEFECT_CLASSES`).
        store_per_topic: Chunks per topic in the store (each context holds five at most).

    Returns:
        A :class:`DefectCorpus`; item ``k`` of a class is the same whatever ``per_class`` is.

    Raises:
        ValueError: an unknown class name or a non-positive count.
    """
    unknown = [c for c in classes if c not in DEFECT_CLASSES]
    if unknown:
        raise ValueError(f"unknown defect classes {unknown}; expected names from {DEFECT_CLASSES}")
    if per_class < 1 or store_per_topic < 10:
        raise ValueError(f"per_class must be >= 1 and store_per_topic >= 10, got {per_class}, {store_per_topic}")
    store, facts = _build_store(seed, store_per_topic)
    builder = _Builder(seed, store, facts)
    items = tuple(_make_item(builder, defect, n) for defect in classes for n in range(per_class))
    return DefectCorpus(seed=seed, store=tuple(store), items=items, facts=facts)
