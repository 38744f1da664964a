"""The typer application every command registers on, and the exit-code contract every command keeps.

Exit codes (the same for every command; printed at the end of every ``--help``):

=====  ==================================================================================================
0      ok: the answer passed, or the command did what was asked
1      findings: the guard found problems (the answer was blocked or repaired; a benchmark missed a defect)
2      unusable input or options: a file that cannot be read or parsed, a bad option value or combination
3      integrity failure of a store: a tampered or broken prompt log, queue or database file
4      a backend or server is unreachable: connection refused, timed out, a managed server did not start,
       a database server or a locked SQLite file that did not answer in time
5      another runtime failure: the model or backend answered with an error, a refusal, truncated or unusable
       output; the database failed while running (disk full, I/O error)
70     internal error: a bug in citelock (``--debug`` prints the traceback; please report it)
130    interrupted (Ctrl-C, or standard input closed at an interactive prompt)
141    the reader of the output went away (a closed pipe, as in ``citelock ... | head``)
=====  ==================================================================================================

Every failure prints one line to standard error, ``citelock: error: ...``, naming the file or option, the field
and what was expected; no traceback reaches the user unless ``--debug`` (or ``CITELOCK_DEBUG=1``) asks for one.
Exceptions are mapped here, once, by type (see :mod:`citelock.errors` for the tree), not in each command.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

try:  # typer >= 0.22 carries its own copy of click; before that, click itself
    from typer.exceptions import TyperException as _SelfReporting
except ImportError:  # pragma: no cover - older typer
    from click import ClickException as _SelfReporting  # type: ignore[assignment]

from citelock.errors import (
    BackendConnectionError,
    BackendTimeoutError,
    CitelockError,
    RuntimeFailure,
    ServerStartError,
    StoreIntegrityError,
    UsageError,
)

__all__ = [
    "EXIT_CODES",
    "EXIT_CODES_HELP",
    "EXIT_FINDINGS",
    "EXIT_INPUT",
    "EXIT_INTEGRITY",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_RUNTIME",
    "EXIT_UNREACHABLE",
    "app",
    "classify",
    "interrupted",
    "using_database",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_INPUT = 2
EXIT_INTEGRITY = 3
EXIT_UNREACHABLE = 4
EXIT_RUNTIME = 5
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "ok",
    EXIT_FINDINGS: "findings (the answer failed a check: blocked or repaired)",
    EXIT_INPUT: "unusable input or options",
    EXIT_INTEGRITY: "integrity failure of a store (tampered or broken log, queue or database)",
    EXIT_UNREACHABLE: "a backend, server or database is unreachable (refused, timed out, did not start)",
    EXIT_RUNTIME: "another runtime failure (the backend answered with an error or unusable output)",
    EXIT_INTERNAL: "internal error, a bug (--debug shows the traceback)",
    EXIT_INTERRUPTED: "interrupted",
    EXIT_PIPE: "the output pipe was closed by its reader",
}
"""Every exit code a citelock command can return, with its meaning."""

EXIT_CODES_HELP = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items()) + "."
"""The epilog every command's ``--help`` ends with."""

_DEBUG_KEY = "citelock.debug"

# SQLite primary result codes (https://www.sqlite.org/rescode.html) and what they mean for a command.
_SQLITE_EXIT = {
    3: EXIT_INPUT,  # SQLITE_PERM
    8: EXIT_INPUT,  # SQLITE_READONLY
    14: EXIT_INPUT,  # SQLITE_CANTOPEN
    23: EXIT_INPUT,  # SQLITE_AUTH
    11: EXIT_INTEGRITY,  # SQLITE_CORRUPT
    26: EXIT_INTEGRITY,  # SQLITE_NOTADB
    5: EXIT_UNREACHABLE,  # SQLITE_BUSY: still locked after the busy timeout
    6: EXIT_UNREACHABLE,  # SQLITE_LOCKED
}


def classify(exc: BaseException) -> tuple[int, str]:
    """The exit code for an exception that escaped a command, and the one-line message to print.

    The mapping (the contract in the module docstring): :class:`~citelock.errors.UsageError` (and so
    :class:`~citelock.errors.InputError`) and an ``OSError`` on a named file → 2;
    :class:`~citelock.errors.StoreIntegrityError` and a damaged database file → 3;
    :class:`~citelock.errors.BackendConnectionError`, :class:`~citelock.errors.BackendTimeoutError`,
    :class:`~citelock.errors.ServerStartError`, an unreachable database → 4; any other
    :class:`~citelock.errors.RuntimeFailure` or database failure → 5; anything else is a bug → 70.
    """
    if isinstance(exc, UsageError):
        return EXIT_INPUT, str(exc)
    if isinstance(exc, StoreIntegrityError):
        return EXIT_INTEGRITY, f"store integrity failure: {exc}"
    if isinstance(exc, BackendConnectionError | BackendTimeoutError | ServerStartError):
        return EXIT_UNREACHABLE, f"unreachable: {exc}"
    if isinstance(exc, RuntimeFailure):
        return EXIT_RUNTIME, f"{type(exc).__name__}: {exc}"
    if isinstance(exc, CitelockError):  # pragma: no cover - every CitelockError is a UsageError or RuntimeFailure
        return EXIT_INTERNAL, f"{type(exc).__name__}: {exc}"
    database = _database_failure(exc)
    if database is not None:
        return database
    if isinstance(exc, ImportError):  # e.g. a database URL whose driver is not installed
        return EXIT_INPUT, f"a module this needs is not installed: {exc}"
    if isinstance(exc, ConnectionError | TimeoutError):
        return EXIT_UNREACHABLE, f"unreachable: {exc}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return EXIT_INPUT, f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, RecursionError):
        return EXIT_INPUT, "the input is nested too deeply to process (a JSON value nested hundreds of levels deep?)"
    if isinstance(exc, MemoryError):
        return EXIT_INPUT, "out of memory: the input is too large for this machine"
    return EXIT_INTERNAL, f"internal error ({type(exc).__name__}: {exc}); this is a bug: --debug prints the traceback"


def interrupted(exc: BaseException) -> bool:
    """True when ``exc`` is, or was raised while handling, a Ctrl-C (``KeyboardInterrupt``).

    A Ctrl-C that lands inside a database commit reaches the command as the driver's error from the rollback that
    followed (``cannot rollback - no transaction is active``), with the interrupt as its context: it is still an
    interrupt (exit 130), not a database failure.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


_DATABASE_NOTE = "citelock database: "


@contextmanager
def using_database(target: str | Path) -> Iterator[None]:
    """Name ``target`` in the message of a database error raised inside the block (the error is re-raised)."""
    try:
        yield
    except Exception as exc:
        exc.add_note(f"{_DATABASE_NOTE}{target}")
        raise


def _database_failure(exc: BaseException) -> tuple[int, str] | None:
    """SQLAlchemy / driver errors raised by a store, classified by the driver's own error code."""
    try:
        from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
    except ImportError:  # pragma: no cover - sqlalchemy is a core dependency
        return None
    if not isinstance(exc, SQLAlchemyError | sqlite3.Error):
        return None
    if isinstance(exc, ArgumentError):  # an unparsable URL, an unknown dialect (NoSuchModuleError)
        return EXIT_INPUT, f"the database URL is not usable: {exc}"
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    detail = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    named = [n.removeprefix(_DATABASE_NOTE) for n in getattr(exc, "__notes__", ()) if n.startswith(_DATABASE_NOTE)]
    where = f"the database {named[0]}" if named else "the database (--db or $CITELOCK_DB)"
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        exit_code = _SQLITE_EXIT.get(code & 0xFF, EXIT_RUNTIME) if isinstance(code, int) else EXIT_RUNTIME
    elif type(orig).__module__.startswith("psycopg") and type(orig).__name__ == "OperationalError":
        exit_code = EXIT_UNREACHABLE  # psycopg raises OperationalError when the server cannot be reached
    else:
        exit_code = EXIT_RUNTIME
    what = {
        EXIT_INPUT: "cannot be opened for writing or reading",
        EXIT_INTEGRITY: "is damaged or not a database (store integrity failure)",
        EXIT_UNREACHABLE: "is unreachable or locked",
    }.get(exit_code, "failed")
    return exit_code, f"{where} {what}: {detail}"


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file descriptor (e.g. a test runner's buffer)
        pass


class _CitelockGroup(TyperGroup):
    """The root command group: the exit-code epilog on every command, and one place mapping exceptions."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _add_epilog(self)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, SystemExit):
            raise
        except (typer.Abort, EOFError):
            typer.echo("citelock: aborted (Ctrl-C, or standard input closed at a prompt)", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if isinstance(exc, _SelfReporting):  # typer's usage errors print themselves and exit 2
                raise
            if interrupted(exc):  # a Ctrl-C that surfaced as another error (e.g. inside a commit)
                typer.echo("citelock: interrupted (Ctrl-C)", err=True)
                raise typer.Exit(EXIT_INTERRUPTED) from None
            _fail_with(exc, debug=bool(ctx.meta.get(_DEBUG_KEY)))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line; a closed output pipe exits 141, an abort at a prompt 130."""
        try:
            return super().main(*args, **kwargs)
        except BrokenPipeError:  # pragma: no cover - needs a real pipe closed by its reader
            _silence_stdout()
            sys.exit(EXIT_PIPE)


def _fail_with(exc: BaseException, *, debug: bool) -> NoReturn:
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        raise typer.Exit(EXIT_PIPE)
    code, message = classify(exc)
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    typer.echo(f"citelock: error: {message}", err=True)
    raise typer.Exit(code)


def _add_epilog(command: Any) -> None:
    """Give ``command`` and every command below it the exit-code epilog (their own epilog comes first)."""
    epilog = getattr(command, "epilog", None)
    if not epilog or EXIT_CODES_HELP not in epilog:
        command.epilog = f"{epilog}\n\n{EXIT_CODES_HELP}" if epilog else EXIT_CODES_HELP
    for sub in getattr(command, "commands", {}).values():
        _add_epilog(sub)


app = typer.Typer(
    name="citelock",
    help="Trustworthy citations for RAG answers: constrain, guard, review, measure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_CitelockGroup,
)


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar="CITELOCK_DEBUG", help="on an error, also print the traceback (for a bug report)"
        ),
    ] = False,
) -> None:
    """Trustworthy citations for RAG answers: constrain, guard, review, measure."""
    ctx.meta[_DEBUG_KEY] = debug
