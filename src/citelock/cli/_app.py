"""The typer application every command registers on."""

from __future__ import annotations

import typer

__all__ = ["EXIT_FINDINGS", "EXIT_INPUT", "EXIT_INTEGRITY", "EXIT_OK", "EXIT_UNREACHABLE", "app"]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_INPUT = 2
EXIT_INTEGRITY = 3
EXIT_UNREACHABLE = 4

app = typer.Typer(
    name="citelock",
    help="Trustworthy citations for RAG answers: constrain, guard, review, measure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Trustworthy citations for RAG answers: constrain, guard, review, measure."""
