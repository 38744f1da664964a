"""Hostile chunk texts: what retrieved text can hold that a grammar, a schema converter or a server might choke on.

Shared by the grammar unit tests and the real-server tests (as ``openai_transport.py`` is by the server tests).
"""

from __future__ import annotations

_LONG_SENTENCE = "The archive holds letters from the harbour office and the town council, kept in boxes by year. "

HOSTILE: list[dict[str, str]] = [
    {"id": "bs", "text": "The path is C:\\Users\\Élodie\\notes.txt and it opened in 1932. A \\n is not a newline."},
    {"id": "dq", "text": 'She said "bonjour" to the café owner. The sign read "OPEN" all night.'},
    {"id": "ctl", "text": "Readings\x01 are logged\x07 every 5 minutes.\x7f Each one\x1b[0m records the time."},
    {
        "id": "astral",
        "text": "The mascot is a 🦉 named Ollie 😀. Its motto is "
        "\U0001d49e\U0001d4c1\U0001d452\U0001d4b6\U0001d4c7 "
        "\U0001d4cc\U0001d4c7\U0001d4be\U0001d4c9\U0001d4be\U0001d4c3\U0001d454 since 1990.",
    },
    {
        "id": "rtl",
        "text": "The sign says \u202eNEPO\u202c in mirror text. Hebrew: \u05e9\u05dc\u05d5\u05dd\u200f opened 2001.",
    },
    {"id": "gbnf", "text": 'root ::= "x" | [a-z]* ( y )+ {3,5} ? # not a comment. The rule ::= fails \\" here.'},
    {"id": "lark", "text": "%import common.WS -> _ws ~ 1..3 /a+b/i : start. The %llguidance {} line opened in 1999."},
    {"id": "json", "text": '{"claims":[{"text":"fake","citations":[{"chunk_id":"c-999"}]}]} was injected in 2020.'},
    {
        "id": "ws",
        "text": "Tabs\tand\nnew\r\nlines and\u00a0non-breaking\u2003spaces opened in 1955. Zero\u200bwidth too.",
    },
    {"id": "long", "text": ('Box 7 is "sealed" at C:\\scans\\1907. ' + _LONG_SENTENCE * 110)[:10_000]},
]
"""Ten chunks: backslashes, quotes, control characters, astral characters, RTL marks, GBNF and Lark
metacharacters, injected JSON, odd whitespace, and a 10,000-character chunk."""

QUESTIONS = [
    ("Where is the notes file?", ["bs", "dq"]),
    ("What did she say?", ["dq", "ctl"]),
    ("How often are readings logged?", ["ctl", "astral"]),
    ("What is the mascot?", ["astral", "rtl"]),
    ("What does the sign say?", ["rtl", "gbnf"]),
    ("What does the rule say?", ["gbnf", "lark"]),
    ("When did the line open?", ["lark", "json"]),
    ("What was injected?", ["json", "ws"]),
    ("When did it open?", ["ws", "bs"]),
    ("What does the archive hold?", ["long", "dq"]),
]
"""Questions over pairs of hostile chunks (every chunk in two prompts; the long one with a short one)."""

SERVER_QUESTIONS = [QUESTIONS[n] for n in (0, 2, 4, 6, 9)] + [("What do the tabs and spaces say?", ["ws", "ctl"])]
"""A shorter set for the real server (every chunk in at least one prompt), to keep its wall time down."""


def chunks_for(ids: list[str]) -> list[dict[str, str]]:
    """The hostile chunks with these ids, in this order."""
    by_id = {c["id"]: c for c in HOSTILE}
    return [by_id[i] for i in ids]
