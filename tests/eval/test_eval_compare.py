"""The naive-vs-constrained harness: loading ExpertQA passages, per-mode accounting, resume, the report."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock.backends import FakeBackend, Generation
from citelock.constraint import BackendLimits
from citelock.evals._compare import QAItem, load_expertqa, run_compare, summarize_compare
from citelock.evals._report import render_compare_report, write_compare_report
from citelock.records import Chunk, Verdict


def _expertqa_file(tmp_path: Path) -> Path:
    rows = [
        {
            "question": "Why is the sky blue?",
            "answers": {
                "rr_gs_gpt4": {
                    "claims": [
                        {
                            "claim_string": "a",
                            "evidence": [
                                "[1] http://x\n\nRayleigh scattering & air.",
                                "[2] http://y\n\nShort waves scatter more.",
                            ],
                            "support": "Complete",
                        },
                        {
                            "claim_string": "b",
                            "evidence": ["[1] http://x\n\nRayleigh scattering & air."],
                            "support": "Partial",
                        },
                    ]
                }
            },
        },
        {
            "question": "Q2?",
            "answers": {"post_hoc_gs_gpt4": {"claims": [{"evidence": ["[1] u\n\nP one."], "support": "Missing"}]}},
        },
        {
            "question": "Q3?",
            "answers": {"bing_chat": {"claims": [{"evidence": ["[1] u\n\nP."], "support": "Complete"}]}},
        },
    ]
    path = tmp_path / "val.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_load_expertqa_dedupes_passages_and_orders_rr_first(tmp_path: Path) -> None:
    items = load_expertqa(_expertqa_file(tmp_path))
    assert [i.system for i in items] == ["rr_gs_gpt4", "post_hoc_gs_gpt4"]
    first = items[0]
    assert [c.id for c in first.chunks] == ["e1", "e2"]
    assert first.chunks[0].text == "Rayleigh scattering & air." and first.chunks[0].source == "http://x"
    assert load_expertqa(_expertqa_file(tmp_path), kinds=["rr"], limit=1) == items[:1]


class _YesIfVerbatim:
    name = "test-judge"
    version = "0"

    def judge(self, claim: str, passage: str) -> Verdict:
        label = "yes" if claim.rstrip(".") in passage else "no"
        return Verdict(label=label, raw=label, judge=self.name, version=self.version)


def _modes() -> dict[str, object]:
    naive = FakeBackend(
        lambda record, schema: "Rayleigh scattering makes it blue [e9]. Short waves scatter more [e2]. Air is thin.",
        limits=BackendLimits(policies=()),
    )
    constrained = FakeBackend(
        lambda record, schema: {
            "claims": [{"text": "Short waves scatter more.", "citations": [{"chunk_id": "e2", "span": "Short waves"}]}]
        }
    )
    broken = FakeBackend(lambda record, schema: "{not json", limits=BackendLimits(policies=()), enforced=False)

    def run(backend: FakeBackend, policy: str):  # type: ignore[no-untyped-def]
        return lambda q, chunks: citelock.answer(q, chunks, backend=backend, policy=policy, render="none")  # type: ignore[arg-type]

    return {"naive": run(naive, "id"), "substring": run(constrained, "substring"), "broken": run(broken, "id")}


def test_per_mode_accounting_and_resume(tmp_path: Path) -> None:
    item = QAItem(
        "q001",
        "Why is the sky blue?",
        "rr_x",
        (Chunk(id="e1", text="Rayleigh scattering & air."), Chunk(id="e2", text="Short waves scatter more.")),
    )
    modes = _modes()
    journal = tmp_path / "answers.jsonl"
    rows, resumed = run_compare([item], modes, _YesIfVerbatim(), journal_path=journal, header={"t": 1}, progress=False)  # type: ignore[arg-type]
    assert resumed == 0 and len(rows) == 3
    s = summarize_compare(rows, list(modes))
    assert s["naive"]["fabricated"] == 1 and s["naive"]["citations"] == 2
    assert s["naive"]["uncited"] == 1
    assert s["naive"]["judged"] == 1 and s["naive"]["supported"] == 1
    assert s["substring"]["fabricated"] == 0 and s["substring"]["non_verbatim"] == 0
    assert s["substring"]["clean_answers"] == 1
    assert s["broken"]["parsed"] == 0 and sum(s["broken"]["failures"].values()) == 1
    again, resumed = run_compare([item], modes, None, journal_path=journal, header={"t": 1}, progress=False)  # type: ignore[arg-type]
    assert resumed == 3 and again == rows
    path, text = write_compare_report(
        tmp_path / "out", {"command": "citelock eval compare"}, s, {}, seconds=1, resumed=0
    )
    assert path.is_file() and (tmp_path / "out" / "compare_rates.png").stat().st_size > 0
    assert "fabricated ids" in text and "1/2 (50.0%)" in text


class _CutAtMaxTokens(FakeBackend):
    """A scripted backend whose every generation reports it stopped at max_tokens."""

    def generate(self, record: Any, schema: Any, *, max_tokens: int) -> Generation:
        return dataclasses.replace(super().generate(record, schema, max_tokens=max_tokens), finish_reason="length")


def _answer_with(backend: FakeBackend) -> Any:
    return lambda q, chunks: citelock.answer(q, chunks, backend=backend, policy="id", render="none")


def test_hit_max_tokens_counts_answers_that_did_not_parse(tmp_path: Path) -> None:
    item = QAItem("q001", "Why is the sky blue?", "rr_x", (Chunk(id="e1", text="Rayleigh scattering & air."),))
    naive = BackendLimits(policies=())
    backends = {
        # Prose cut short still parses: counted before the fix too.
        "naive_parsed": _CutAtMaxTokens(lambda record, schema: "Rayleigh scattering [e1]. And", limits=naive),
        # Truncated output that does not parse (UnparsedAnswerError carries the generation).
        "naive_unparsed": _CutAtMaxTokens(lambda record, schema: '{"claims": [{"text": "Ray', limits=naive),
        # A constrained answer cut short: citelock.answer refuses it (RuntimeFailure) before parsing.
        "constrained_cut": _CutAtMaxTokens(lambda record, schema: '{"claims":[{"text":"Ray'),
        # A parse failure that did not hit max_tokens is not counted.
        "broken_stop": FakeBackend(lambda record, schema: "{not json", limits=naive, enforced=False),
    }
    modes = {name: _answer_with(backend) for name, backend in backends.items()}
    rows, _ = run_compare([item], modes, None, journal_path=tmp_path / "a.jsonl", header={}, progress=False)
    by_mode = {row["mode"]: row for row in rows}
    assert by_mode["naive_parsed"]["ok"] is True
    assert by_mode["naive_unparsed"]["error_type"] == "UnparsedAnswerError"
    assert by_mode["constrained_cut"]["error_type"] == "TruncatedOutputError"
    assert by_mode["naive_unparsed"]["finish_reason"] == by_mode["constrained_cut"]["finish_reason"] == "length"
    s = summarize_compare(rows, list(modes))
    assert {m: (s[m]["parsed"], s[m]["hit_max_tokens"]) for m in modes} == {
        "naive_parsed": (1, 1),
        "naive_unparsed": (0, 1),
        "constrained_cut": (0, 1),
        "broken_stop": (0, 0),
    }
    # Only the typed finish_reason counts, never the wording of an error message.
    untyped = {"mode": "id", "ok": False, "error_type": "RuntimeFailure", "error": by_mode["constrained_cut"]["error"]}
    assert summarize_compare([untyped], ["id"])["id"]["hit_max_tokens"] == 0
    report = render_compare_report({}, s, {}, seconds=1, resumed=0)
    assert "| hit max_tokens (all answers) | 1 | 1 | 1 | 0 |" in report


def test_abstentions_and_claims_not_verbatim_are_counted_per_mode(tmp_path: Path) -> None:
    item = QAItem("q001", "Why is the sky blue?", "rr_x", (Chunk(id="e1", text="Short waves scatter more."),))
    quote = {
        "claims": [{"text": "According to the source, Short waves scatter more.", "citations": [{"chunk_id": "e1"}]}]
    }
    backends = {
        "abstain": FakeBackend(lambda record, schema: '{"claims":[]}'),
        "quote": FakeBackend(lambda record, schema: quote),
        "paraphrase": FakeBackend(
            lambda record, schema: {
                "claims": [{"text": "Blue light scatters.", "citations": [{"chunk_id": "e1", "span": "Short waves"}]}]
            }
        ),
    }
    modes = {
        name: (lambda b, p: lambda q, c: citelock.answer(q, c, backend=b, policy=p, render="none"))(backend, policy)
        for (name, backend), policy in zip(backends.items(), ["quote", "quote", "substring"], strict=True)
    }
    rows, _ = run_compare([item], modes, _YesIfVerbatim(), journal_path=None, header={}, progress=False)
    s = summarize_compare(rows, list(modes))
    assert (s["abstain"]["abstained"], s["abstain"]["clean_answers"], s["abstain"]["cited_claims"]) == (1, 0, 0)
    assert s["abstain"]["judge_support"] is None
    assert (s["quote"]["cited_claims"], s["quote"]["claims_not_verbatim"], s["quote"]["clean_answers"]) == (1, 0, 1)
    assert s["paraphrase"]["claims_not_verbatim"] == 1 and s["paraphrase"]["judge_support"] == 0.0
    report = render_compare_report({}, s, {}, seconds=1, resumed=0)
    assert "| abstentions | 1/1 (100.0%) | 0/1 (0.0%) | 0/1 (0.0%) |" in report
    assert "| claims not verbatim | 0/0 | 0/1 (0.0%) | 1/1 (100.0%) |" in report


@pytest.mark.shared_data
def test_expertqa_val_has_at_least_100_questions_with_passages() -> None:
    root = Path(os.environ.get("CITELOCK_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    path = root / "expertqa" / "val.jsonl"
    if not path.is_file():
        pytest.skip(f"ExpertQA not found under {root} (set CITELOCK_SHARED_DATA)")
    items = load_expertqa(path)
    assert len(items) >= 100
    assert sum(i.system.startswith("rr_") for i in items) >= 70
    assert all(c.id == f"e{k + 1}" for i in items for k, c in enumerate(i.chunks))


@pytest.mark.local_model
@pytest.mark.shared_data
def test_compare_subset_on_real_expertqa_with_the_bundled_model(shared_data: Path, tmp_path: Path) -> None:
    """The CI subset of `citelock eval compare`: real ExpertQA passages, the real local model, every mode."""
    from typer.testing import CliRunner

    from citelock.cli import app
    from citelock.cli._eval import MODES

    out = tmp_path / "compare"
    args = ["eval", "compare", "--out", str(out), "--limit", "3", "--max-tokens", "80", "--no-progress"]
    result = CliRunner().invoke(app, [*args, "--data", str(shared_data / "expertqa" / "val.jsonl")])
    assert result.exit_code in (0, 1), result.output
    lines = (out / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [row for row in map(json.loads, lines) if "_header" not in row]
    assert sorted(row["mode"] for row in rows) == sorted(list(MODES) * 3)
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "fabricated ids" in report and "ExpertQA's human support labels" in report
    # Constrained modes can never cite outside the prompt: read it off the report's own table.
    fabricated = next(line for line in report.splitlines() if line.startswith("| fabricated ids"))
    cells = [c.strip() for c in fabricated.strip("|").split("|")]
    assert MODES[0] == "naive"  # cells: the row label, then one cell per mode in MODES order, then the definition
    assert all(cell.startswith("0/") for cell in cells[2 : 1 + len(MODES)]), fabricated


def _own_files(tmp_path: Path) -> tuple[Path, Path]:
    questions = tmp_path / "q.jsonl"
    chunks = tmp_path / "c.jsonl"
    chunks.write_text(
        '{"id": "a", "text": "The bridge opened in 1932.", "source": "s"}\n{"id": "b", "text": "It is long."}\n',
        encoding="utf-8",
    )
    questions.write_text(
        '{"question": "When?", "chunks": ["a", "b"], "id": "x1"}\n\n{"question": "How long?", "chunks": ["b"]}\n',
        encoding="utf-8",
    )
    return questions, chunks


def test_load_questions_reads_your_own_questions_and_chunks(tmp_path: Path) -> None:
    from citelock.evals._compare import load_questions

    questions, chunks = _own_files(tmp_path)
    items = load_questions(questions, chunks)
    assert [(i.item_id, i.question, i.system, [c.id for c in i.chunks]) for i in items] == [
        ("x1", "When?", "own", ["a", "b"]),
        ("q003", "How long?", "own", ["b"]),
    ]
    assert items[0].chunks[0].source == "s" and load_questions(questions, chunks, limit=1) == items[:1]


@pytest.mark.parametrize(
    ("questions_text", "chunks_text", "message"),
    [
        ('{"question": "Q", "chunks": ["zz"]}\n', '{"id": "a", "text": "T"}\n', r"chunk ids \['zz'\] are not in"),
        ('{"question": "Q"}\n', '{"id": "a", "text": "T"}\n', "expected"),
        ('{"question": "Q", "chunks": ["a"]}\n', '{"id": "a", "text": "T"}\n{"id": "a", "text": "U"}\n', "duplicate"),
        ("not json\n", '{"id": "a", "text": "T"}\n', "line 1: not JSON"),
        ('{"question": "Q", "chunks": ["a"]}\n', '{"id": 3, "text": "T"}\n', "expected"),
    ],
)
def test_load_questions_names_what_is_wrong(
    tmp_path: Path, questions_text: str, chunks_text: str, message: str
) -> None:
    from citelock.evals._compare import load_questions

    (tmp_path / "q.jsonl").write_text(questions_text, encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(chunks_text, encoding="utf-8")
    with pytest.raises(citelock.InputError, match=message):
        load_questions(tmp_path / "q.jsonl", tmp_path / "c.jsonl")
    with pytest.raises(citelock.InputError, match="not found"):
        load_questions(tmp_path / "missing.jsonl", tmp_path / "missing-chunks.jsonl")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--questions", "q.jsonl"], "--questions and --chunks go together"),
        (["--base-url", "http://127.0.0.1:9/v1"], "need --backend openai or instructor"),
        (["--backend", "openai", "--server", "vllm"], "needs --base-url"),
        (["--backend", "openai"], "no API key"),  # without a URL it is OpenAI itself
        (["--backend", "tgi"], "--backend must be one of"),
        (["--naive-template", "answer_structured.v2"], "must name an answer_naive version"),
        (["--backend", "instructor", "--base-url", "http://127.0.0.1:9/v1", "--delivery", "grammar"], "--delivery is"),
    ],
)
def test_compare_options_are_checked_before_anything_runs(
    tmp_path: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from citelock.cli import app

    questions, chunks = _own_files(tmp_path)
    base = ["eval", "compare", "--out", str(tmp_path / "out"), "--no-progress", "--judge", "none"]
    if "--questions" not in args:
        base += ["--questions", str(questions), "--chunks", str(chunks)]
    result = CliRunner().invoke(app, [*base, *args])
    assert result.exit_code != 0 and message in result.output, result.output
    assert not (tmp_path / "out" / "answers.jsonl").exists()


def test_summary_counts_naive_answers_with_markers() -> None:
    rows = [
        {"mode": "naive", "ok": True, "cited_claims": 2, "claims": 2, "latency_s": 1.0},
        {"mode": "naive", "ok": True, "cited_claims": 0, "claims": 1, "latency_s": 1.0},
        {"mode": "naive", "ok": False, "error_type": "UnparsedAnswerError"},
    ]
    full = [dict(r, **{k: 0 for k in ("fabricated", "stale", "non_verbatim", "uncited")}) for r in rows]
    naive = summarize_compare(full, ["naive"])["naive"]
    assert (naive["answers_with_markers"], naive["parsed"], naive["cited_claims"], naive["claims"]) == (1, 2, 2, 3)


def test_the_naive_prompt_v3_is_fair_and_v2_still_loads() -> None:
    from citelock.prompt import load_template, parse_answer

    v3, v2 = load_template("answer_naive"), load_template("answer_naive", "2")
    assert (v3.version, v2.version) == ("3", "2")
    structured = load_template("answer_structured")
    assert "word for word" in v3.system and "word for word" in structured.system  # the same instructions
    example = v3.system.split("Answer: ", 1)[1]
    parsed = parse_answer(example)  # the worked example is itself an answer the free-text parser reads
    assert [[c.chunk_id for c in claim.citations] for claim in parsed.claims] == [["doc-1"], ["doc-1"]]
