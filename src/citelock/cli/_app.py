"""The typer application every command registers on."""

from __future__ import annotations

import typer

__all__ = ["EXIT_FINDINGS", "EXIT_INPUT", "EXIT_OK", "app"]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_INPUT = 2

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
