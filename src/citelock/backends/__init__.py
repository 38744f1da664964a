"""Backends: everything that generates an answer, behind one small protocol.

``FakeBackend`` (scripted, for unit tests), ``LocalBackend`` (a bundled GGUF model through llama.cpp, decoding
constrained by llguidance) and ``NaiveBackend`` (the same model writing free text with ``[id]`` markers, the
baseline). SDKs and models load lazily: importing this package imports none of them.
"""

from citelock.backends._fake import FakeBackend, FakeCall
from citelock.backends._instructor import InstructorBackend, InstructorGeneration
from citelock.backends._local import LOCAL_LIMITS, LocalBackend, NaiveBackend
from citelock.backends._openai import OpenAIBackend, OpenAIGeneration
from citelock.backends._protocol import AsyncBackend, Backend, Generation
from citelock.backends._registry import BACKEND_NAMES, make_backend
from citelock.errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendRefusalError,
    BackendTimeoutError,
    SchemaRejectedError,
    ServerStartError,
    TruncatedOutputError,
)
from citelock.runtime._llama import MODELS, ModelSpec, locate_model
from citelock.runtime._profiles import PROFILES, Delivery, ServerProfile, fit_for_profile, get_profile
from citelock.runtime._server import ManagedServer

__all__ = [
    "BACKEND_NAMES",
    "LOCAL_LIMITS",
    "MODELS",
    "PROFILES",
    "AsyncBackend",
    "Backend",
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendRefusalError",
    "BackendTimeoutError",
    "Delivery",
    "FakeBackend",
    "FakeCall",
    "Generation",
    "InstructorBackend",
    "InstructorGeneration",
    "LocalBackend",
    "ManagedServer",
    "ModelSpec",
    "NaiveBackend",
    "OpenAIBackend",
    "OpenAIGeneration",
    "SchemaRejectedError",
    "ServerProfile",
    "ServerStartError",
    "TruncatedOutputError",
    "fit_for_profile",
    "get_profile",
    "locate_model",
    "make_backend",
]
