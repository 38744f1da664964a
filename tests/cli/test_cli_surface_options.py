"""The surface options are declared once (``SurfaceOptions``) and every command that takes them gets the same."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from citelock.audit._sink import MANIFEST
from citelock.cli import app
from citelock.cli._surface_options import NO_SURFACE, SurfaceOptions, surface_options
from support.audit_rows import make_rows, write_jsonl

COMMANDS = ("check", "answer", "audit")
NAMES = [f.name for f in dataclasses.fields(SurfaceOptions)]


def _params(command: str) -> list[Any]:
    group = typer.main.get_command(app)
    return list(group.commands[command].params)  # type: ignore[attr-defined]


def _described(param: Any) -> tuple[Any, ...]:
    return (param.name, tuple(param.opts), param.help, param.default, param.required)


def test_every_command_takes_the_same_surface_options_in_one_run() -> None:
    shown = {}
    for command in COMMANDS:
        params = _params(command)
        names = [p.name for p in params]
        start = names.index(NAMES[0])
        assert names[start : start + len(NAMES)] == NAMES, command  # together, in the declared order
        shown[command] = [_described(p) for p in params[start : start + len(NAMES)]]
    assert shown["check"] == shown["answer"] == shown["audit"]
    options = {name: opts for name, opts, *_ in shown["check"]}
    assert options["sample_rate"] == ("--sample-rate",) and options["escalate_base_url"] == ("--escalate-base-url",)
    defaults = {name: default for name, _, _, default, *_ in shown["check"]}
    assert defaults == dataclasses.asdict(NO_SURFACE)


def test_the_options_reach_the_command_as_one_value() -> None:
    seen: list[SurfaceOptions] = []
    local = typer.Typer()

    @local.command()
    @surface_options
    def probe(name: str = "x", options: SurfaceOptions = NO_SURFACE, loud: bool = False) -> None:
        seen.append(options)
        typer.echo(f"{name} {loud}")

    result = CliRunner().invoke(
        local, ["--name", "y", "--surface", "legal", "--stakes", "low", "--sample-rate", "0.5", "--loud"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "y True"
    assert seen == [SurfaceOptions(surface="legal", stakes="low", sample_rate=0.5)]
    assert seen[0].runs_policy and not NO_SURFACE.runs_policy


def test_a_command_without_the_options_parameter_is_refused() -> None:
    def plain(name: str = "x") -> None:
        del name

    def twice(a: SurfaceOptions = NO_SURFACE, b: SurfaceOptions = NO_SURFACE) -> None:
        del a, b

    with pytest.raises(TypeError, match="found 0"):
        surface_options(plain)
    with pytest.raises(TypeError, match="found 2"):
        surface_options(twice)


def test_audit_workers_get_the_options_the_command_line_gave(tmp_path: Path) -> None:
    rows = str(write_jsonl(tmp_path / "rows.jsonl", make_rows(3)))
    flags = ["--surface", "faq", "--stakes", "low", "--sample-rate", "0.5", "--judge", "lexical", "--on-fail", "mark"]
    args = ["audit", rows, "--out", str(tmp_path / "out"), "--processes", "1", "--quiet", *flags]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    settings = json.loads((tmp_path / "out" / MANIFEST).read_text(encoding="utf-8"))["settings"]
    expected = SurfaceOptions(surface="faq", stakes="low", sample_rate=0.5, judge="lexical", on_fail="mark")
    assert settings == expected.audit_settings().describe()
    report = [json.loads(line) for part in sorted((tmp_path / "out").glob("*.jsonl")) for line in part.open()]
    assert len(report) == 3 and {r["surface"] for r in report} == {"faq"} and {r["on_fail"] for r in report} == {"mark"}
