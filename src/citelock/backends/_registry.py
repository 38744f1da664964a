"""Backends by name, for the command line and configuration files."""

from __future__ import annotations

from typing import Any

from citelock.backends._protocol import Backend
from citelock.errors import UsageError

__all__ = ["BACKEND_NAMES", "make_backend"]

BACKEND_NAMES = ("local", "naive")


def make_backend(kind: str, *, model: str | None = None, **options: Any) -> Backend:
    """Create a backend by name: ``local`` (constrained, bundled model) or ``naive`` (free-text baseline).

    Args:
        kind: The backend name.
        model: The bundled model (``smollm2`` or ``gemma3``); None for the default.
        options: Passed to the backend's constructor.

    Raises:
        UsageError: an unknown backend name.
    """
    if kind == "local":
        from citelock.backends._local import LocalBackend

        return LocalBackend(model or "smollm2", **options)
    if kind == "naive":
        from citelock.backends._local import NaiveBackend

        return NaiveBackend(model or "smollm2", **options)
    raise UsageError(f"unknown backend {kind!r}; expected one of {list(BACKEND_NAMES)}")
