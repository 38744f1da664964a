"""Serving the gateway with uvicorn: one process, or ``--workers N`` stateless worker processes.

Every worker builds its own app from the same :class:`~citelock.gateway.GatewaySettings`, handed over as JSON
in :data:`SETTINGS_ENV` (uvicorn starts workers from an import string, so the settings cannot travel as a Python
object). The workers share nothing but the store: the prompt log's appends are serialized by the database
(``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock on PostgreSQL), so any number of workers, on
any number of machines on one PostgreSQL database, extend one verifiable hash chain.
"""

from __future__ import annotations

import os
from typing import Any

from citelock.errors import MissingExtraError, UsageError
from citelock.gateway._settings import GatewaySettings

__all__ = ["SETTINGS_ENV", "app_from_env", "serve"]

SETTINGS_ENV = "CITELOCK_GATEWAY_SETTINGS"
"""The environment variable that carries a worker's settings (JSON of :class:`GatewaySettings`)."""


def app_from_env() -> Any:
    """The app of one worker process, from :data:`SETTINGS_ENV` (uvicorn's ``factory`` for ``--workers N``).

    Raises:
        UsageError: the variable is missing.
    """
    from citelock.gateway._app import create_app

    text = os.environ.get(SETTINGS_ENV)
    if not text:
        raise UsageError(f"{SETTINGS_ENV} is not set; start workers with citelock gateway (or citelock.gateway.serve)")
    return create_app(GatewaySettings.model_validate_json(text))


def serve(settings: GatewaySettings, *, host: str = "127.0.0.1", port: int = 8400, workers: int = 1) -> None:
    """Serve the gateway with uvicorn until interrupted (binds to 127.0.0.1 unless told otherwise).

    Raises:
        MissingExtraError: the ``gateway`` extra is not installed.
        UsageError: fewer than one worker.
    """
    if workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}")
    try:
        import uvicorn
    except ImportError:
        raise MissingExtraError("gateway", "uvicorn") from None
    os.environ[SETTINGS_ENV] = settings.model_dump_json()
    uvicorn.run(
        "citelock.gateway._serve:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        proxy_headers=False,
        server_header=False,
        access_log=False,
        # longer than a load balancer's idle timeout (60 s on most), so the gateway never closes a kept-alive
        # connection just as the balancer sends the next request on it
        timeout_keep_alive=65,
    )
