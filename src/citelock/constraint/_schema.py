"""The per-request citation schema: what decoding may emit, built from the assembled :class:`Context`.

Five span policies, strongest first:

- ``quote``: each claim's text *is* a verbatim span of the one chunk it cites (after an optional lead-in from
  :data:`QUOTE_LEAD_INS`): support by construction. Grammar only, like ``substring``.
- ``quote_sentence``: the claim's text is one whole sentence of the chunk it cites: ``anyOf`` per chunk
  ``{text: enum, citations: [{chunk_id: const}]}``. The JSON Schema form of ``quote``, for strict servers.
- ``substring``: a citation's span is any verbatim, non-empty substring of the chosen chunk's text, tied to that
  chunk. Only a grammar can say this (llguidance's substring primitive), so it exists as a grammar only.
- ``sentence``: the span is one of the chosen chunk's sentences: ``anyOf`` per chunk ``{chunk_id: const,
  span: enum}``. Works wherever JSON Schema does, within the engine's limits.
- ``id``: only ``chunk_id`` is constrained (an enum of this prompt's ids); the span is a bounded free string
  checked by the guard afterwards.

Spans are drawn from the chunk's text *normalized* the way guard ① normalizes it (entities decoded, NFC, every
whitespace run one space), so a span the schema allows always passes provenance.

Every backend publishes :class:`BackendLimits` (data, not code). :func:`fit_schema` builds the requested
policy and, if the backend cannot take it, downgrades it along :data:`DOWNGRADES` (``quote`` → ``quote_sentence``
→ ``sentence`` → ``id``; ``substring`` → ``sentence`` → ``id``) *before* anything is sent, recording why on the
schema (and from there on the answer). Built schemas are cached by the context's content hash.

Every policy has the abstention branch ``{"claims":[]}``: the model may say the sources do not contain the answer.
``SchemaOptions(min_claims=1)`` removes it from every form (JSON Schema ``minItems``, both grammars, the pydantic
model, :meth:`CitationSchema.parse_output`), for surfaces that must answer and for tests that need claims.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any

from citelock.constraint._gbnf import clear_gbnf_cache, gbnf_grammar
from citelock.constraint._grammar import (
    QUOTE_LEAD_INS,
    QUOTE_MIN_WORDS,
    Bounds,
    lark_grammar,
    quote_body,
    quote_tails,
    schema_id,
    schema_quote,
    schema_quote_sentence,
    schema_sentence,
)
from citelock.constraint._limits import BackendLimits
from citelock.constraint._policy import (
    DEFAULT_POLICY,
    GRAMMAR_DIALECTS,
    GRAMMAR_ONLY,
    POLICY_ORDER,
    GrammarDialect,
    SpanPolicy,
)
from citelock.errors import ConstraintViolationError, UsageError
from citelock.records import Answer, Citation, Claim, Context
from citelock.text import normalize, split_sentences

__all__ = [
    "DOWNGRADES",
    "QUOTE_LEAD_INS",
    "CitationSchema",
    "SchemaOptions",
    "SchemaStats",
    "build_schema",
    "clear_schema_cache",
    "fit_schema",
]

DOWNGRADES: dict[SpanPolicy, tuple[SpanPolicy, ...]] = {
    "quote": ("quote", "quote_sentence", "sentence", "id"),
    "quote_sentence": ("quote_sentence", "sentence", "id"),
    "substring": ("substring", "sentence", "id"),
    "sentence": ("sentence", "id"),
    "id": ("id",),
}
"""Per requested policy, the policies :func:`fit_schema` tries in order. ``quote`` goes to its sentence form before
giving up support by construction (a ``substring`` grammar is no smaller than a ``quote`` one)."""

_QUOTES = ("quote", "quote_sentence")
_SENTENCES = ("sentence", "quote_sentence")

_CACHE_SIZE = 64


@dataclass(frozen=True)
class SchemaOptions:
    """Bounds of the answer shape, so that small models stop.

    Attributes:
        max_claims: ``maxItems`` of ``claims``.
        max_citations: ``maxItems`` of each claim's ``citations`` (at least one is required).
        max_text_chars: ``maxLength`` of a claim's text (in JSON-escaped characters for the grammar).
        max_span_chars: ``maxLength`` of a free span (``id`` and ``substring`` policies; sentences are enums).
        min_claims: ``minItems`` of ``claims``. ``0`` (the default) keeps the abstention ``{"claims":[]}``; ``1``
            or more removes it from every constraint form, so the answer has claims by construction (for a
            surface that must answer; the guard then still checks that what it says is supported).

    The ``quote`` policies cite one chunk per claim (the one quoted) whatever ``max_citations`` says, and a
    ``quote`` text is at most ``max_text_chars`` after its lead-in.
    """

    max_claims: int = 3
    max_citations: int = 2
    max_text_chars: int = 200
    max_span_chars: int = 160
    min_claims: int = 0

    def __post_init__(self) -> None:
        for name in ("max_claims", "max_citations", "max_text_chars", "max_span_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise UsageError(f"SchemaOptions.{name} must be a positive integer, got {value!r}")
        least = self.min_claims
        if not isinstance(least, int) or isinstance(least, bool) or not 0 <= least <= self.max_claims:
            raise UsageError(
                f"SchemaOptions.min_claims must be an integer from 0 to max_claims={self.max_claims}, got {least!r}"
            )

    @property
    def bounds(self) -> Bounds:
        """The bounds as the grammar builder takes them."""
        return Bounds(self.max_claims, self.max_citations, self.max_text_chars, self.max_span_chars, self.min_claims)

    def max_output_chars(self, longest_id: int, longest_span: int) -> int:
        """An upper bound on the length of any output the schema allows (JSON-escaped characters)."""
        citation = len('{"chunk_id":"","span":""}') + longest_id + longest_span
        claim = len('{"text":"","citations":[]}') + self.max_text_chars + self.max_citations * (citation + 1)
        return len('{"claims":[]}') + self.max_claims * (claim + 1)


@dataclass(frozen=True)
class SchemaStats:
    """Sizes of a built schema, compared against :class:`BackendLimits` before sending.

    Attributes:
        chunks: Chunks the citation may name.
        enum_values: Enum and const values in the JSON Schema (ids, sentences).
        enum_chars: Total characters of those values.
        nesting: Depth of the JSON Schema (objects and arrays).
        properties: Object properties in the JSON Schema, counted over every ``anyOf`` branch.
        grammar_chars: Size of the Lark grammar.
        build_ms: Wall time to build everything, in milliseconds.
    """

    chunks: int
    enum_values: int
    enum_chars: int
    nesting: int
    properties: int
    grammar_chars: int
    build_ms: float


@dataclass(frozen=True, eq=False)
class CitationSchema:
    """The constraint for one request, built from its :class:`Context`.

    Attributes:
        policy: The span policy this schema enforces.
        context_hash: :meth:`Context.content_hash` of the context it was built from.
        ids: The chunk ids a citation may name, in prompt order.
        options: The size bounds.
        sentences: ``sentence``, ``quote_sentence`` and ``quote`` policies: per chunk id, its normalized
            sentences (the allowed spans or claim texts; for ``quote``, what the allowed quotes are tails of).
        bodies: ``substring`` and ``quote`` policies: per chunk id, the normalized text quotes are verbatim in.
        json_schema: Standard JSON Schema (draft 2020-12). Exact for ``id``, ``sentence`` and ``quote_sentence``;
            for ``substring`` and ``quote`` it is a looser shape (only the grammar can express substrings).
        grammar: An llguidance Lark grammar, exact for every policy, with no free whitespace.
        stats: Sizes, for the backend limits.
        excluded: Chunk ids left out of the span alternatives (e.g. empty text: nothing to quote).
        requested_policy: The policy the caller asked for (set by :func:`fit_schema`).
        downgrade_reason: Why ``policy`` is weaker than ``requested_policy``, or None.
        whole_quotes: ``quote`` under an admitted sentence set: each admitted sentence is quoted whole (its
            longest tail within ``max_text_chars``), not from any word, so the quote is the text it was admitted as.
    """

    policy: SpanPolicy
    context_hash: str
    ids: tuple[str, ...]
    options: SchemaOptions
    sentences: dict[str, tuple[str, ...]]
    bodies: dict[str, str]
    json_schema: dict[str, Any]
    grammar: str
    stats: SchemaStats
    excluded: tuple[str, ...] = ()
    requested_policy: SpanPolicy | None = None
    downgrade_reason: str | None = None
    whole_quotes: bool = False

    @cached_property
    def gbnf(self) -> str:
        """:attr:`grammar`'s language in GBNF (llama.cpp's ``grammar``; SGLang and vLLM take it as EBNF)."""
        return gbnf_grammar(
            self.policy,
            self.ids,
            self.options.bounds,
            sentences=self.sentences,
            bodies=self.bodies,
            whole_quotes=self.whole_quotes,
        )

    def grammar_in(self, dialect: GrammarDialect) -> str:
        """The grammar in ``dialect``: ``lark`` (:attr:`grammar`) or ``gbnf`` (:attr:`gbnf`).

        Raises:
            UsageError: an unknown dialect.
        """
        if dialect == "lark":
            return self.grammar
        if dialect == "gbnf":
            return self.gbnf
        raise UsageError(f"unknown grammar dialect {dialect!r}; expected one of {list(GRAMMAR_DIALECTS)}")

    @property
    def exact_json_schema(self) -> bool:
        """True when :attr:`json_schema` alone enforces the policy (not ``substring`` or ``quote``)."""
        return self.policy not in GRAMMAR_ONLY

    def guidance_json_schema(self) -> dict[str, Any]:
        r""":attr:`json_schema` with llguidance's ``x-guidance`` settings: no free whitespace, no ``\\u`` escapes."""
        return {
            **self.json_schema,
            "x-guidance": {
                "whitespace_flexible": False,
                "item_separator": ",",
                "key_separator": ":",
                "json_allowed_escapes": 'nrbtf\\"',
            },
        }

    def max_output_chars(self) -> int:
        """An upper bound on the length of any output this schema allows."""
        longest_id = max((len(json.dumps(i, ensure_ascii=False)) for i in self.ids), default=0)
        if self.policy in _QUOTES:
            if self.policy == "quote":
                text = self.options.max_text_chars + max(len(lead) for lead in QUOTE_LEAD_INS) + 2
            else:
                text = max(
                    (len(json.dumps(s, ensure_ascii=False)) for v in self.sentences.values() for s in v), default=0
                )
            claim = len('{"text":,"citations":[{"chunk_id":}]}') + text + longest_id
            return len('{"claims":[]}') + self.options.max_claims * (claim + 1)
        if self.policy in _SENTENCES:
            longest = max(
                (len(json.dumps(s, ensure_ascii=False)) for spans in self.sentences.values() for s in spans),
                default=0,
            )
        else:
            longest = self.options.max_span_chars
        return self.options.max_output_chars(longest_id, longest)

    @cached_property
    def model(self) -> type[Any]:
        """The pydantic model of the answer shape: ``Literal`` ids; a union of per-chunk models for ``sentence``.

        Built on first use (it is not needed for decoding). For ``substring`` and ``quote`` a validator checks that
        the span (the claim text, for ``quote``) is verbatim in the chosen chunk.
        """
        from citelock.constraint._model import build_model

        return build_model(self)

    def parse_output(self, text: str) -> Answer:
        """Parse a constrained backend's output and verify that the constraint held.

        ``{"claims":[]}`` is the abstention: an :class:`Answer` with no claims and ``abstained=True`` (a violation
        when ``options.min_claims`` is 1 or more). A ``quote``
        claim's one citation gets the claim text without its lead-in as its span, so guard ① checks it.

        Raises:
            ConstraintViolationError: the output is not JSON of the allowed shape, names an id outside this
                prompt, or carries a span (for ``quote``: a claim text) the policy does not allow. A constraint
                that did not hold is always this loud error, never a quiet pass.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConstraintViolationError(
                f"{self.policy} constraint did not hold: the output is not valid JSON ({exc.msg} at character "
                f"{exc.pos}); got {text[:120]!r}"
            ) from None
        problems = self.violations(data)
        if problems:
            shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
            raise ConstraintViolationError(f"{self.policy} constraint did not hold: {shown}")
        quoting = self.policy in _QUOTES
        claims = tuple(
            Claim(
                text=claim["text"],
                citations=tuple(
                    Citation(chunk_id=c["chunk_id"], span=quote_body(claim["text"]) if quoting else c["span"])
                    for c in claim["citations"]
                ),
            )
            for claim in data["claims"]
        )
        return Answer(claims=claims, format="structured", raw=text, span_policy=self.policy, abstained=not claims)

    def violations(self, data: Any) -> list[str]:
        """Everything in parsed output ``data`` that the schema forbids (empty when it conforms)."""
        opts = self.options
        if not isinstance(data, dict) or set(data) != {"claims"}:
            keys = sorted(data) if isinstance(data, dict) else type(data).__name__
            return [f'expected an object with exactly the key "claims", got {keys}']
        claims = data["claims"]
        if not isinstance(claims, list) or not opts.min_claims <= len(claims) <= opts.max_claims:
            return [
                f"'claims' must be a list of {opts.min_claims}..{opts.max_claims} claims, got {_describe(claims)}"
                + (" (min_claims forbids the abstention)" if isinstance(claims, list) and not claims else "")
            ]
        if self.policy in _QUOTES:
            return [p for ci, claim in enumerate(claims) for p in self._quote_problems(f"claims[{ci}]", claim)]
        out: list[str] = []
        allowed = set(self.ids)
        for ci, claim in enumerate(claims):
            where = f"claims[{ci}]"
            if not isinstance(claim, dict) or set(claim) != {"text", "citations"}:
                out.append(f"{where}: expected keys ['citations', 'text'], got {_describe(claim)}")
                continue
            text = claim["text"]
            if not isinstance(text, str) or not 1 <= len(text) <= opts.max_text_chars:
                out.append(f"{where}.text: expected 1..{opts.max_text_chars} characters, got {_describe(text)}")
            cites = claim["citations"]
            if not isinstance(cites, list) or not 1 <= len(cites) <= opts.max_citations:
                out.append(f"{where}.citations: expected 1..{opts.max_citations} items, got {_describe(cites)}")
                continue
            for xi, cite in enumerate(cites):
                out.extend(self._citation_problems(f"{where}.citations[{xi}]", cite, allowed))
        return out

    def _quote_problems(self, where: str, claim: Any) -> list[str]:
        if not isinstance(claim, dict) or set(claim) != {"text", "citations"}:
            return [f"{where}: expected keys ['citations', 'text'], got {_describe(claim)}"]
        cites, text = claim["citations"], claim["text"]
        if not isinstance(cites, list) or len(cites) != 1:
            return [
                f"{where}.citations: a quote cites exactly the one chunk it was copied from, got {_describe(cites)}"
            ]
        cite = cites[0]
        if not isinstance(cite, dict) or set(cite) != {"chunk_id"}:
            return [f"{where}.citations[0]: expected keys ['chunk_id'], got {_describe(cite)}"]
        chunk_id = cite["chunk_id"]
        if not isinstance(chunk_id, str) or chunk_id not in self.ids:
            return [f"{where}.citations[0].chunk_id: {chunk_id!r} is not one of this prompt's quotable chunk ids"]
        if not isinstance(text, str) or not text.strip():
            return [f"{where}.text: expected a non-blank string, got {_describe(text)}"]
        if self.policy == "quote_sentence":
            if text not in self.sentences.get(chunk_id, ()):
                return [f"{where}.text: {text[:60]!r} is not one of chunk {chunk_id!r}'s sentences"]
            return []
        quoted = quote_body(text)
        if len(quoted) > self.options.max_text_chars:
            return [f"{where}.text: a {len(quoted)}-character quote, over max_text_chars={self.options.max_text_chars}"]
        body = self.bodies.get(chunk_id, "")
        if quoted not in body or normalize(quoted) not in body:
            return [f"{where}.text: {quoted[:60]!r} is not verbatim in chunk {chunk_id!r}"]
        return []

    def _citation_problems(self, where: str, cite: Any, allowed: set[str]) -> list[str]:
        if not isinstance(cite, dict) or set(cite) != {"chunk_id", "span"}:
            return [f"{where}: expected keys ['chunk_id', 'span'], got {_describe(cite)}"]
        chunk_id, span = cite["chunk_id"], cite["span"]
        if not isinstance(chunk_id, str) or chunk_id not in allowed:
            return [f"{where}.chunk_id: {chunk_id!r} is not one of this prompt's {len(allowed)} chunk ids"]
        if not isinstance(span, str) or not span.strip():
            return [f"{where}.span: expected a non-blank string, got {_describe(span)}"]
        if self.policy == "sentence":
            if span not in self.sentences.get(chunk_id, ()):
                return [f"{where}.span: {span[:60]!r} is not one of chunk {chunk_id!r}'s sentences"]
        elif len(span) > self.options.max_span_chars:
            return [f"{where}.span: {len(span)} characters, over max_span_chars={self.options.max_span_chars}"]
        elif self.policy == "substring":
            body = self.bodies.get(chunk_id)
            if body is None or span not in body or normalize(span) not in body:
                return [f"{where}.span: {span[:60]!r} is not verbatim in chunk {chunk_id!r}"]
        return []


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)}"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return type(value).__name__


@lru_cache(maxsize=4096)  # a chunk retrieved again (or read by the constraint and the abstention check) is split once
def chunk_sentences(text: str) -> tuple[str, ...]:
    """A chunk's citable sentences: split with :func:`citelock.text.split_sentences`, normalized, de-duplicated.

    Only sentences whose normalized form is verbatim in the normalized chunk are kept (always, in practice), so
    every allowed span passes guard ①.
    """
    body = normalize(text)
    out: dict[str, None] = {}
    for start, end in split_sentences(text):
        sentence = normalize(text[start:end])
        if sentence and sentence in body:
            out[sentence] = None
    return tuple(out)


def _depth(node: Any) -> int:
    if isinstance(node, dict):
        own = 1 if node.get("type") in ("object", "array") else 0
        return own + max((_depth(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return max((_depth(v) for v in node), default=0)
    return 0


def _count_properties(node: Any) -> int:
    if isinstance(node, dict):
        own = len(node["properties"]) if isinstance(node.get("properties"), dict) else 0
        return own + sum(_count_properties(v) for v in node.values())
    if isinstance(node, list):
        return sum(_count_properties(v) for v in node)
    return 0


_AdmitKey = tuple[tuple[str, tuple[str, ...]], ...] | None
_cache: OrderedDict[tuple[str, str, SchemaOptions, _AdmitKey], CitationSchema] = OrderedDict()
_cache_lock = threading.Lock()


def clear_schema_cache() -> None:
    """Forget every cached schema and grammar piece (for benchmarks measuring cold builds)."""
    with _cache_lock:
        _cache.clear()
    clear_gbnf_cache()


def build_schema(
    context: Context,
    policy: SpanPolicy = DEFAULT_POLICY,
    options: SchemaOptions | None = None,
    admitted: Mapping[str, Sequence[str]] | None = None,
) -> CitationSchema:
    """Build the citation schema for ``context`` under ``policy``.

    Built schemas are cached (the last 64, thread-safe) by the hash of the chunks' ids and texts, the policy and
    the options: the schema depends on nothing else, so a later turn over the same chunks (another question, a
    retry, a follow-up) reuses it, grammars included, and gets it with its own ``context_hash``.

    Args:
        context: The assembled context (its chunks are exactly the prompt's chunks).
        policy: ``quote``, ``quote_sentence``, ``substring``, ``sentence`` or ``id``.
        options: Size bounds; defaults to :class:`SchemaOptions`.
        admitted: The admitted sentence set: per chunk id, the normalized sentences (of
            :func:`chunk_sentences`) a claim may quote or cite, best first. Every other sentence, and every chunk
            not named, is excluded by construction (the ``substring`` policy admits a chunk whole when it has an
            admitted sentence, its spans being free substrings; the ``id`` policy ignores the set). The enums
            list them in the given order.
            None admits every sentence.

    Raises:
        UsageError: an unknown policy, an empty context, or a policy other than ``id`` when no chunk has any
            text to quote (or no admitted sentence).
    """
    if policy not in POLICY_ORDER:
        raise UsageError(f"unknown span policy {policy!r}; expected one of {list(POLICY_ORDER)}")
    if not context.chunks:
        raise UsageError("the context has no chunks; a citation schema needs at least one chunk id")
    opts = options or SchemaOptions()
    content_hash = context.content_hash()
    admit = None if admitted is None else tuple((k, tuple(v)) for k, v in admitted.items())
    key = (_chunks_hash(context), policy, opts, admit)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
    if hit is not None:
        return hit if hit.context_hash == content_hash else _rehashed(hit, content_hash)
    schema = _build(context, policy, opts, content_hash, admitted)
    with _cache_lock:
        _cache[key] = schema
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return schema


def _chunks_hash(context: Context) -> str:
    """sha256 over the (id, text) of every chunk, in order: all a schema is built from."""
    payload = json.dumps([[c.id, c.text] for c in context.chunks], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _rehashed(schema: CitationSchema, content_hash: str) -> CitationSchema:
    """A cached schema for another context over the same chunks, with the grammars and model already built."""
    out = replace(schema, context_hash=content_hash)
    for name in ("gbnf", "model"):
        if name in schema.__dict__:
            out.__dict__[name] = schema.__dict__[name]
    return out


def _admit(chunk_id: str, spans: tuple[str, ...], admitted: Mapping[str, Sequence[str]] | None) -> tuple[str, ...]:
    """The chunk's sentences the admitted set keeps, in its order (all of them without a set)."""
    if admitted is None:
        return spans
    own = set(spans)
    return tuple(dict.fromkeys(s for s in admitted.get(chunk_id, ()) if s in own))


def _build(
    context: Context,
    policy: SpanPolicy,
    opts: SchemaOptions,
    content_hash: str,
    admitted: Mapping[str, Sequence[str]] | None = None,
) -> CitationSchema:
    started = time.perf_counter()
    ids = context.ids
    bounds = opts.bounds
    sentences: dict[str, tuple[str, ...]] = {}
    bodies: dict[str, str] = {}
    excluded: list[str] = []
    whole = policy == "quote" and admitted is not None  # a ranked quote is the admitted sentence, whole
    if policy in _SENTENCES:
        for chunk in context.chunks:
            spans = _admit(chunk.id, chunk_sentences(chunk.text), admitted)
            if spans:
                sentences[chunk.id] = spans
            else:
                excluded.append(chunk.id)
        if not sentences:
            raise UsageError(f"no chunk has a sentence to quote; the {policy} policy needs chunk text")
        if policy == "sentence":
            json_schema = schema_sentence(sentences, bounds)
        else:
            json_schema = schema_quote_sentence(sentences, bounds)
        enum_values = len(sentences) + sum(len(s) for s in sentences.values())
        enum_chars = sum(len(i) for i in sentences) + sum(len(x) for s in sentences.values() for x in s)
        grammar = lark_grammar(policy, ids, bounds, sentences=sentences)
    else:
        if policy == "substring":
            for chunk in context.chunks:
                body = normalize(chunk.text)
                if admitted is not None and not _admit(chunk.id, chunk_sentences(chunk.text), admitted):
                    body = ""  # substrings are free within a chunk: a chunk is admitted whole or not at all
                if body:
                    bodies[chunk.id] = body
                else:
                    excluded.append(chunk.id)
            if not bodies:
                raise UsageError("no chunk has text to quote; the substring policy needs chunk text")
        elif policy == "quote":
            for chunk in context.chunks:
                spans = _admit(chunk.id, chunk_sentences(chunk.text), admitted)
                if quote_tails(spans, opts.max_text_chars, whole=admitted is not None):
                    sentences[chunk.id] = spans
                    bodies[chunk.id] = normalize(chunk.text)
                else:
                    excluded.append(chunk.id)
            if not bodies:
                raise UsageError(
                    f"no chunk has a quote of {QUOTE_MIN_WORDS}+ words within max_text_chars="
                    f"{opts.max_text_chars}; the quote policy needs chunk text"
                )
        json_schema = schema_quote(list(bodies), bounds) if policy == "quote" else schema_id(ids, bounds)
        enum_values = len(ids)
        enum_chars = sum(len(i) for i in ids)
        grammar = lark_grammar(policy, ids, bounds, sentences=sentences, bodies=bodies, whole_quotes=whole)
    stats = SchemaStats(
        chunks=len(ids) - len(excluded),
        enum_values=enum_values,
        enum_chars=enum_chars,
        nesting=_depth(json_schema),
        properties=_count_properties(json_schema),
        grammar_chars=len(grammar),
        build_ms=(time.perf_counter() - started) * 1000,
    )
    return CitationSchema(
        policy=policy,
        context_hash=content_hash,
        ids=tuple(i for i in ids if i not in excluded) if policy != "id" else ids,
        options=opts,
        sentences=sentences,
        bodies=bodies,
        json_schema=json_schema,
        grammar=grammar,
        stats=stats,
        excluded=tuple(excluded),
        whole_quotes=whole,
    )


def fit_schema(
    context: Context,
    policy: SpanPolicy,
    limits: BackendLimits,
    options: SchemaOptions | None = None,
    admitted: Mapping[str, Sequence[str]] | None = None,
) -> CitationSchema:
    """Build the strongest schema at or below ``policy`` that fits ``limits``, recording any downgrade.

    ``admitted`` is :func:`build_schema`'s admitted sentence set, applied at every step of the path.

    The path is :data:`DOWNGRADES` of ``policy`` (``quote`` → ``quote_sentence`` → ``sentence`` → ``id``;
    ``substring`` → ``sentence`` → ``id``). The returned schema's ``requested_policy`` is ``policy``
    and its ``downgrade_reason`` says which limit forced each step (None when nothing was downgraded).

    Raises:
        UsageError: the backend cannot constrain at all (``limits.policies`` is empty), or even the ``id``
            schema exceeds its limits (assemble fewer chunks).
    """
    if policy not in POLICY_ORDER:
        raise UsageError(f"unknown span policy {policy!r}; expected one of {list(POLICY_ORDER)}")
    if not limits.constrains:
        raise UsageError("this backend enforces no span policy; it takes no citation schema")
    reasons: list[str] = []
    for candidate in DOWNGRADES[policy]:
        if candidate not in limits.policies:
            reasons.append(f"the backend cannot enforce the {candidate!r} policy")
            continue
        try:
            schema = build_schema(context, candidate, options, admitted)
        except UsageError as exc:
            if candidate == "id":
                raise
            reasons.append(f"{candidate}: {exc}")
            continue
        problem = limits.violation(schema)
        if problem is None:
            fitted = replace(
                schema,
                requested_policy=policy,
                downgrade_reason="; ".join(reasons) if reasons else None,
            )
            for name in ("gbnf", "model"):  # built already (the limit check builds the GBNF): kept
                if name in schema.__dict__:
                    fitted.__dict__[name] = schema.__dict__[name]
            return fitted
        reasons.append(problem)
    raise UsageError(f"no span policy fits this backend's limits ({'; '.join(reasons)}); assemble fewer chunks")
