"""The LLM judge's plumbing against the real bundled SmolLM2-135M (a tiny model: not a competent judge)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from citelock.judges import LLMJudge

pytestmark = pytest.mark.local_model


def test_smollm2_judge_answers_one_of_three_words() -> None:
    from citelock.backends import locate_model
    from citelock.judges import LlamaCppCompleter

    path = locate_model("smollm2")
    assert path.suffix == ".gguf" and path.is_file()
    completer = LlamaCppCompleter(path, n_ctx=2048)
    judge = LLMJudge(completer)
    for claim, passage in [
        ("Revenue grew 12% in 2023.", "Revenue grew 12% in 2023. Costs rose."),
        ("The moon is made of cheese.", "Revenue grew 12% in 2023."),
    ]:
        verdict = judge.judge(claim, passage)
        assert verdict.label in ("yes", "partial", "no")
        assert verdict.raw.strip().lower() == verdict.label
        assert verdict.version == f"judge.v1/{path.name}"


_AT_EXIT_SCRIPT = """
import atexit
held = {}
# registered first, so it runs last: after citelock's own exit hook
atexit.register(lambda: print("closed at exit:", held["llm"]._model.model is None, flush=True))
import llama_cpp
from citelock.runtime._llama import load_llama, locate_model
held["llm"] = load_llama(llama_cpp, model_path=str(locate_model("smollm2")), n_ctx=256, verbose=False)
print("loaded:", held["llm"]._model.model is not None, flush=True)
"""


def test_models_are_closed_before_interpreter_teardown() -> None:
    """A Llama still alive at shutdown fails in __del__ ("Exception ignored ..."); citelock closes it at exit."""
    done = subprocess.run([sys.executable, "-c", _AT_EXIT_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "loaded: True" in done.stdout and "closed at exit: True" in done.stdout
    assert "Exception ignored" not in done.stderr
