"""Backends: everything that generates an answer, behind one small protocol.

``FakeBackend`` (scripted, for unit tests), ``LocalBackend`` (a bundled GGUF model through llama.cpp, decoding
constrained by llguidance) and ``NaiveBackend`` (the same model writing free text with ``[id]`` markers, the
baseline). SDKs and models load lazily: importing this package imports none of them.
"""

from citelock.backends._fake import FakeBackend, FakeCall
from citelock.backends._protocol import AsyncBackend, Backend, Generation

__all__ = [
    "AsyncBackend",
    "Backend",
    "FakeBackend",
    "FakeCall",
    "Generation",
]
