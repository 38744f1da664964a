"""The guard gateway: an OpenAI-compatible HTTP endpoint that constrains and guards every answer's citations.

Any application, in any language, sends a standard chat completion body plus a ``citelock`` object
(``{"chunks": [...], "surface": "NAME", "policy": "quote"}``) to ``POST /v1/chat/completions`` and gets a
``chat.completion`` whose content is the guarded, rendered answer, with the ``citelock`` record beside it and
``x-citelock-*`` headers; ``"stream": true`` gets server-sent chunks carrying only what the surface may show.
The gateway sits in front of an upstream OpenAI-compatible server (llama.cpp, vLLM, SGLang, OpenAI; the server
kind decides how the per-request constraint is sent, as :func:`citelock.wrap` does) or, with none configured,
serves the bundled model. Workers are stateless; the store (SQLite on one machine, PostgreSQL for several)
holds the prompt log, the results, the review queue and the gateway keys. Needs ``pip install
"citelock[gateway]"``; the guide is ``docs/guides/gateway.md``.
"""

from citelock.gateway._app import create_app
from citelock.gateway._door import LOCAL_MODEL
from citelock.gateway._envelope import BLOCKED_TYPE
from citelock.gateway._keys import KEY_PREFIX, GatewayKey, GatewayKeys
from citelock.gateway._serve import serve
from citelock.gateway._settings import DEFAULT_REFUSAL, GatewayLimits, GatewaySettings, GatewaySurface, OnBlock

__all__ = [
    "BLOCKED_TYPE",
    "DEFAULT_REFUSAL",
    "KEY_PREFIX",
    "LOCAL_MODEL",
    "GatewayKey",
    "GatewayKeys",
    "GatewayLimits",
    "GatewaySettings",
    "GatewaySurface",
    "OnBlock",
    "create_app",
    "serve",
]
