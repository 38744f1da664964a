"""Backends by name: one table for the API and ``citelock answer --backend`` alike (no model, no server)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock import BackendLimits, FakeBackend, PromptRecord
from citelock.backends import (
    BACKEND_NAMES,
    BACKENDS,
    Backend,
    BackendInfo,
    InstructorBackend,
    LocalBackend,
    NaiveBackend,
    OpenAIBackend,
    _registry,
    make_backend,
)
from citelock.cli import app
from citelock.constraint import CitationSchema
from citelock.errors import UsageError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
URL = "http://127.0.0.1:9/v1"  # nothing listens: constructing a backend must not connect
runner = CliRunner()


def test_the_table_knows_every_backend_and_builds_each_by_name() -> None:
    assert BACKEND_NAMES == ("local", "naive", "openai", "instructor", "outlines", "fake")
    pytest.importorskip("openai")
    built = {
        "local": make_backend("local"),
        "naive": make_backend("naive", model="smollm2"),
        "openai": make_backend("openai", base_url=URL, server="vllm", model="m"),
        "instructor": make_backend("instructor", base_url=URL, max_reasks=0),
        "fake": make_backend("fake", outputs=['{"claims": []}']),
    }
    kinds = {"local": LocalBackend, "naive": NaiveBackend, "openai": OpenAIBackend, "instructor": InstructorBackend}
    # outlines needs a model object (or a GGUF to load): tests/backends/test_outlines_backend.py builds it
    for name, backend in built.items():
        assert isinstance(backend, BACKENDS[name].cls) and isinstance(backend, Backend)
        assert backend.name == name
        assert isinstance(backend, kinds.get(name, FakeBackend))
    openai_backend = built["openai"]
    assert isinstance(openai_backend, OpenAIBackend)
    assert openai_backend.profile.kind == "vllm" and openai_backend.model == "m"


def test_options_are_read_off_the_constructor() -> None:
    assert list(BACKENDS["naive"].options()) == ["model", "n_ctx", "temperature", "seed"]
    assert {"base_url", "server", "model", "delivery"} <= set(BACKENDS["openai"].options())
    assert {"mode", "max_reasks", "token_budget"} <= set(BACKENDS["instructor"].options())
    assert list(BACKENDS["outlines"].options())[:2] == ["model", "limits"]
    assert BACKENDS["outlines"].options()["model"].default is inspect.Parameter.empty


def test_unknown_names_and_options_are_usage_errors_that_list_what_is_known() -> None:
    with pytest.raises(UsageError) as unknown:
        make_backend("gpt")
    assert (
        str(unknown.value) == "unknown backend 'gpt'; expected one of local, naive, openai, instructor, outlines, fake"
    )
    with pytest.raises(UsageError, match=r"backend 'local' takes no option base_url; its options: model, n_ctx"):
        make_backend("local", base_url=URL)
    with pytest.raises(UsageError, match=r"backend 'fake' takes no option base_url; its options: outputs, limits"):
        make_backend("fake", base_url=URL)
    with pytest.raises(UsageError, match="unknown local model 'llama70b'"):
        make_backend("naive", model="llama70b")


def _run(tmp_path: Path, *args: str) -> Any:
    chunks = ["--chunks", str(EXAMPLES / "corpus.jsonl")]
    return runner.invoke(app, ["answer", "--db", str(tmp_path / "log.db"), "-q", "How long?", *chunks, *args])


def test_cli_passes_only_the_options_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def make(kind: str, **options: Any) -> FakeBackend:
        calls.append((kind, options))
        return FakeBackend(['{"claims": []}'], name=kind, limits=BackendLimits(policies=("sentence", "id")))

    monkeypatch.setattr(_registry, "make_backend", make)
    result = _run(tmp_path, "--backend", "instructor", "--base-url", URL, "--server", "vllm", "--model", "m")
    assert result.exit_code == 0, result.output
    assert _run(tmp_path, "--backend", "naive").exit_code == 0
    assert calls == [("instructor", {"base_url": URL, "server": "vllm", "model": "m"}), ("naive", {})]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--backend", "gpt"),
            "unknown backend 'gpt'; expected one of local, naive, openai, instructor, outlines, fake",
        ),
        (
            ("--backend", "local", "--base-url", URL),
            "--base-url is for --backend openai or instructor, not --backend local",
        ),
        (("--backend", "local", "--model", "llama70b"), "unknown local model 'llama70b'"),
    ],
)
def test_cli_bad_backend_choices_exit_2_with_the_reason(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _run(tmp_path, *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.replace("│", " ").split())  # the error box wraps lines


def test_the_fake_backend_needs_no_options(tmp_path: Path) -> None:
    fake = make_backend("fake")
    assert isinstance(fake, FakeBackend) and fake.remaining == 0
    result = _run(tmp_path, "--backend", "fake", "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["answer"]["claims"], "the zero-config fake cites each chunk's first sentence"


class EchoBackend:
    """A newcomer's backend: it abstains, constrained to the ``id`` policy."""

    name = "echo"

    def __init__(self, *, model: str = "echo-1") -> None:
        self.model = model
        self.limits = BackendLimits(policies=("id",))

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> Any:
        from citelock.records import Generation

        return Generation(text='{"claims": []}', backend=self.name, model=self.model, enforced=True)


def test_a_new_backend_needs_only_its_entry_to_reach_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "echo", BackendInfo("echo", "abstains, for this test", EchoBackend))
    result = _run(tmp_path, "--backend", "echo", "--model", "echo-2", "--json")
    assert result.exit_code == 0, result.output
    assert '"backend": "echo"' in result.output and '"model": "echo-2"' in result.output
