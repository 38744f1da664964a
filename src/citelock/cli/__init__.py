"""The ``citelock`` command line. Each command lives in its own module and registers on the shared app."""

from __future__ import annotations

# Importing a command module registers its command(s) on the shared app.
from citelock.cli import (  # noqa: F401
    _answer,
    _audit,
    _calibrate,
    _check,
    _config,
    _eval,
    _eval_answers,
    _log,
    _metrics,
    _queue,
    _review,
    _serve,
)
from citelock.cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``citelock`` command."""
    app()
