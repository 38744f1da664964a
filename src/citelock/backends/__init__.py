"""Backends: everything that generates an answer, behind one small protocol.

Every backend, each also known by name to :func:`make_backend` (the table is :data:`BACKENDS`):

- ``local``: :class:`LocalBackend`, a bundled GGUF model through llama.cpp, decoding constrained by llguidance
  (every span policy);
- ``naive``: :class:`NaiveBackend`, the same model writing free text with ``[id]`` markers (the baseline);
- ``openai``: :class:`OpenAIBackend`, any OpenAI-compatible server (OpenAI, vLLM, llama.cpp), the schema sent
  the way its :class:`ServerProfile` says, the output verified after the fact; :meth:`OpenAIBackend.from_client`
  takes your own ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client;
- ``instructor``: :class:`InstructorBackend`, the same servers through instructor, the citations validated
  against the prompt with bounded reasks;
- ``outlines``: :class:`OutlinesBackend`, any outlines 1.x model (llama.cpp, Transformers, MLX, vLLM offline,
  or an outlines server client), each request's constraint passed as an outlines output type and the output
  verified after decoding;
- ``fake``: :class:`FakeBackend`, scripted outputs for unit tests.

SDKs and models load lazily: importing this package imports none of them.
"""

from citelock.backends._fake import FakeBackend, FakeCall
from citelock.backends._instructor import InstructorBackend, InstructorGeneration
from citelock.backends._local import LOCAL_LIMITS, LocalBackend, NaiveBackend
from citelock.backends._openai import OpenAIBackend, OpenAIGeneration
from citelock.backends._outlines import MODEL_KINDS, ModelKind, OutlinesBackend, OutlinesGeneration
from citelock.backends._protocol import AsyncBackend, AsyncStreamingBackend, Backend, Generation, StreamingBackend
from citelock.backends._registry import BACKEND_NAMES, BACKENDS, BackendInfo, make_backend
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
from citelock.runtime import (
    MODELS,
    PROFILES,
    Delivery,
    ManagedServer,
    ModelSpec,
    ServerProfile,
    get_profile,
    locate_model,
)

__all__ = [
    "BACKENDS",
    "BACKEND_NAMES",
    "LOCAL_LIMITS",
    "MODELS",
    "MODEL_KINDS",
    "PROFILES",
    "AsyncBackend",
    "AsyncStreamingBackend",
    "Backend",
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendInfo",
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
    "ModelKind",
    "ModelSpec",
    "NaiveBackend",
    "OpenAIBackend",
    "OpenAIGeneration",
    "OutlinesBackend",
    "OutlinesGeneration",
    "SchemaRejectedError",
    "ServerProfile",
    "ServerStartError",
    "StreamingBackend",
    "TruncatedOutputError",
    "get_profile",
    "locate_model",
    "make_backend",
]
