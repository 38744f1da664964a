"""Framework adapters: LangChain, LlamaIndex and Haystack, each a thin door onto the one guard.

Each adapter lives in its own module and imports its framework only when one of its names is first used;
without the framework, that use raises :class:`~citelock.MissingExtraError` naming ``pip install
"citelock[langchain]"``, ``"citelock[llamaindex]"`` or ``"citelock[haystack]"``. Importing this package loads
none of them. Detect-only mode (:class:`Detector`), which all three share, needs no framework.

- LangChain (``citelock[langchain]``): :class:`CitedAnswerRunnable` (documents and a chat model in, a
  :class:`~citelock.GuardedAnswer` out, the constraint delivered through the model's own structured-output call)
  and :class:`GuardRunnable` (a chain's quoted answer plus its documents in, a :class:`Detection` out).
- LlamaIndex (``citelock[llamaindex]``): :class:`CitelockQueryEngine` and :class:`CitelockEvaluator`.
- Haystack (``citelock[haystack]``): :class:`CitelockAnswerBuilder`, a component with ``AnswerBuilder``'s sockets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from citelock.integrations._detect import Detection, Detector, DetectSink, Source, numbered_chunks

if TYPE_CHECKING:
    from citelock.integrations._haystack import CitelockAnswerBuilder
    from citelock.integrations._langchain import CitedAnswerRunnable, GuardRunnable
    from citelock.integrations._llamaindex import CitelockEvaluator, CitelockQueryEngine

__all__ = [
    "CitedAnswerRunnable",
    "CitelockAnswerBuilder",
    "CitelockEvaluator",
    "CitelockQueryEngine",
    "DetectSink",
    "Detection",
    "Detector",
    "GuardRunnable",
    "Source",
    "numbered_chunks",
]

_LAZY = {
    "CitedAnswerRunnable": "_langchain",
    "GuardRunnable": "_langchain",
    "CitelockEvaluator": "_llamaindex",
    "CitelockQueryEngine": "_llamaindex",
    "CitelockAnswerBuilder": "_haystack",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'citelock.integrations' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"citelock.integrations.{module}"), name)
    globals()[name] = value
    return value
