"""Fuzz the command line: random input files, encodings, depths, sizes, odd paths and option values.

Every case runs a real command in-process (typer's ``CliRunner``) and must end with an exit code of the contract
(``citelock.cli._app.EXIT_CODES``), never 70 (an internal error is a bug), and never with a traceback or an
exception escaping the command. Cases are drawn by hypothesis, one family per input or option; a family that
fails is shrunk to a minimal case and printed. The campaign prints, per family, how many cases ran and the
count of each exit code.

The case generators (hypothesis strategies for contents, paths and option values) are in ``fuzz_inputs.py``
beside this script; this one places the cases, runs them and reports.

Families (``--families``, default all):

- ``answer``: the ``check --answer`` file: mutated structured answers, free text with markers, any JSON value,
  JSON nested up to 200,000 deep, raw bytes, re-encoded documents (UTF-16/32, BOMs, Latin-1), lone surrogate
  escapes, empty and oversized files; as a file with an odd name, ``-`` (standard input), a directory, missing.
- ``prompt``: the ``check --prompt`` file, the same way (valid prompts mutated field by field).
- ``store``: the ``check --store`` chunk-store file (JSON lines).
- ``check_options``: every option of ``check`` with valid and invalid values, databases that are new,
  tampered, not databases or directories, ``--request-id`` replays.
- ``calibration``: the ``check --calibration`` file.
- ``chunks``: ``answer --chunks`` (a scripted backend replaces the model) and ``answer``'s options.
- ``datasets``: ``calibrate --format F FILE`` and ``eval answers --format expertqa FILE``.
- ``databases``: ``metrics --db`` and ``queue list --db`` on fuzzed files.
- ``argv``: random command lines from the commands' own words.
- ``dressed``: ``check --answer`` with one uncited false fact about the prompt's chunks dressed as talk (greetings,
  hedges, lead-ins, markup, tag questions, a final colon or question mark; ``fuzz_inputs.dressed``), placed as the
  ``answer`` family places its files, on a high-stakes surface. A stricter contract: every case whose file was
  read must exit 1 (findings, the answer blocked), never 0.
- ``forged``: ``check --prompt`` a logged record with one to three derived fields edited (normalized copy, offset
  maps, placements, status, chunk text, sha256, a chunk renamed in ``chunks``, a chunk placed on the question, the
  system prompt, the template's words or an earlier assistant turn), the record being ``PROMPT`` as logged or a
  conversation built by ``record_from_messages``, ``answer_structured`` or ``answer_naive``
  (``fuzz_inputs.BASES``): exit 2 whenever anything changed, and nothing appended to --db;
  and, in every case, a record whose question was replaced by one never sent (``fuzz_inputs.swapped_question``),
  checked with an answer stating that question's false number: exit 1 (a finding), never 0.
- ``keyed_logs``: a keyed log stripped by someone without the key (triggers dropped, chain columns NULLed, a record
  rewritten with its plain hashes, a link made plain): ``log verify --key-file`` exits 3, and so does
  ``check --request-id`` on the record touched.
- ``long_ints``: an answer, prompt or chunk store holding an integer of 4,301+ digits: exit 2 naming the file and
  the field.

Usage::

    python scripts/fuzz_cli.py                   # the full campaign (about 10,000 cases)
    python scripts/fuzz_cli.py --scale 0.1       # a tenth of it
    python scripts/fuzz_cli.py --families answer,prompt --seed 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from citelock.cli import app
from citelock.cli._app import EXIT_CODES, EXIT_INTERNAL

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_inputs import (
    ANSWER,
    CHUNK_ROW,
    DRESSED_ANSWER,
    EXPERTQA_ROW,
    FREE_TEXT,
    JSON_VALUES,
    LABEL_ROW,
    NAMES,
    PATH_KINDS,
    PROMPT,
    REQUEST_IDS,
    STRIPS,
    STRUCTURED,
    VALID_CHUNKS,
    check_options,
    contents,
    forged_record,
    lines,
    logged_prompt,
    long_integer_document,
    mutated_prompt,
    swapped_question,
)

PROMPT_CHUNKS = PROMPT["chunks"]
CONTRACT = frozenset(EXIT_CODES) - {EXIT_INTERNAL}
"""The exit codes a fuzzed command may end with (70, an internal error, is a bug)."""

FAMILY_SIZES = {
    "answer": 2400,
    "prompt": 1500,
    "store": 600,
    "check_options": 1800,
    "calibration": 500,
    "chunks": 1200,
    "datasets": 900,
    "databases": 500,
    "argv": 800,
    "dressed": 1000,
    "forged": 600,
    "keyed_logs": 300,
    "long_ints": 300,
}
"""Cases per family in the full campaign (12,400 in all)."""


@dataclass
class Campaign:
    """Runs cases and counts exit codes; a case that breaks the contract raises (and hypothesis shrinks it)."""

    work: Path
    runner: CliRunner = field(default_factory=CliRunner)
    counts: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    cases: int = 0

    def invoke(
        self, family: str, args: list[str], stdin: bytes | None = None, env: dict[str, str] | None = None
    ) -> int:
        """Run ``citelock ARGS`` and check the contract; returns the exit code."""
        result = self.runner.invoke(app, args, input=stdin, env=env)
        self.last_stderr = result.stderr
        self.cases += 1
        code = result.exit_code
        escaped = result.exception if not isinstance(result.exception, SystemExit) else None
        output = result.stdout + result.stderr
        problem = None
        if escaped is not None:
            problem = f"an exception escaped: {type(escaped).__name__}: {escaped}"
        elif "Traceback (most recent call last)" in output:
            problem = "a traceback was printed"
        elif code not in CONTRACT:
            problem = f"exit code {code} is not in the contract {sorted(CONTRACT)}"
        elif code >= 2 and not result.stderr.strip() and "Usage:" not in result.stdout:
            problem = f"exit {code} without a message on stderr (nor the usage, for a bare group command)"
        if problem is not None:
            raise AssertionError(f"{problem}\nargs: {args!r}\nstdin: {stdin!r:.300}\nstderr: {result.stderr[-800:]}")
        self.counts[family][code] += 1
        return code

    def file(self, content: bytes, suffix: str = ".json") -> Path:
        """Write ``content`` to a fresh file in the work folder."""
        self.cases_written = getattr(self, "cases_written", 0) + 1
        path = self.work / f"in-{self.cases_written}{suffix}"
        path.write_bytes(content)
        return path

    def fixture(self, name: str, content: object) -> Path:
        path = self.work / name
        if not path.exists():
            path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
        return path

    @property
    def prompt(self) -> Path:
        return self.fixture("prompt.json", PROMPT)

    @property
    def answer(self) -> Path:
        return self.fixture("answer.json", ANSWER)


@dataclass
class PathCase:
    """A path argument and the standard input it needs."""

    arg: str
    stdin: bytes | None = None


def place(campaign: Campaign, kind: str, content: bytes, suffix: str, draw_name: bytes) -> PathCase:
    """Put ``content`` where ``kind`` says and return the argument naming it."""
    if kind == "stdin":
        return PathCase("-", content)
    if kind == "dir":
        return PathCase(str(campaign.work))
    if kind == "missing":
        return PathCase(str(campaign.work / "no" / "such.json"))
    if kind == "devnull":
        return PathCase(os.devnull)
    if kind == "devzero":
        return PathCase("/dev/zero")
    if kind == "long_name":
        return PathCase(str(campaign.work / ("n" * 300 + suffix)))
    if kind == "huge":
        path = campaign.work / f"huge{suffix}"
        if not path.exists():
            with path.open("wb") as handle:
                handle.truncate(64 * 1024 * 1024 + 1)  # sparse: no disk used
        return PathCase(str(path))
    if kind == "odd_name":
        raw = (draw_name.replace(b"/", b"_").replace(b"\x00", b"_") or b"_")[:200]
        path = os.path.join(os.fsencode(campaign.work), b"odd-" + raw + suffix.encode())
        with open(path, "wb") as handle:
            handle.write(content)
        return PathCase(os.fsdecode(path))
    return PathCase(str(campaign.file(content, suffix)))


# --- families -------------------------------------------------------------------------------------------


def fam_answer(campaign: Campaign) -> Callable[..., None]:
    @given(
        st.one_of(
            contents(st.one_of(STRUCTURED, st.fixed_dictionaries({"text": FREE_TEXT}))),
            FREE_TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")),
        ),
        PATH_KINDS,
        st.sampled_from([".json", ".txt", ""]),
        NAMES,
        st.booleans(),
    )
    def case(content: bytes, kind: str, suffix: str, name: bytes, as_json: bool) -> None:
        where = place(campaign, kind, content, suffix, name)
        args = ["check", "--prompt", str(campaign.prompt), "--answer", where.arg] + (["--json"] if as_json else [])
        campaign.invoke("answer", args, where.stdin)

    return case


def fam_prompt(campaign: Campaign) -> Callable[..., None]:
    @given(contents(mutated_prompt()), PATH_KINDS, st.sampled_from([".json", ""]), NAMES)
    def case(content: bytes, kind: str, suffix: str, name: bytes) -> None:
        where = place(campaign, kind, content, suffix, name)
        campaign.invoke("prompt", ["check", "--prompt", where.arg, "--answer", str(campaign.answer)], where.stdin)

    return case


def fam_store(campaign: Campaign) -> Callable[..., None]:
    @given(lines(CHUNK_ROW), PATH_KINDS, NAMES)
    def case(content: bytes, kind: str, name: bytes) -> None:
        where = place(campaign, kind, content, ".jsonl", name)
        args = ["check", "--prompt", str(campaign.prompt), "--answer", str(campaign.answer), "--store", where.arg]
        campaign.invoke("store", args, where.stdin)

    return case


def databases(campaign: Campaign) -> dict[str, str]:
    """Database paths of every kind: new, an intact log, a tampered log, not a database, a directory."""
    work = campaign.work
    intact = work / "intact.db"
    tampered = work / "tampered.db"
    if not intact.exists():
        for path in (intact, tampered):
            result = campaign.runner.invoke(
                app, ["check", "--prompt", str(campaign.prompt), "--answer", str(campaign.answer), "--db", str(path)]
            )
            assert result.exit_code == 0, result.output
        with sqlite3.connect(tampered) as conn:
            conn.execute("DROP TRIGGER IF EXISTS citelock_prompt_log_no_update")
            conn.execute("UPDATE citelock_prompt_log SET record = replace(record, '12%', '15%')")
        (work / "garbage.db").write_bytes(b"this is not a database" * 10)
    return {
        "new": str(work / f"new-{campaign.cases}.db"),
        "intact": str(intact),
        "tampered": str(tampered),
        "garbage": str(work / "garbage.db"),
        "directory": str(work),
        "missing_dir": str(work / "no" / "such" / "dir" / "x.db"),
        "dash": "-",
        "url": "sqlite:///" + str(work / f"url-{campaign.cases}.db"),
        "bad_url": "mysql://nobody@127.0.0.1:1/x",
    }


def fam_check_options(campaign: Campaign) -> Callable[..., None]:
    dbs = databases(campaign)

    @given(
        check_options(),
        st.sampled_from([None, None, None, *dbs]),
        st.sampled_from(["prompt", "prompt", "prompt", "request_id", "both", "neither"]),
        REQUEST_IDS,
        st.booleans(),
        st.one_of(
            st.just([]),
            st.just([]),
            st.lists(st.sampled_from(["--unknown", "--stakes", "extra-arg", "--db"]), max_size=2),
        ),
    )
    def case(options: list[str], db: str | None, source: str, request_id: str, as_json: bool, noise: list[str]) -> None:
        args = ["check", "--answer", str(campaign.answer), *options, *noise]
        if source in ("prompt", "both"):
            args += ["--prompt", str(campaign.prompt)]
        if source in ("request_id", "both"):
            args += ["--request-id", request_id]
        if db is not None:
            args += ["--db", dbs[db] if db != "new" else f"{dbs['new']}-{campaign.cases}"]
        if as_json:
            args.append("--json")
        campaign.invoke("check_options", args)

    return case


def fam_calibration(campaign: Campaign) -> Callable[..., None]:
    routing = st.fixed_dictionaries(
        {
            "pass_at": st.one_of(st.floats(), JSON_VALUES),
            "fail_below": st.one_of(st.floats(), JSON_VALUES),
            "judge": st.sampled_from(["lexical", "offline", "llm"]),
            "judge_version": st.one_of(st.text(max_size=5), JSON_VALUES),
        }
    )
    document = st.fixed_dictionaries(
        {
            "schema_version": st.one_of(st.just("1"), JSON_VALUES),
            "surfaces": st.dictionaries(st.sampled_from(["*", "legal"]), routing, max_size=2),
        }
    )

    from citelock.judges import LexicalJudge, OfflineJudge

    valid = st.sampled_from(["lexical", "offline"]).flatmap(
        lambda judge: st.fixed_dictionaries(
            {
                "schema_version": st.just("1"),
                "surfaces": st.dictionaries(
                    st.sampled_from(["*", "legal", "chat"]),
                    st.fixed_dictionaries(
                        {
                            "pass_at": st.floats(-1, 2),
                            "fail_below": st.floats(-1, 2),
                            "judge": st.just(judge),
                            "judge_version": st.just(
                                (LexicalJudge() if judge == "lexical" else OfflineJudge()).version
                            ),
                        }
                    ),
                    min_size=1,
                    max_size=2,
                ),
            }
        )
    )

    @given(
        st.one_of(contents(document), valid.map(lambda d: json.dumps(d).encode())),
        PATH_KINDS,
        NAMES,
        st.sampled_from(["lexical", "offline"]),
    )
    def case(content: bytes, kind: str, name: bytes, judge: str) -> None:
        where = place(campaign, kind, content, ".json", name)
        args = ["check", "--prompt", str(campaign.prompt), "--answer", str(campaign.answer), "--surface", "legal"]
        campaign.invoke("calibration", [*args, "--judge", judge, "--calibration", where.arg], where.stdin)

    return case


def _scripted_backends() -> Any:
    """Replace the model factory with a scripted backend (no model is loaded); returns the undo function."""
    from citelock import BackendLimits, FakeBackend
    from citelock.backends import _registry

    real = _registry.make_backend
    outputs = [
        lambda record, schema: {
            "claims": [{"text": "x", "citations": [{"chunk_id": (schema.ids[0] if schema else "c-1")}]}]
        },
        lambda record, schema: "not json at all [c-1].",
        lambda record, schema: {"claims": []},
        lambda record, schema: '{"claims": [',
    ]
    pick = random.Random(0)

    def make(kind: str, *, model: str | None = None, **_: Any) -> Any:
        script = outputs[pick.randrange(len(outputs))]
        if kind == "naive":
            return FakeBackend(script, limits=BackendLimits(policies=()))
        return FakeBackend(script, name=kind, model=model or "scripted")

    _registry.make_backend = make
    return lambda: setattr(_registry, "make_backend", real)


def fam_chunks(campaign: Campaign) -> Callable[..., None]:
    valid = st.sampled_from(
        [
            ["--backend", "naive"],
            ["--backend", "local"],
            ["--policy", "substring"],
            ["--policy", "id"],
            ["--top-k", "2"],
            ["--surface", "docs", "--stakes", "low"],
            ["--surface", "docs", "--judge", "lexical"],
            ["--on-fail", "drop_claim"],
            ["--on-fail", "mark"],
            ["--render", "links"],
            ["--render", "none"],
            ["--json"],
        ]
    )
    invalid = st.sampled_from(
        [
            ["--backend", "remote"],
            ["--base-url", "http://127.0.0.1:9/v1"],
            ["--policy", "nope"],
            ["--top-k", "0"],
            ["--max-tokens", "-5"],
            ["--judge", "oracle"],
            ["--server", "vllm"],
        ]
    )
    rarely_invalid = st.one_of(st.just([]), st.just([]), st.just([]), invalid.map(lambda pair: [pair]))
    options = st.tuples(st.lists(valid, max_size=3), rarely_invalid).map(lambda pair: pair[0] + pair[1])

    @given(
        st.one_of(VALID_CHUNKS, VALID_CHUNKS, lines(CHUNK_ROW)),
        PATH_KINDS,
        NAMES,
        options,
        st.sampled_from(["How long?", "How long?", "How long?", "How long?", "é?" * 200, "", " ", "q\udc80?"]),
    )
    def case(content: bytes, kind: str, name: bytes, extra: list[list[str]], question: str) -> None:
        where = place(campaign, kind, content, ".jsonl", name)
        args = ["answer", "-q", question, "--chunks", where.arg, "--db", str(campaign.work / "answers.db")]
        campaign.invoke("chunks", args + [word for pair in extra for word in pair], where.stdin)

    return case


def fam_datasets(campaign: Campaign) -> Callable[..., None]:
    @given(
        lines(st.one_of(LABEL_ROW, EXPERTQA_ROW)),
        PATH_KINDS,
        NAMES,
        st.sampled_from(["labels", "wice", "expertqa", "attributionbench", "nope", "eval-answers"]),
        st.sampled_from([[], ["--split", "train"], ["--limit", "1"], ["--fit"], ["--bootstrap", "1"]]),
    )
    def case(content: bytes, kind: str, name: bytes, fmt: str, extra: list[str]) -> None:
        where = place(campaign, kind, content, ".jsonl", name)
        if fmt == "eval-answers":
            args = ["eval", "answers", "--format", "expertqa", where.arg, "--judge", "lexical", "--json"]
        else:
            args = ["calibrate", "--format", fmt, where.arg, "--judge", "lexical", "--bootstrap", "2", *extra]
        campaign.invoke("datasets", args, where.stdin)

    return case


def fam_databases(campaign: Campaign) -> Callable[..., None]:
    dbs = databases(campaign)

    @given(
        st.one_of(st.sampled_from(sorted(dbs)), st.binary(max_size=200)),
        st.sampled_from([["metrics"], ["metrics", "--json"], ["queue", "list"], ["queue", "list", "--json"]]),
    )
    def case(db: str | bytes, command: list[str]) -> None:
        target = dbs[db] if isinstance(db, str) else str(campaign.file(db, ".db"))
        campaign.invoke("databases", [*command, "--db", target])

    return case


_WORDS = [
    "check", "answer", "calibrate", "eval", "metrics", "queue", "serve", "list", "show", "resolve", "defects",
    "--answer", "--prompt", "--json", "--db", "--help", "--debug", "--surface", "--judge", "-q", "--chunks",
    "--format", "--stakes", "--sample-rate", "-", "x", "", "1", "--", "-x", "nan", "é", "\udc80",
]  # fmt: skip


def fam_argv(campaign: Campaign) -> Callable[..., None]:
    @given(st.lists(st.one_of(st.sampled_from(_WORDS), st.text(max_size=6)), max_size=6))
    def case(words: list[str]) -> None:
        if "serve" in words or ("eval" in words and ("defects" in words or "compare" in words)):
            words = [w for w in words if w not in ("serve", "defects", "compare")]  # long-running servers/benchmarks
        if words[:1] == ["answer"] or "answer" in words:
            words = [w for w in words if w != "answer"]  # would load the bundled model
        campaign.invoke("argv", words)

    return case


_READABLE = frozenset({"file", "stdin", "odd_name"})
"""Path kinds whose content the command reads as written (the others are missing, empty, huge or a folder)."""


def fam_dressed(campaign: Campaign) -> Callable[..., None]:
    @given(DRESSED_ANSWER, PATH_KINDS, NAMES, st.booleans())
    def case(answer: dict[str, Any], kind: str, name: bytes, as_json: bool) -> None:
        content = json.dumps(answer, ensure_ascii=False).encode("utf-8")
        where = place(campaign, kind, content, ".json", name)
        args = ["check", "--prompt", str(campaign.prompt), "--answer", where.arg, "--surface", "legal"]
        args += ["--stakes", "high", "--judge", "lexical", *(["--json"] if as_json else [])]
        code = campaign.invoke("dressed", args, where.stdin)
        if kind in _READABLE and code != 1:
            raise AssertionError(f"a dressed false fact exited {code}, not 1 (findings): {answer!r}")

    return case


def fam_forged(campaign: Campaign) -> Callable[..., None]:
    @given(forged_record(), st.booleans(), swapped_question())
    def case(forged: tuple[dict[str, Any], bool], with_db: bool, swap: tuple[dict[str, Any], Any]) -> None:
        record, answer = swap  # a question never sent: the record loads, its number is a finding (exit 1), never 0
        args = ["check", "--prompt", str(campaign.file(json.dumps(record).encode()))]
        args += ["--answer", str(campaign.file(json.dumps(answer).encode()))]
        code = campaign.invoke("forged", args)
        assert code == 1, f"a number only a question never sent states exited {code}: {json.dumps(answer)}"
        data, changed = forged
        prompt = campaign.file(json.dumps(data).encode())
        db = campaign.work / f"forged-{campaign.cases}.db"
        args = ["check", "--prompt", str(prompt), "--answer", str(campaign.answer)]
        args += ["--db", str(db)] if with_db else []
        code = campaign.invoke("forged", args)
        if changed:
            assert code == 2, f"a record with forged derived fields exited {code}: {json.dumps(data)[:600]}"
            assert not db.exists() or not _log_rows(db), "a forged record was appended to the prompt log"
        else:
            assert code in (0, 1), f"the unedited record exited {code}: {campaign.last_stderr}"

    return case


def _log_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT name FROM sqlite_master WHERE name = 'citelock_prompt_log'").fetchone()
        return 0 if found is None else int(conn.execute("SELECT count(*) FROM citelock_prompt_log").fetchone()[0])


_KEY = "fuzz-log-key"


def _strip(db: Path, operations: set[str]) -> None:
    """Apply ``operations`` to the keyed log at ``db`` with plain SQL, as a schema owner without the key could."""
    from citelock.store._chain import content_hash

    forged = logged_prompt()
    forged["request_id"] = "r2"
    forged["normalized"][1] = forged["normalized"][1].replace("12%", "15%")
    payload = json.dumps(forged)
    with sqlite3.connect(db) as conn:
        triggers = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        dropped = triggers if "drop_all_triggers" in operations else [t for t in triggers if t.endswith("_no_update")]
        for name in dropped:  # every edit below needs the update trigger gone (what the attacker does first)
            conn.execute(f"DROP TRIGGER {name}")
        chain = "seq = NULL, prev_hash = NULL, chain_hash = NULL, alg = NULL"
        if "null_chain_all" in operations:
            conn.execute(f"UPDATE citelock_prompt_log SET {chain}")
        if "null_chain_target" in operations:
            conn.execute(f"UPDATE citelock_prompt_log SET {chain} WHERE request_id = 'r2'")
        if "alg_plain_target" in operations:
            conn.execute("UPDATE citelock_prompt_log SET alg = 'sha256' WHERE request_id = 'r2' AND alg IS NOT NULL")
        if "rewrite_target_plain" in operations:
            conn.execute(
                "UPDATE citelock_prompt_log SET record = ?, record_sha256 = ? WHERE request_id = 'r2'",
                (payload, content_hash(payload)),
            )


def fam_keyed_logs(campaign: Campaign) -> Callable[..., None]:
    from citelock.prompt import record_from_messages
    from citelock.store import PromptLog

    key_file = campaign.fixture("log.key", _KEY)

    @given(STRIPS)
    def case(operations: set[str]) -> None:
        db = campaign.work / f"keyed-{campaign.cases}.db"
        log = PromptLog(db, key=_KEY)
        base = logged_prompt()
        for rid in ("r1", "r2", "r3"):
            log.append(record_from_messages(base["messages"], PROMPT_CHUNKS, question=base["question"], request_id=rid))
        log.engine.dispose()
        _strip(db, operations)
        verify = campaign.invoke("keyed_logs", ["log", "verify", "--db", str(db), "--key-file", str(key_file)])
        assert verify == 3, f"a keyed log stripped by {sorted(operations)} verified with exit {verify}"
        args = ["check", "--request-id", "r2", "--db", str(db), "--answer", str(campaign.answer)]
        check = campaign.invoke("keyed_logs", args, env={"CITELOCK_LOG_KEY": _KEY})
        assert check == 3, f"check --request-id on a log stripped by {sorted(operations)} exited {check}"

    return case


def fam_long_ints(campaign: Campaign) -> Callable[..., None]:
    @given(long_integer_document(), st.sampled_from(["file", "file", "file", "stdin"]))
    def case(document: tuple[str, bytes], kind: str) -> None:
        which, content = document
        where = place(campaign, kind, content, ".jsonl" if which == "store" else ".json", b"x")
        args = ["check", "--prompt", str(campaign.prompt), "--answer", str(campaign.answer)]
        args = [*args[:2], where.arg, *args[3:]] if which == "prompt" else args
        args = [*args[:4], where.arg] if which == "answer" else args
        args = [*args, "--store", where.arg] if which == "store" else args
        code = campaign.invoke("long_ints", args, where.stdin)
        named = "standard input" if kind == "stdin" else where.arg
        assert code == 2, f"an over-long integer in the {which} exited {code}"
        assert f"{which} file {named}" in campaign.last_stderr and "an integer of" in campaign.last_stderr

    return case


FAMILIES: dict[str, Callable[[Campaign], Callable[..., None]]] = {
    "answer": fam_answer,
    "prompt": fam_prompt,
    "store": fam_store,
    "check_options": fam_check_options,
    "calibration": fam_calibration,
    "chunks": fam_chunks,
    "datasets": fam_datasets,
    "databases": fam_databases,
    "argv": fam_argv,
    "dressed": fam_dressed,
    "forged": fam_forged,
    "keyed_logs": fam_keyed_logs,
    "long_ints": fam_long_ints,
}


@contextmanager
def campaign_folder() -> Iterator[Campaign]:
    """A campaign in a fresh temporary folder, run from inside it, with the model factory scripted."""
    undo = _scripted_backends()
    previous = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="citelock-fuzz-") as tmp:
        os.chdir(tmp)
        try:
            yield Campaign(Path(tmp))
        finally:
            os.chdir(previous)
            undo()


def run_family(campaign: Campaign, name: str, examples: int, seed_value: int) -> None:
    """Run ``examples`` cases of one family (hypothesis shrinks and raises on the first broken contract)."""
    test = FAMILIES[name](campaign)
    configured = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )(test)
    seed(seed_value)(configured)()


def unreachable_cases(campaign: Campaign) -> None:
    """A few cases that need a server that is not there (exit 4); each waits out the client's retries."""
    base = ["check", "--prompt", str(campaign.prompt), "--answer", str(campaign.answer)]
    campaign.invoke("unreachable", [*base, "--judge", "llm", "--judge-base-url", "http://127.0.0.1:9/v1"])
    args = ["answer", "-q", "How long?", "--chunks", "-", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"]
    campaign.invoke(
        "unreachable", [*args, "--db", str(campaign.work / "u.db")], b'{"id": "c-1", "text": "It is 3 m long."}'
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated families to run")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every family's case count")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-unreachable", action="store_true", help="skip the slow unreachable-server cases")
    args = parser.parse_args()
    names = [n.strip() for n in args.families.split(",") if n.strip()]
    started = time.perf_counter()
    with campaign_folder() as campaign:
        for number, name in enumerate(names):
            examples = max(1, round(FAMILY_SIZES[name] * args.scale))
            began = time.perf_counter()
            run_family(campaign, name, examples, args.seed + number)
            print(
                f"{name:<14} {sum(campaign.counts[name].values()):>6} cases in {time.perf_counter() - began:6.1f} s",
                flush=True,
            )
        if not args.no_unreachable:
            unreachable_cases(campaign)
        _report(campaign, time.perf_counter() - started)


def _report(campaign: Campaign, seconds: float) -> None:
    codes = sorted({code for counts in campaign.counts.values() for code in counts})
    print()
    print(f"{'family':<14} {'cases':>7} " + " ".join(f"{'exit ' + str(c):>8}" for c in codes))
    total: Counter[int] = Counter()
    for family, counts in campaign.counts.items():
        total.update(counts)
        print(f"{family:<14} {sum(counts.values()):>7} " + " ".join(f"{counts.get(c, 0):>8}" for c in codes))
    print(f"{'all':<14} {sum(total.values()):>7} " + " ".join(f"{total.get(c, 0):>8}" for c in codes))
    print()
    print(
        f"{sum(total.values())} cases in {seconds:.0f} s: 0 tracebacks, 0 escaped exceptions, 0 internal errors "
        f"(exit {EXIT_INTERNAL}); every exit code in the contract {sorted(CONTRACT)}"
    )
    for code in codes:
        print(f"  exit {code}: {EXIT_CODES[code]}")


if __name__ == "__main__":
    sys.exit(main())
