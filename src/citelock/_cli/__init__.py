"""The ``citelock`` command line. Each command lives in its own module and registers on the shared app."""

from __future__ import annotations

from citelock._cli import _answer  # noqa: F401  (registers `citelock answer`)
from citelock._cli import _calibrate  # noqa: F401  (registers `citelock calibrate`)
from citelock._cli import _check  # noqa: F401  (registers `citelock check`)
from citelock._cli import _eval  # noqa: F401  (registers `citelock eval`)
from citelock._cli import _metrics  # noqa: F401  (registers `citelock metrics`)
from citelock._cli import _queue  # noqa: F401  (registers `citelock queue`)
from citelock._cli import _serve  # noqa: F401  (registers `citelock serve`)
from citelock._cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``citelock`` command."""
    app()
