r"""The citation grammar in GBNF: what the llama.cpp server takes as ``grammar``, and SGLang and vLLM as EBNF.

The same language as the llguidance Lark grammar of :func:`~citelock.constraint._grammar.lark_grammar`, for
every span policy, spelled in the GBNF dialect of llama.cpp (``grammars/README.md``): ``rule ::= ...``,
double-quoted literals, ``[...]`` classes, ``( )``, ``?`` and ``{m,n}``. xgrammar (SGLang's and vLLM's default
grammar engine) reads this dialect as its EBNF, and llguidance converts it (``grammar_from("ebnf", ...)``).

Retrieved text is untrusted, so every literal is escaped here and nowhere else (:func:`gbnf_literal`): quotes
and backslashes are escaped and control characters written as ``\\xHH``, whatever the chunk holds (quotes,
backslashes, control characters, astral characters, RTL marks, GBNF's own metacharacters).

GBNF has no substring primitive (llguidance's ``%regex {"substring_chunks": ...}``), so the ``substring`` span of
a chunk is spelled as a trie: every run of the chunk's word pieces that starts on a non-blank piece and is at most
``max_span_chars`` JSON-escaped characters long, each a path from the root, every node a place the span may end.
Its size grows with the chunk's length times ``max_span_chars``; :class:`BackendLimits.max_grammar_chars` bounds it
and :func:`~citelock.constraint._schema.fit_schema` downgrades a grammar that is too big, with the reason.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from citelock.constraint._grammar import ABSTENTION, QUOTE_LEAD_INS, QUOTE_MIN_WORDS, Bounds, json_body, word_pieces
from citelock.errors import InputError

__all__ = ["clear_gbnf_cache", "gbnf_grammar", "gbnf_literal"]

_JSON_CHAR = r'[^"\\\x00-\x1F\x7F] | "\\" ["\\bfnrt]'
"""One character of a JSON string body (no ``\\u`` escapes), as :data:`JSON_STRING_CHAR` says for Lark."""

_WHITE_SPACE = r"\x09-\x0D\x20\x85\xA0" + "\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""Unicode White_Space, what a regex ``\\s`` matches: a free span may not start with one. Characters past U+00FF
are written as themselves (see :func:`gbnf_literal` on ``\\u`` escapes)."""

_SPAN_START = rf'[^"\\\x00-\x1F\x7F{_WHITE_SPACE}] | "\\" ["\\]'
"""The first character of a free span (``id`` policy), as :data:`SPAN_START_CHAR` says for Lark."""


def gbnf_literal(text: str) -> str:
    r"""A GBNF string literal matching ``text`` exactly.

    ``"`` and ``\`` are escaped; control characters (C0, DEL and C1) become ``\xHH``; every other character is
    written as itself (UTF-8 in the request). Not ``\uXXXX``: llguidance's GBNF reader (vLLM's and SGLang's
    guidance backends) drops the leading zeros of ``\u00E9`` and then cannot read it.

    Raises:
        InputError: ``text`` holds a lone surrogate (not Unicode text: no UTF-8 output can ever match it).
    """
    if _NEEDS_ESCAPE.search(text) is None:  # most literals: nothing to escape
        return f'"{text}"'
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise InputError(
                f"text holds a lone surrogate U+{code:04X} (not valid Unicode); no output can match it: {text[:60]!r}"
            )
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f-\x9f\ud800-\udfff]')
"""A character :func:`gbnf_literal` writes other than as itself (or refuses)."""


def _lit(text: str) -> str:
    return gbnf_literal(text)


def _repeat(item: str, most: int, least: int = 1) -> str:
    """``item`` once, then ``least - 1`` to ``most - 1`` more times, comma-separated."""
    return item if most <= 1 else f'{item} ("," {item}){{{max(least - 1, 0)},{most - 1}}}'


def _claims(bounds: Bounds) -> str:
    """The claims list: ``min_claims`` to ``max_claims`` claims; with ``min_claims=0`` it may be empty (abstention)."""
    claims = _repeat("claim", bounds.max_claims, bounds.min_claims)
    return f"({claims})?" if bounds.min_claims == 0 else claims


def _up_to(item: str, low: int, high: int) -> str:
    if high <= 0:
        return ""
    return f"({item}){{{low},{high}}}"


def gbnf_grammar(
    policy: str,
    ids: Sequence[str],
    bounds: Bounds,
    *,
    sentences: Mapping[str, Sequence[str]] | None = None,
    bodies: Mapping[str, str] | None = None,
    whole_quotes: bool = False,
) -> str:
    """A GBNF grammar for ``policy`` (``quote``, ``quote_sentence``, ``substring``, ``sentence``, ``id``).

    The arguments are those of :func:`~citelock.constraint._grammar.lark_grammar`, and the language is the same:
    compact JSON, bounded counts and lengths, the abstention ``{"claims":[]}`` unless ``bounds.min_claims`` is 1
    or more.

    Raises:
        ValueError: an unknown policy, or a quote policy with nothing to quote.
        InputError: a chunk or id holds a lone surrogate, or no chunk has a ``substring`` span to cite while
            ``bounds.min_claims`` forbids the abstention.
    """
    open_claims, close_claims = _lit('{"claims":['), _lit("]}")
    lines = [f"root ::= {open_claims} {_claims(bounds)} {close_claims}"]
    if policy in ("quote", "quote_sentence"):
        lines.append("claim ::= " + _lit('{"text":') + " qclaim")
        lines.extend(_quote_rules(policy, bounds, sentences or {}, whole_quotes))
        return "\n".join(lines) + "\n"
    lines.append(
        "claim ::= "
        + _lit('{"text":"')
        + f" jchar{{1,{bounds.max_text_chars}}} "
        + _lit('","citations":[')
        + " "
        + _repeat("cit", bounds.max_citations)
        + " "
        + _lit("]}")
    )
    lines.append(f"jchar ::= {_JSON_CHAR}")
    if policy == "id":
        lines.append("cit ::= " + _lit('{"chunk_id":') + " cid " + _lit(',"span":"') + " span " + _lit('"}'))
        lines.append("cid ::= " + " | ".join(_lit(json.dumps(i, ensure_ascii=False)) for i in ids))
        rest = _up_to("jchar", 0, bounds.max_span_chars - 1)
        lines.append(f"span ::= spanstart {rest}".rstrip())
        lines.append(f"spanstart ::= {_SPAN_START}")
        return "\n".join(lines) + "\n"
    alternatives: list[str] = []
    if policy == "sentence":
        for n, (chunk_id, spans) in enumerate((sentences or {}).items()):
            head = _lit('{"chunk_id":' + json.dumps(chunk_id, ensure_ascii=False) + ',"span":')
            choices = " | ".join(_lit(json.dumps(s, ensure_ascii=False)) for s in spans)
            lines.append(f"cit-{n} ::= {head} ({choices}) {_lit('}')}")
            alternatives.append(f"cit-{n}")
    elif policy == "substring":
        for n, (chunk_id, body) in enumerate((bodies or {}).items()):
            head = _lit('{"chunk_id":' + json.dumps(chunk_id, ensure_ascii=False) + ',"span":"')
            span = _substring_rules(f"s{n}", body, bounds.max_span_chars)
            if not span:
                continue
            lines.append(f"cit-{n} ::= {head} s{n} " + _lit('"}'))
            lines.extend(span)
            alternatives.append(f"cit-{n}")
    else:
        raise ValueError(f"unknown span policy {policy!r}")
    if not alternatives:  # no chunk has a span to cite (e.g. only control characters): only the abstention is left
        if bounds.min_claims:
            raise InputError(
                f"no chunk has a {policy} span to cite (every chunk is blank or control characters), and "
                f"min_claims={bounds.min_claims} forbids the abstention: use the sentence or id policy"
            )
        return f"root ::= {_lit(ABSTENTION)}\n"
    lines.append("cit ::= " + " | ".join(alternatives))
    return "\n".join(lines) + "\n"


def _can_start(piece: str) -> bool:
    """A span may start with this JSON-escaped piece: not blank, not a control character's escape."""
    first = piece[0]
    if first == "\\":
        return piece[:2] in ('\\"', "\\\\")
    return not first.isspace() and 0x20 <= ord(first) != 0x7F


_Trie = dict[str, "_Trie"]


_NAME = "\x00"
"""Where a chunk's rule name goes in its cached rules: never in a rule's text (literals write it as ``\\x00``)."""
_SPAN_CACHE_CHARS = 8_000_000
_span_cache: OrderedDict[tuple[str, int], str] = OrderedDict()
_span_cache_chars = 0
_span_cache_lock = threading.Lock()


def clear_gbnf_cache() -> None:
    """Forget every chunk's cached substring rules (for benchmarks measuring cold builds)."""
    global _span_cache_chars
    with _span_cache_lock:
        _span_cache.clear()
        _span_cache_chars = 0


def _substring_rules(name: str, body: str, most: int) -> list[str]:
    """The substring rules of a chunk, cached per ``(body, most)``: a chunk retrieved again costs a lookup.

    Two spellings of the same language, the shorter sent: :func:`_chain_rules` (linear in the chunk when the
    whole chunk fits in ``most``, the usual case for retrieved passages) and :func:`_trie_rules` (shares the
    runs' common prefixes, which can win on a chunk far longer than ``most``).

    The cache is an LRU bounded by the characters it holds (:data:`_SPAN_CACHE_CHARS`), safe across threads.
    """
    global _span_cache_chars
    key = (body, most)
    with _span_cache_lock:
        block = _span_cache.get(key)
        if block is not None:
            _span_cache.move_to_end(key)
    if block is None:
        block = _smaller("\n".join(_chain_rules(_NAME, body, most)), "\n".join(_trie_rules(_NAME, body, most)))
        with _span_cache_lock:
            if key not in _span_cache and len(block) + len(body) <= _SPAN_CACHE_CHARS:
                _span_cache[key] = block
                _span_cache_chars += len(block) + len(body)
                while _span_cache_chars > _SPAN_CACHE_CHARS:
                    (old_body, _), old = _span_cache.popitem(last=False)
                    _span_cache_chars -= len(old) + len(old_body)
    return [block.replace(_NAME, name)] if block else []


def _trie_rules(name: str, body: str, most: int) -> list[str]:
    """Rules matching every non-blank run of ``body``'s pieces of at most ``most`` escaped characters.

    The runs form a trie. A node whose continuations branch is a rule of its own (``NAME`` the root, ``NAME-K``
    the others, ``K`` in hex); a run without branches is written inline as nested optional groups. Named rules
    rather than nested groups for the branching part: llama.cpp counts the rules a repeated group generates and
    refuses a ``( ... )?`` over 2,000 of them (``MAX_REPETITION_THRESHOLD``); an inline chain generates at most
    :data:`_INLINE_CHAIN` rules. Empty when no piece can start a span within the bound.
    """
    pieces = word_pieces(body)
    root: _Trie = {}
    for start, piece in enumerate(pieces):
        if not _can_start(piece):
            continue
        node, total = root, 0
        for step in pieces[start:]:
            total += len(step)
            if total > most:
                break
            node = node.setdefault(step, {})
    if not root:
        return []
    return _TrieWriter(name).rules(root)


def _smaller(chains: str, trie: str) -> str:
    return chains if len(chains) <= len(trie) else trie


def _chain_rules(name: str, body: str, most: int) -> list[str]:
    """Rules matching the same runs as :func:`_trie_rules`, as chains of one rule per piece.

    A run starting at piece ``s`` may end on any piece up to ``last(s)``, the last one within ``most`` escaped
    characters of it; ``last`` never decreases with ``s``. The starts sharing one ``last`` share one chain
    ``NAME-K ::= "piece" NAME-K+1?`` (every piece a place the span may end, the chain stopping at ``last``), and
    ``NAME`` picks the chain rule of each start. A chunk that fits in ``most`` is one chain: one rule per piece
    instead of a trie with a path per start (the trie grows with the chunk's length times ``most``). Empty when
    no piece can start a span within the bound.
    """
    pieces = word_pieces(body)
    ends = [0]
    for piece in pieces:
        ends.append(ends[-1] + len(piece))
    groups: dict[int, list[int]] = {}  # last piece -> the starts whose runs may reach it and no further
    for start, piece in enumerate(pieces):
        if _can_start(piece) and len(piece) <= most:
            groups.setdefault(bisect_right(ends, ends[start] + most) - 2, []).append(start)
    if not groups:
        return []
    literals: dict[str, str] = {}
    lines: list[str] = []
    entries: list[str] = []
    count = 0
    for last, starts in groups.items():
        first = starts[0]
        names = [f"{name}-{count + 1 + k:x}" for k in range(last - first + 1)]
        count += len(names)
        for k, at in enumerate(range(first, last + 1)):
            piece = pieces[at]
            literal = literals.get(piece)
            if literal is None:
                literal = literals[piece] = gbnf_literal(piece)
            lines.append(f"{names[k]} ::= {literal} {names[k + 1]}?" if at < last else f"{names[k]} ::= {literal}")
        entries.extend(names[start - first] for start in starts)
    return [f"{name} ::= " + " | ".join(entries), *lines]


_INLINE_CHAIN = 16
"""The longest run without branches written inline: each of its optional groups is a rule llama.cpp generates, and
llguidance's reader refuses groups nested past about 30 deep."""


class _TrieWriter:
    """Writes one chunk's trie as rules, each node visited once.

    A chunk's word pieces recur in many runs, so each piece's literal is escaped once, and whether a node is a
    short chain (and its inline spelling) is worked out once per node, not once per walk down it.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._literals: dict[str, str] = {}
        self._depth: dict[int, int] = {}  # id(node) -> length of its branch-free run (over the limit: capped)
        self._inline: dict[int, str] = {}  # id(node) -> its run as nested optional groups

    def _lit(self, piece: str) -> str:
        literal = self._literals.get(piece)
        if literal is None:
            literal = self._literals[piece] = gbnf_literal(piece)
        return literal

    def _chain_depth(self, node: _Trie) -> int:
        """The pieces in ``node``'s run before it ends (0: a leaf); over :data:`_INLINE_CHAIN` if it branches."""
        path: list[_Trie] = []
        depth = 0
        while node:
            known = self._depth.get(id(node))
            if known is not None:
                depth = known
                break
            if len(node) > 1:
                depth = _INLINE_CHAIN + 1
                break
            path.append(node)
            node = next(iter(node.values()))
        for step in reversed(path):
            depth = min(depth + 1, _INLINE_CHAIN + 1)
            self._depth[id(step)] = depth
        return depth

    def _nested(self, node: _Trie) -> str:
        """``("a" ("b" ("c")?)?)?`` for a branch-free run ``a b c``: any prefix of it, the empty one included."""
        path: list[tuple[_Trie, str]] = []
        out = ""
        while node:
            known = self._inline.get(id(node))
            if known is not None:
                out = known
                break
            piece, child = next(iter(node.items()))
            path.append((node, piece))
            node = child
        for step, piece in reversed(path):
            out = f"({self._lit(piece)}{' ' + out if out else ''})?"
            self._inline[id(step)] = out
        return out

    def rules(self, root: _Trie) -> list[str]:
        """The rules of the trie under ``root`` (``NAME`` the root, ``NAME-K`` the branching nodes below it)."""
        lines: list[str] = []
        pending: list[tuple[str, _Trie]] = [(self._name, root)]
        count = 0
        while pending:
            rule, node = pending.pop()
            parts = []
            for piece, child in node.items():
                if not child:
                    parts.append(self._lit(piece))
                elif self._chain_depth(child) <= _INLINE_CHAIN:
                    parts.append(self._lit(piece) + " " + self._nested(child))
                else:
                    count += 1
                    child_rule = f"{self._name}-{count:x}"
                    pending.append((child_rule, child))
                    parts.append(f"{self._lit(piece)} {child_rule}?")
            lines.append(f"{rule} ::= " + " | ".join(parts))
        return lines


def _quote_rules(policy: str, bounds: Bounds, sentences: Mapping[str, Sequence[str]], whole: bool = False) -> list[str]:
    """The rules of the two quote policies (see :func:`~citelock.constraint._grammar.lark_grammar`)."""
    lines: list[str] = []
    alternatives: list[str] = []
    leads = " | ".join(_lit(json_body(lead)) for lead in QUOTE_LEAD_INS)
    for n, (chunk_id, source) in enumerate(sentences.items()):
        tail = _lit(',"citations":[{"chunk_id":' + json.dumps(chunk_id, ensure_ascii=False) + "}]}")
        if policy == "quote_sentence":
            choices = " | ".join(_lit(json.dumps(s, ensure_ascii=False)) for s in source)
            lines.append(f"q-{n} ::= ({choices}) {tail}")
            alternatives.append(f"q-{n}")
            continue
        entries = _quote_chains(n, source, bounds.max_text_chars, lines, whole)
        if not entries:
            continue
        quote = _lit('"')
        lines.append(f"q-{n} ::= {quote} ({leads})? (" + " | ".join(entries) + f") {quote} {tail}")
        alternatives.append(f"q-{n}")
    if not alternatives:
        raise ValueError(f"the {policy} grammar needs at least one chunk to quote")
    lines.append("qclaim ::= " + " | ".join(alternatives))
    return lines


def _quote_chains(n: int, source: Sequence[str], most: int, lines: list[str], whole: bool = False) -> list[str]:
    """Per sentence, a chain of word rules; the entries are the words a quote may start at.

    The quotes are exactly :func:`~citelock.constraint._grammar.quote_tails`: tails of a sentence that start at a
    word, have at least :data:`QUOTE_MIN_WORDS` words and at most ``most`` JSON-escaped characters (with
    ``whole``, only the longest of each sentence).
    """
    seen: set[str] = set()
    entries: list[str] = []
    for k, sentence in enumerate(source):
        words = sentence.split(" ")
        used = False
        for start in range(len(words) - QUOTE_MIN_WORDS + 1):
            tail = " ".join(words[start:])
            if not words[start] or len(json_body(tail)) > most or tail in seen:
                continue
            seen.add(tail)
            entries.append(f"t-{n}-{k}-{start}")
            used = True
            if whole:
                break
        if not used:
            continue
        first = min(int(e.rsplit("-", 1)[1]) for e in entries if e.startswith(f"t-{n}-{k}-"))
        for i in range(first, len(words)):
            word = json_body(words[i])
            if i + 1 < len(words):
                lines.append(f"t-{n}-{k}-{i} ::= {_lit(word + ' ')} t-{n}-{k}-{i + 1}")
            else:
                lines.append(f"t-{n}-{k}-{i} ::= {_lit(word)}")
    return entries
