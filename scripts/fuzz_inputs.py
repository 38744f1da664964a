"""The case generators of the command-line fuzz campaign (``fuzz_cli.py``): what it feeds the commands.

Hypothesis strategies for file contents (answers, prompts, chunk stores, calibrations, datasets), their encodings,
depths and sizes, the kinds of path they are placed at, and option values, with the valid documents they start
from. Nothing here runs a command; ``fuzz_cli.py`` places the contents and runs the cases.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from hypothesis import strategies as st

_CHUNKS = [
    {"id": "c-1", "text": "Revenue grew 12% in 2023."},
    {"id": "c-2", "text": "Freight is paid by the buyer."},
    {"id": "c-10", "text": "The depot shipped 1,200 crates."},
]
_QUESTION = "Did revenue grow?"
_CONTEXT = "".join(f"[{chunk['id']}] {chunk['text']}\n" for chunk in _CHUNKS)
PROMPT = {
    "messages": [
        {"role": "system", "content": "Answer from the context."},
        {"role": "user", "content": f"Context:\n{_CONTEXT}Question: {_QUESTION}"},
    ],
    "chunks": _CHUNKS,
    "question": _QUESTION,
    "request_id": "fuzz-1",
}
"""The valid prompt record the fuzzed answers are checked against (``check --prompt``)."""
ANSWER = {
    "claims": [
        {"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1", "span": "Revenue grew 12%"}]},
        {"text": "The buyer pays freight.", "citations": [{"chunk_id": "c-2"}]},
    ]
}
"""A valid answer to :data:`PROMPT` (``check --answer`` when another input is fuzzed)."""
IDS = ["c-1", "c-2", "c-10", "c-99", "", " ", "c-1\n", "ç-1", "c-1]", "[c-1]", "c" * 300]
"""Chunk ids for citations: the prompt's, then unknown and malformed ones."""


# --- strategies: file contents --------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
"""Any JSON value (NaN and Infinity included: Python's json writes and reads them)."""

TEXTS = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["", " ", "\n", "Revenue grew 12% in 2023.", "x" * 5000, "\u200b", "a\x00b", "é" * 50]),
)


def claim(texts: st.SearchStrategy[Any] = TEXTS) -> st.SearchStrategy[dict[str, Any]]:
    """A claim: well-formed three times in four, else with wrong types or unknown fields."""
    good_citation = st.fixed_dictionaries(
        {"chunk_id": st.sampled_from(IDS[:4])},
        optional={"span": st.one_of(st.none(), TEXTS, st.sampled_from(["Revenue grew 12%", "paid by the buyer"]))},
    )
    good = st.fixed_dictionaries({"text": texts}, optional={"citations": st.lists(good_citation, max_size=3)})
    citation = st.fixed_dictionaries(
        {"chunk_id": st.one_of(st.sampled_from(IDS), st.text(max_size=10), JSON_VALUES)},
        optional={"span": st.one_of(st.none(), TEXTS, JSON_VALUES), "extra": JSON_VALUES},
    )
    mutated = st.fixed_dictionaries(
        {"text": st.one_of(texts, JSON_VALUES)},
        optional={"citations": st.one_of(st.lists(citation, max_size=4), JSON_VALUES), "bogus": JSON_VALUES},
    )
    return st.one_of(good, good, good, mutated)


STRUCTURED = st.one_of(
    st.fixed_dictionaries({"claims": st.lists(claim(), max_size=6)}),
    st.fixed_dictionaries({"claims": st.lists(claim(), max_size=6)}),
    st.fixed_dictionaries(
        {"claims": st.one_of(st.lists(claim(), max_size=6), JSON_VALUES)},
        optional={"span_policy": st.one_of(st.sampled_from(["quote", "substring", "id"]), JSON_VALUES)},
    ),
)
MARKERS = st.sampled_from(
    ["[c-1]", "[1]", "[c-1, c-2]", "[]", "[ , ]", "[c-1,]", '<cite id="c-2">Freight</cite>', "<cite ", '<cite id="x">']
)
FREE_TEXT = st.lists(st.one_of(TEXTS, MARKERS, st.sampled_from([". ", "\n", "! ", "?"])), max_size=30).map("".join)


@st.composite
def deep_json(draw: st.DrawFn) -> bytes:
    """JSON nested from 1 to 200,000 levels, as arrays, objects, or inside an answer's field."""
    depth = draw(st.one_of(st.integers(1, 120), st.integers(90, 1100), st.integers(1000, 200_000)))
    kind = draw(st.sampled_from(["array", "object", "in_claims", "in_text", "unclosed"]))
    if kind == "array":
        text = "[" * depth + "]" * depth
    elif kind == "object":
        text = '{"a":' * depth + "1" + "}" * depth
    elif kind == "in_claims":
        text = '{"claims": [{"text": "x", "citations": ' + "[" * depth + "]" * depth + "}]}"
    elif kind == "in_text":
        text = '{"text": ' + "[" * depth + '"x"' + "]" * depth + "}"
    else:
        text = "[" * depth
    return text.encode()


ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252", "ascii"]


@st.composite
def encoded(draw: st.DrawFn, documents: st.SearchStrategy[Any]) -> bytes:
    """A document written as JSON, then encoded in some encoding (unencodable characters replaced or escaped)."""
    text = json.dumps(draw(documents), ensure_ascii=draw(st.booleans()))
    encoding = draw(st.sampled_from(ENCODINGS))
    return text.encode(encoding, errors=draw(st.sampled_from(["replace", "backslashreplace", "ignore"])))


SPECIAL_BYTES = st.sampled_from(
    [
        b"",
        b"   \n\t",
        codecs.BOM_UTF8,
        codecs.BOM_UTF16_LE,
        codecs.BOM_UTF8 + json.dumps(ANSWER).encode(),
        b'{"claims": [{"text": "\\ud800 lone", "citations": []}]}',
        b'{"text": "caf\xe9"}',
        b'{"text": "ok\\u0000nul [c-1]."}',
        b"\x00" * 64,
        b'{"claims": [], "abstained": "yes"}',
        b'{"claims": []}',
        b"NaN",
        b"[1, 2, 3]",
        b'"just a string"',
        b'{"text": 5}',
        b'{"claims": [' + b'{"text": "Revenue grew 12%.", "citations": [{"chunk_id": "c-1"}]},' * 2000 + b"1]}",
    ]
)


def contents(documents: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """File contents built around ``documents``: as JSON (half the cases), deep, raw bytes, re-encoded, special."""
    as_json = documents.map(lambda d: json.dumps(d).encode())
    return st.one_of(
        as_json,
        as_json,
        as_json,
        as_json,
        as_json,
        JSON_VALUES.map(lambda d: json.dumps(d).encode()),
        deep_json(),
        st.binary(max_size=300),
        encoded(documents),
        SPECIAL_BYTES,
    )


# --- strategies: paths ----------------------------------------------------------------------------------

PATH_KINDS = st.sampled_from(
    ["file"] * 10 + ["stdin"] * 3 + ["odd_name"] * 2 + ["dir", "missing", "long_name", "devnull", "huge", "devzero"]
)
"""Where a fuzzed file is put (``fuzz_cli.place``): mostly a plain file, else standard input or an odd path."""
NAMES = st.binary(min_size=1, max_size=40)
"""Raw bytes for the ``odd_name`` path kind's file name."""


# --- strategies: documents per command and option -------------------------------------------------------


def mutated_prompt() -> st.SearchStrategy[Any]:
    """Prompt records: the valid one's messages and chunks, or mutated ones, with odd fields and values."""
    message = st.fixed_dictionaries(
        {
            "role": st.one_of(st.sampled_from(["system", "user", "assistant", ""]), JSON_VALUES),
            "content": st.one_of(TEXTS, JSON_VALUES),
        },
        optional={"name": JSON_VALUES},
    )
    chunk = st.fixed_dictionaries(
        {"id": st.one_of(st.sampled_from(IDS), JSON_VALUES), "text": st.one_of(TEXTS, JSON_VALUES)},
        optional={"metadata": JSON_VALUES, "rank": JSON_VALUES, "source": JSON_VALUES},
    )
    return st.one_of(
        st.fixed_dictionaries(
            {
                "messages": st.one_of(st.just(PROMPT["messages"]), st.lists(message, max_size=3), JSON_VALUES),
                "chunks": st.one_of(st.just(PROMPT["chunks"]), st.lists(chunk, max_size=4), JSON_VALUES),
            },
            optional={
                "question": st.one_of(TEXTS, JSON_VALUES),
                "request_id": st.one_of(TEXTS, JSON_VALUES),
                "metadata": JSON_VALUES,
                "extra": JSON_VALUES,
            },
        ),
        st.builds(
            lambda d: {**d, "sha256": "0" * 64, "normalized": []}, JSON_VALUES.filter(lambda v: isinstance(v, dict))
        ),
    )


def lines(rows: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """JSON-lines file contents of ``rows`` mixed with other JSON values and text, deep JSON, bytes, specials."""
    line = st.one_of(rows.map(json.dumps), JSON_VALUES.map(json.dumps), st.text(max_size=30), st.just(""))
    return st.one_of(
        st.lists(line, max_size=8).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
        deep_json(),
        st.binary(max_size=200),
        SPECIAL_BYTES,
    )


CHUNK_ROW = st.fixed_dictionaries(
    {"id": st.one_of(st.sampled_from(IDS), JSON_VALUES), "text": st.one_of(TEXTS, JSON_VALUES)},
    optional={"source": JSON_VALUES, "rank": JSON_VALUES, "metadata": JSON_VALUES, "strategy": JSON_VALUES},
)


VALID_CHUNKS = st.lists(
    st.fixed_dictionaries(
        {"id": st.sampled_from(["c-1", "c-2", "c-3", "c-10", "doc/7#2"]), "text": st.text(min_size=1, max_size=60)},
        optional={
            "source": st.text(max_size=8),
            "rank": st.integers(1, 9),
            "metadata": st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
        },
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda row: row["id"],
).map(lambda rows: "\n".join(json.dumps(r) for r in rows).encode("utf-8", "surrogatepass"))


LABEL_ROW = st.fixed_dictionaries(
    {"id": JSON_VALUES, "claim": TEXTS, "passage": TEXTS, "label": st.sampled_from(["yes", "partial", "no", "maybe"])}
)
EXPERTQA_ROW = st.fixed_dictionaries(
    {
        "question": TEXTS,
        "answers": st.one_of(JSON_VALUES, st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=2)),
    }
)


def mostly(valid: list[str], invalid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A valid value three times in four, else an invalid one."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(valid), invalid)


OPTION_VALUES: dict[str, st.SearchStrategy[str]] = {
    "--surface": mostly(
        ["legal", "chat", "*"], st.one_of(st.sampled_from(["", " ", "a\nb", "s\udc80"]), st.text(max_size=12))
    ),
    "--stakes": mostly(["high", "low"], st.one_of(st.sampled_from(["HIGH", "medium", ""]), st.text(max_size=6))),
    "--sample-rate": mostly(
        ["0", "1", "0.5", "1e-9"],
        st.one_of(st.sampled_from(["1.5", "-0.1", "nan", "inf", "abc", ""]), st.floats().map(str)),
    ),
    "--judge": mostly(
        ["lexical", "offline"], st.one_of(st.sampled_from(["llm", "oracle", "", "LEXICAL"]), st.text(max_size=8))
    ),
    "--judge-base-url": st.sampled_from(["ftp://x", "localhost:8080", "", "http://"]),
    "--judge-model": st.sampled_from(["m.gguf", "/nonexistent/m.gguf", ""]),
    "--on-fail": mostly(
        ["block", "drop_claim", "mark"], st.one_of(st.sampled_from(["shred", ""]), st.text(max_size=8))
    ),
    "--escalate-base-url": st.sampled_from(["http://127.0.0.1:9/v1", "nope", ""]),
}
RARE = {"--judge-base-url", "--judge-model", "--escalate-base-url"}
# "\udc80" is what an undecodable byte on the command line becomes (surrogateescape)
REQUEST_IDS = mostly(["fuzz-1"], st.one_of(st.sampled_from(["nope", "", "r\udc80"]), st.text(max_size=10)))


@st.composite
def check_options(draw: st.DrawFn) -> list[str]:
    args: list[str] = []
    for option, values in OPTION_VALUES.items():
        if draw(st.integers(0, 9 if option in RARE else 2)) == 0:
            args += [option, draw(values)]
    return args


# --- dressed claims: a false fact wrapped in talk -------------------------------------------------------------

DRESSING_PREFIXES = [
    "Sure, ", "Sure! ", "Sure thing: ", "Okay, ", "OK. ", "Ok so ", "Certainly: ", "Of course, ", "Absolutely! ",
    "Great question! ", "Good question. ", "Hi! ", "Hello, ", "Thanks for asking. ", "Well, ", "So, ", "Yes, ",
    "Honestly, ", "In short: ", "In summary, ", "To answer your question, ", "Short answer: ", "Answer: ",
    "You should know that ", "You should know ", "You might want to know that ", "Note that ", "Please note: ",
    "Keep in mind that ", "Remember, ", "It is worth noting that ", "It's important to note that ",
    "Did you know that ", "Did you know ", "Believe it or not, ", "As you may know, ", "Let me explain: ",
    "Let me explain. ", "Let me be clear — ", "Let me summarize: ", "Here is what the sources say: ",
    "Here's the thing: ", "Here is the answer: ", "Based on the sources, ", "According to the context, ",
    "From the documents, ", "I can confirm that ", "I can tell you ", "I'd say ", "I'm happy to say that ",
    "The answer is that ", "The short answer is: ",
    "Key point: ", "Bottom line: ", "Takeaway: ", "Fact: ", "Summary: ", "TL;DR: ", "Heads up: ", "Update: ",
    "**Key point:** ", "Important: ", "Key Finding: ",
]  # fmt: skip
"""Talk before a claim: greetings, hedges, lead-ins, labels ending in a colon (each ends where the claim begins)."""
DRESSING_SUFFIXES = [
    "", ".", ":", "?", "!", "...", "?!", " :", ", right?", ", isn't it?", ", didn't it?", ", wasn't it?",
    ", you know?", ", correct?", ", no?", ". I hope this helps!", " - hope this helps.", "! Cheers",
    ". Let me know if you have questions.", ", hope that helps!",
]  # fmt: skip
"""Talk after a claim: closing punctuation, tag questions, pleasantries."""
DRESSING_MARKUP = [
    ("", ""), ("**", "**"), ("__", "__"), ("*", "*"), ("_", "_"), ("`", "`"), ("# ", ""), ("## ", ""),
    ("### ", ""), ("- ", ""), ("* ", ""), ("1. ", ""), ("2) ", ""), ("> ", ""), ('"', '"'), ("\u201c", "\u201d"),
]  # fmt: skip
"""Markup around a claim (or around its dressing)."""
NON_FACTUAL_LINES = [
    "Here is what the sources say:", "I hope this helps!", "Sure!", "Let me explain:", "Great question.",
    "Thanks for asking!", "Let me know if you have other questions.", "Is there anything else I can help with?",
    "In summary:", "Okay.", "Hope this helps.", "Let me check that for you.", "Here's the answer:",
]  # fmt: skip
"""Lines that hold nothing to check: with any dressing they stay non-factual."""


def _cased(text: str, upper: bool) -> str:
    return (text[:1].upper() if upper else text[:1].lower()) + text[1:]


@st.composite
def dressed(draw: st.DrawFn, facts: list[str]) -> str:
    """One of ``facts`` (sentences without final punctuation) in up to three prefixes, two suffixes and markup.

    Markup goes around the whole line or around the claim inside its dressing, case follows the prefix (or
    not), so the combinations are those a model writes and those an attacker tries.
    """
    fact = draw(st.sampled_from(facts))
    prefixes = draw(st.lists(st.sampled_from(DRESSING_PREFIXES), max_size=3))
    suffixes = draw(st.lists(st.sampled_from(DRESSING_SUFFIXES), max_size=2))
    open_, close = draw(st.sampled_from(DRESSING_MARKUP))
    inner = draw(st.booleans())
    claim = _cased(fact, draw(st.booleans()))
    if inner and open_ and not open_.endswith(" "):
        claim = f"{open_}{claim}{close}"
    line = "".join(prefixes) + claim + "".join(suffixes)
    if not inner or open_.endswith(" "):
        line = f"{open_}{line}{close}"
    return _cased(line, True) if draw(st.booleans()) else line


@st.composite
def dressed_non_factual(draw: st.DrawFn) -> str:
    """A line that holds nothing to check, in markup and closing dressing (it must stay non-factual)."""
    line = draw(st.sampled_from(NON_FACTUAL_LINES))
    open_, close = draw(st.sampled_from([m for m in DRESSING_MARKUP if m[0] not in ('"', "\u201c")]))
    return f"{open_}{line}{close}"


FUZZ_FALSE_FACTS = [
    "Revenue grew 15% in 2023", "Revenue grew 12% in 2021", "Revenue fell 12% in 2023",
    "The depot shipped 1,500 crates", "Freight is paid by the seller", "The seller pays freight",
    "Revenue never grew",
    # verbs in no closed list (no -s, no -ed): a heading or a label must not make them talk
    "Sellers pay freight", "The seller bore the freight", "Revenue sank", "The depot lost its crates",
]  # fmt: skip
"""False statements about :data:`PROMPT`'s chunks (it says 12% in 2023, 1,200 crates, freight paid by the buyer)."""
_TRUE_CLAIM = {"text": "Revenue grew 12% in 2023.", "citations": [{"chunk_id": "c-1", "span": "Revenue grew 12%"}]}


def _dressed_answer(line: str, structured: bool, beside: bool) -> dict[str, Any]:
    if structured:
        return {"claims": [{"text": line, "citations": []}, *([_TRUE_CLAIM] if beside else [])]}
    return {"text": line + ("\nRevenue grew 12% in 2023 [c-1]." if beside else "")}


DRESSED_ANSWER = st.builds(_dressed_answer, dressed(FUZZ_FALSE_FACTS), st.booleans(), st.booleans())
"""An answer to :data:`PROMPT` with a dressed false fact, uncited (structured or free text), alone or as the line
above a true cited claim (where a heading reads as a heading, not as the whole answer)."""
# --- strategies: forged derived fields, stripped keyed logs, over-long integers (issue 34) -----------------


def logged_prompt() -> dict[str, Any]:
    """:data:`PROMPT` as the prompt log stores it: a full record with its derived fields."""
    from citelock.prompt import record_from_messages

    record = record_from_messages(
        PROMPT["messages"], PROMPT["chunks"], question=PROMPT["question"], request_id=PROMPT["request_id"]
    )
    data: dict[str, Any] = json.loads(record.model_dump_json())
    return data


_EARLIER = [
    {"role": "user", "content": "How did last year go?"},
    {"role": "assistant", "content": "Revenue fell 3% in 2022, and the depot shipped 900 crates."},
]
"""An earlier exchange: the assistant's words are history, never a retrieved passage."""


def logged_conversation(base: str) -> dict[str, Any]:
    """A logged record of :data:`PROMPT`'s question and chunks after :data:`_EARLIER`, built the ``base`` way.

    ``external``: the messages located by ``record_from_messages`` (the structural checks apply); a bundled
    template's name (``answer_structured``, ``answer_naive``): ``serialize`` + ``with_history`` (the derived
    check renders it again).
    """
    from citelock.prompt import assemble, load_template, record_from_messages, serialize
    from citelock.prompt._serialize import with_history

    if base == "external":
        messages = [PROMPT["messages"][0], *_EARLIER, PROMPT["messages"][1]]
        record = record_from_messages(messages, _CHUNKS, question=_QUESTION, request_id=PROMPT["request_id"])
    else:
        context = assemble(_QUESTION, _CHUNKS)
        record = with_history(serialize(context, template=load_template(base), request_id="fuzz-1"), _EARLIER)
    data: dict[str, Any] = json.loads(record.model_dump_json())
    return data


def _placement_of(data: dict[str, Any], message: int, norm_start: int, norm_end: int) -> dict[str, int]:
    """A placement of the normalized range of a message, its raw offsets mapped as a builder maps them."""
    from citelock.text import raw_offset

    anchors = [tuple(a) for a in data["offset_maps"][message]]
    return {
        "message": message,
        "start": raw_offset(anchors, norm_start),
        "end": raw_offset(anchors, norm_end),
        "norm_start": norm_start,
        "norm_end": norm_end,
    }


def _place_on(data: dict[str, Any], chunk: dict[str, Any], target: str) -> None:
    """Put ``chunk`` on text that is no chunk body: the question, the system prompt, the template's words, or an
    earlier assistant turn (its text set to what is there, every offset consistent). The system prompt and the
    template's words only of a bundled template's record: a caller's own prompt may hold its sources anywhere."""
    bundled = data["template"]["name"] != "external"
    last = len(data["messages"]) - 1
    if target == "question" and data.get("question_placement"):
        q = data["question_placement"]
        where = (q["message"], q["norm_start"], q["norm_end"])
    elif target == "assistant" and any(m["role"] == "assistant" for m in data["messages"]):
        message = next(i for i, m in enumerate(data["messages"]) if m["role"] == "assistant")
        where = (message, 0, len(data["normalized"][message]))
    elif target == "system" and bundled:
        where = (0, 0, data["normalized"][0].index(".") + 1)
    elif target == "template" and bundled:
        at = data["normalized"][last].index("sources")
        where = (last, at, at + len("sources"))
    else:
        return
    message, start, end = where
    chunk["chunk"]["text"] = data["normalized"][message][start:end]
    chunk["status"] = "complete"
    chunk["placement"] = _placement_of(data, message, start, end)


def _forge(data: dict[str, Any], where: str, value: Any) -> None:
    """Set one derived field of a logged record (``where`` names it)."""
    chunk = data["chunks"][value[0] % len(data["chunks"])] if where.startswith("chunk") else None
    if where == "normalized":
        message, at, text = value
        norm = data["normalized"][message % len(data["normalized"])]
        at %= max(len(norm), 1)
        data["normalized"][message % len(data["normalized"])] = norm[:at] + text + norm[at + len(text) :]
    elif where == "offset_maps":
        data["offset_maps"][value[0] % len(data["offset_maps"])] = value[1]
    elif where == "sha256":
        data["sha256"] = value
    elif where == "chunk_offset" and chunk is not None and chunk.get("placement"):
        chunk["placement"][value[1]] += value[2]
    elif where == "chunk_status" and chunk is not None:
        chunk["status"] = value[1]
    elif where == "chunk_text" and chunk is not None:
        chunk["chunk"]["text"] = value[1]
    elif where == "question" and data.get("question_placement"):
        data["question_placement"]["norm_start"] += value
    elif where == "chunk_id" and chunk is not None:
        chunk["chunk"]["id"] = value[1]  # the prompt as sent still writes the old id
    elif where == "chunk_on" and chunk is not None:
        _place_on(data, chunk, value[1])


_FIELDS = ("start", "end", "norm_start", "norm_end", "message")
_NO_BODIES = st.sampled_from(["question", "system", "template", "assistant"])
FORGERIES = st.one_of(
    st.tuples(
        st.just("normalized"), st.tuples(st.integers(0, 3), st.integers(0, 400), st.text(min_size=1, max_size=6))
    ),
    st.tuples(
        st.just("offset_maps"),
        st.tuples(st.integers(0, 3), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=3)),
    ),
    st.tuples(st.just("sha256"), st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)),
    st.tuples(st.just("chunk_offset"), st.tuples(st.integers(0, 5), st.sampled_from(_FIELDS), st.integers(-9, 9))),
    st.tuples(st.just("chunk_status"), st.tuples(st.integers(0, 5), st.sampled_from(["complete", "truncated"]))),
    st.tuples(st.just("chunk_text"), st.tuples(st.integers(0, 5), st.text(min_size=1, max_size=40))),
    st.tuples(st.just("question"), st.integers(-5, 5)),
    st.tuples(st.just("chunk_id"), st.tuples(st.integers(0, 5), st.sampled_from(["c-9", "c-2", "c-10", "x"]))),
    st.tuples(st.just("chunk_on"), st.tuples(st.integers(0, 5), _NO_BODIES)),
)
"""One edit of one derived field of a logged record: (which field, how). ``chunk_id`` renames a chunk in the
record's ``chunks`` (the prompt still says the old id); ``chunk_on`` places a chunk on text that is no chunk body."""

BASES = ("fuzz", "external", "answer_structured", "answer_naive")
"""The records forged: :data:`PROMPT` as logged, and :func:`logged_conversation` built each way."""


@st.composite
def forged_record(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A logged record with one to three derived fields edited, and whether anything actually changed."""
    base = draw(st.sampled_from(BASES))
    original = logged_prompt() if base == "fuzz" else logged_conversation(base)
    data = json.loads(json.dumps(original))
    for where, value in draw(st.lists(FORGERIES, min_size=1, max_size=3)):
        _forge(data, where, value)
    return data, data != original


_SWAPPED_FACTS = [
    ("Revenue grew 15% in 2023", "c-1"),
    ("Revenue grew 12% in 2021", "c-1"),
    ("The depot shipped 1,500 crates", "c-10"),
]


@st.composite
def swapped_question(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a logged record whose question was replaced by one never sent, an answer stating that question's number).

    The question is input, not derived, so the record loads; but a question the messages do not hold excuses no
    number: the false number (cited or not) must be a finding, never a pass.
    """
    fact, chunk_id = draw(st.sampled_from(_SWAPPED_FACTS))
    data = logged_prompt()
    data["question"] = draw(st.sampled_from([f"Is it true that {fact.lower()}?", f"{fact}?", f"Why: {fact}."]))
    data["question_placement"] = None
    citations = [{"chunk_id": chunk_id}] if draw(st.booleans()) else []
    return data, {"claims": [{"text": f"{fact}.", "citations": citations}]}


STRIPS = st.sets(
    st.sampled_from(
        [
            "drop_update_trigger",
            "drop_all_triggers",
            "null_chain_all",
            "null_chain_target",
            "rewrite_target_plain",
            "alg_plain_target",
        ]
    ),
    min_size=1,
    max_size=4,
)
"""What a holder of the schema owner's rights (but not the key) does to a keyed log; the target is record r2."""


@st.composite
def long_integer_document(draw: st.DrawFn) -> tuple[str, bytes]:
    """(which input, its content): a valid answer, prompt or chunk store with an integer of 4,301+ digits inside."""
    which = draw(st.sampled_from(["answer", "prompt", "store"]))
    digits = ("-" if draw(st.booleans()) else "") + "9" * draw(st.integers(4301, 6000))
    if which == "store":
        rows = [json.dumps(row) for row in _CHUNKS]
        at = draw(st.integers(0, len(rows) - 1))
        rows[at] = rows[at][:-1] + f', "n": {digits}}}'
        return which, "\n".join(rows).encode()
    document: Any = json.loads(json.dumps(ANSWER if which == "answer" else PROMPT))
    target = document
    for _ in range(draw(st.integers(0, 2))):  # somewhere inside: the top level, a claim or message, deeper
        lists = [v for v in target.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
        if not lists:
            break
        target = lists[0][0]
    target["fuzz_n"] = 0
    text = json.dumps(document).replace('"fuzz_n": 0', f'"n": {digits}')
    return which, text.encode()
