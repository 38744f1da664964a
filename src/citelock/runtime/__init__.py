"""The runtime shared by backends and judges.

llama.cpp (:func:`runtime`, the bundled models), the OpenAI-compatible transport with its error map, server
profiles, and a managed server. Every SDK is imported on first use, not here.
"""

from citelock.runtime._llama import (
    MODELS,
    DecodeResult,
    LlamaRuntime,
    ModelSpec,
    load_llama,
    locate_model,
    parser_limits,
    runtime,
)
from citelock.runtime._profiles import PROFILES, UNNAMED_KIND, Delivery, Output, ServerProfile, get_profile, said_kind
from citelock.runtime._server import ManagedServer, bundled_model_path, free_port
from citelock.runtime._transport import (
    OpenAITransport,
    TransportUser,
    map_openai_error,
    output_text,
    response_request_id,
)

__all__ = [
    "MODELS",
    "PROFILES",
    "UNNAMED_KIND",
    "DecodeResult",
    "Delivery",
    "LlamaRuntime",
    "ManagedServer",
    "ModelSpec",
    "OpenAITransport",
    "Output",
    "ServerProfile",
    "TransportUser",
    "bundled_model_path",
    "free_port",
    "get_profile",
    "load_llama",
    "locate_model",
    "map_openai_error",
    "output_text",
    "parser_limits",
    "response_request_id",
    "runtime",
    "said_kind",
]
