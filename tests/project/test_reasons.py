"""The reason table: one entry per code, known layers and families, the derived sets pinned, every copy in sync."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest

from citelock import check, reasons, record_from_messages
from citelock._jsonschema import record_schemas
from citelock.prompt import PromptIndex, check_citation, describe
from citelock.reasons import (
    FAMILIES,
    REASONS,
    Layer,
    ReasonCode,
    ReasonFamily,
    ReasonInfo,
    codes_in,
    judged_codes,
    reason_table,
)
from citelock.records import Citation, Finding
from citelock.store import QueueEntry

ROOT = Path(__file__).resolve().parents[2]
R = ReasonCode

# Pinned once, from the sets the code hard-coded before the table existed (store/_queue.py's judged set, the
# span sets of evals/_harness.py and evals/_compare.py, the layers evals/_defects.py wrote beside each code):
# a refactor of the table cannot change who belongs where without changing this test.
PINNED_FAMILIES: dict[str, set[ReasonCode]] = {
    "id": {R.ID_NOT_IN_PROMPT, R.STALE_ID, R.FABRICATED_ID},
    "span": {
        R.SPAN_TRUNCATED,
        R.SPAN_NOT_IN_CHUNK,
        R.SPAN_ONLY_IN_QUESTION,
        R.SPAN_ONLY_IN_HISTORY,
        R.SPAN_IN_OTHER_CHUNK,
        R.SPAN_STITCHED,  # detect-only's stitched quotes (issue 39)
    },
    "coverage": {R.UNCITED_CLAIM, R.ANSWER_TRUNCATED},  # ANSWER_TRUNCATED: a streamed answer stopped early
    "number": {R.NUMBER_MISMATCH},
    # AUDIT_SAMPLE is not a failure: a judged citation drawn for a person to label (its accept is a "yes" sample)
    "support": {R.UNSUPPORTED, R.PARTIAL_SUPPORT, R.WRONG_CHUNK, R.UNCERTAIN_SUPPORT, R.AUDIT_SAMPLE},
    "relevance": {R.OFF_QUESTION},  # answer-level: the answer as a whole does not address the question
    "error": {R.CHECK_ERROR},
}
PINNED_JUDGED = {R.UNSUPPORTED, R.PARTIAL_SUPPORT, R.WRONG_CHUNK, R.UNCERTAIN_SUPPORT, R.AUDIT_SAMPLE}
PINNED_LAYERS: dict[ReasonCode, Layer | None] = {
    **dict.fromkeys(PINNED_FAMILIES["id"] | PINNED_FAMILIES["span"], Layer.PROVENANCE),
    R.UNCITED_CLAIM: Layer.COVERAGE,
    R.ANSWER_TRUNCATED: Layer.COVERAGE,
    R.NUMBER_MISMATCH: Layer.NUMBERS,
    **dict.fromkeys(PINNED_FAMILIES["support"], Layer.SUPPORT),
    R.OFF_QUESTION: Layer.RELEVANCE,
    R.CHECK_ERROR: None,  # any layer: the finding carries the layer whose check raised
}


def test_every_code_has_exactly_one_entry_and_no_entry_names_a_non_member() -> None:
    assert all(type(code) is ReasonCode for code in REASONS)
    assert set(REASONS) == set(ReasonCode)
    assert len(REASONS) == len(ReasonCode)
    assert all(isinstance(info, ReasonInfo) for info in REASONS.values())


def test_a_code_without_an_entry_fails_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    partial = {code: info for code, info in REASONS.items() if code is not ReasonCode.STALE_ID}
    monkeypatch.setattr(reasons, "REASONS", partial)
    with pytest.raises(RuntimeError, match="no entry for STALE_ID"):
        reasons._check_table()


def test_layers_and_families_are_ones_the_code_knows() -> None:
    assert set(FAMILIES) == set(get_args(ReasonFamily)) == set(PINNED_FAMILIES)
    for code, info in REASONS.items():
        assert info.family in FAMILIES, code
        assert info.layer is None or info.layer in set(Layer), code
        assert (info.layer is None) == (info.family == "error"), code
    assert {info.family for info in REASONS.values()} == set(FAMILIES)  # no family without a code
    assert {info.layer for info in REASONS.values()} == {*Layer, None}  # every layer emits some code


def test_derived_sets_equal_the_pinned_ones() -> None:
    for family, codes in PINNED_FAMILIES.items():
        assert codes_in(family) == codes, family  # type: ignore[arg-type]
    assert judged_codes() == PINNED_JUDGED
    assert {code: info.layer for code, info in REASONS.items()} == PINNED_LAYERS


def test_unknown_family_is_rejected_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown reason family 'spans'; expected one of id, span, coverage"):
        codes_in("spans")  # type: ignore[arg-type]


@pytest.mark.parametrize("code", list(ReasonCode))
def test_description_and_fix_are_one_table_cell_each(code: ReasonCode) -> None:
    info = REASONS[code]
    for text in (info.description, info.fix):
        assert text and text == text.strip() and text[0].islower(), text
        assert "\n" not in text and "|" not in text and not text.endswith("."), text
        assert len(text) <= 110, text


def test_records_re_exports_the_same_enums() -> None:
    from citelock import records

    assert records.ReasonCode is ReasonCode and records.Layer is Layer
    assert {"ReasonCode", "Layer"} <= set(records.__all__)


def _between(text: str, name: str) -> str:
    begin = next(line for line in text.splitlines() if line.startswith(f"<!-- {name}:begin"))
    return text.split(begin + "\n", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def _readme_table(text: str) -> str:
    return _between(text, "reason-table")


def test_docs_tables_are_the_generated_ones(gen_script: ModuleType) -> None:
    page = (ROOT / "docs" / "reference" / "codes.md").read_text(encoding="utf-8")
    stale = "docs/reference/codes.md is stale: run python scripts/gen_reason_table.py"
    assert _readme_table(page) == reason_table(), stale
    assert _between(page, "exit-table") == gen_script.exit_table(), stale


def test_exit_table_has_a_row_per_exit_code(gen_script: ModuleType) -> None:
    from citelock.cli._app import EXIT_CODES, EXIT_PIPE

    rows = gen_script.exit_table().splitlines()[2:]
    assert [int(row.split("|")[1]) for row in rows] == list(EXIT_CODES)
    assert rows[-1] == f"| {EXIT_PIPE} | `EXIT_PIPE` | {EXIT_CODES[EXIT_PIPE]} |"


def test_generated_table_has_a_row_per_code_in_table_order() -> None:
    rows = reason_table().splitlines()[2:]
    assert [row.split("|")[2].strip().strip("`") for row in rows] == [code.value for code in REASONS]
    assert rows[0].startswith("| ① provenance | `ID_NOT_IN_PROMPT` |") and rows[1].startswith("| | `STALE_ID` |")
    assert rows[-1] == f"| any | `CHECK_ERROR` | {REASONS[R.CHECK_ERROR].description} | {REASONS[R.CHECK_ERROR].fix} |"


@pytest.fixture(scope="module")
def gen_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reason_table", ROOT / "scripts" / "gen_reason_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_script_checks_and_rewrites_a_stale_table(gen_script: ModuleType, tmp_path: Path) -> None:
    readme = tmp_path / "codes.md"
    stale = (
        f"# x\n\n{gen_script.BEGIN}\n| old | table |\n{gen_script.END}\n\n"
        f"{gen_script.EXIT_BEGIN}\n| old |\n{gen_script.EXIT_END}\n\nafter\n"
    )
    readme.write_text(stale, encoding="utf-8")
    assert gen_script.main(["--check", "--page", str(readme)]) == 1
    assert readme.read_text(encoding="utf-8") == stale  # --check writes nothing
    assert gen_script.main(["--page", str(readme)]) == 0
    written = readme.read_text(encoding="utf-8")
    assert _readme_table(written) == reason_table() and written.endswith("\n\nafter\n")
    assert _between(written, "exit-table") == gen_script.exit_table()
    assert gen_script.main(["--check", "--page", str(readme)]) == 0
    readme.write_text("# no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="expected exactly one"):
        gen_script.main(["--page", str(readme)])


@pytest.mark.parametrize("name", ["finding.v1.json", "guard_report.v1.json", "queue_entry.v1.json"])
def test_schema_enum_description_comes_from_the_table(name: str) -> None:
    schema = record_schemas()[name]["$defs"]["ReasonCode"]
    assert set(schema) == {"description", "enum", "title", "type"}  # the shape pydantic gives any enum
    assert schema["enum"] == [code.value for code in ReasonCode]
    for code, info in REASONS.items():
        assert f"``{code.value}`` ({info.layer or 'any layer'}): {info.description}." in schema["description"]
    committed = json.loads((ROOT / "schemas" / name).read_text(encoding="utf-8"))
    assert committed["$defs"]["ReasonCode"] == schema


# ------------------------------------------------------------------ the consumers read the table


def _record() -> object:
    return record_from_messages(
        [{"role": "user", "content": "Sources:\n[c-1] Revenue grew 12% in 2024.\n\nQ: Did revenue grow?"}],
        [{"id": "c-1", "text": "Revenue grew 12% in 2024."}],
        question="Did revenue grow?",
    )


def test_provenance_detail_and_coverage_detail_are_the_table_descriptions() -> None:
    record = _record()
    answer = {
        "claims": [
            {"text": "Revenue grew.", "citations": [{"chunk_id": "c-9"}]},
            {"text": "Revenue grew 12% in 2024.", "citations": []},
        ]
    }
    report = check(record, answer)  # type: ignore[arg-type]
    by_reason = {f.reason: f for f in report.findings}
    assert set(by_reason) == {R.ID_NOT_IN_PROMPT, R.UNCITED_CLAIM}
    for code, finding in by_reason.items():
        assert finding.detail == REASONS[code].description
        assert finding.layer == REASONS[code].layer
    index = PromptIndex.build(record)  # type: ignore[arg-type]
    other = check_citation(index, Citation(chunk_id="c-1", span="Did revenue grow?"), 0, 0)
    assert other.reason is R.SPAN_ONLY_IN_QUESTION
    assert describe(index, other) == REASONS[R.SPAN_ONLY_IN_QUESTION].description


@pytest.mark.parametrize("code", list(ReasonCode))
def test_queue_calibrates_exactly_the_judged_codes(code: ReasonCode) -> None:
    layer = REASONS[code].layer or Layer.SUPPORT
    finding = Finding(
        request_id="r",
        prompt_sha256="0" * 64,
        reason=code,
        layer=layer,
        claim_index=0,
        claim="Revenue grew.",
        passage="Revenue grew 12% in 2024.",
    )
    assert QueueEntry.from_finding(finding, surface="s").calibratable is REASONS[code].judged


def test_number_mismatch_description_says_what_the_check_does() -> None:
    """Both cases the numbers check flags, cited and uncited, are in the one line the table gives the code."""
    record = _record()
    answer = {
        "claims": [
            {"text": "Revenue grew 15% in 2024.", "citations": [{"chunk_id": "c-1"}]},
            {"text": "Sure, revenue grew 13% in 2024.", "citations": []},
        ]
    }
    report = check(record, answer)  # type: ignore[arg-type]
    numbers = [f for f in report.findings if f.reason is R.NUMBER_MISMATCH]
    assert sorted(f.claim_index for f in numbers) == [0, 1]  # a cited and an uncited claim: both are checked
    description = REASONS[R.NUMBER_MISMATCH].description
    assert "uncited" in description and "no chunk" in description  # checked against every chunk of the prompt
    assert "question" in description  # the question's own numbers count as known
