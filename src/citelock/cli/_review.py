"""``citelock review``: serve the review desk, and manage its accounts and API tokens.

- ``citelock review serve [--db URL] [--host 127.0.0.1] [--port 8377]``: the web app (the ``review`` extra).
- ``citelock review adduser NAME [--role reviewer|admin] [--password-stdin]``, ``passwd``, ``role``,
  ``disable``, ``enable``, ``users``: accounts (passwords hashed with argon2id).
- ``citelock review token NAME [--days N]``: an API token for scripts (printed once); ``revoke NAME``.
- ``citelock review purge-sessions [--idle-timeout MINUTES] [--json]``: delete ended sessions and tokens (for
  cron; the desk also purges by itself after sign-ins).
"""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any, NoReturn

import typer

from citelock.cli._app import EXIT_UNREACHABLE, app
from citelock.cli._config import ConfigOption
from citelock.cli._io import fail
from citelock.cli._queue import DbOption, resolve_db
from citelock.errors import CitelockError, UsageError

__all__ = ["review_app"]

review_app = typer.Typer(
    help="The review desk: the queue in a browser (serve), its accounts and API tokens.", no_args_is_help=True
)
app.add_typer(review_app, name="review")

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="the account name")]
PasswordStdin = Annotated[
    bool, typer.Option("--password-stdin", help="read the password from the first line of standard input")
]


def _unreachable(target: str, exc: Exception) -> NoReturn:
    typer.echo(f"citelock: error: cannot reach the database {target}: {exc}", err=True)
    raise typer.Exit(EXIT_UNREACHABLE)


def _review() -> Any:
    try:
        import citelock.review as review
    except CitelockError as exc:
        fail(str(exc))
    return review


def _accounts(db: str | None) -> tuple[Any, str]:
    from sqlalchemy.exc import OperationalError

    from citelock.store import AccountStore

    target = resolve_db(db)
    try:
        return AccountStore(target), target
    except OperationalError as exc:
        _unreachable(target, exc)
    except UsageError as exc:
        fail(f"cannot open the accounts at {target}: {exc}")


def _on_account(db: str | None, name: str, action: Callable[[Any], Any]) -> Any:
    """Run ``action`` on the accounts of ``db``: an unknown ``name`` or a refused change exits 2."""
    accounts, _ = _accounts(db)
    try:
        return action(accounts)
    except KeyError:
        fail(f"no account named {name!r}")
    except CitelockError as exc:
        fail(str(exc))


def _password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline()
        if not line:
            fail("--password-stdin: standard input is empty; expected the password on its first line")
        return line.rstrip("\r\n")
    value: str = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    return value


@review_app.command("serve")
def serve(
    db: DbOption = None,
    host: Annotated[str, typer.Option("--host", help="address to bind (loopback unless told otherwise)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="port to listen on")] = 8377,
    session_hours: Annotated[float, typer.Option("--session-hours", min=0.1, help="how long a sign-in lasts")] = 12.0,
    idle_minutes: Annotated[
        float,
        typer.Option("--idle-timeout", min=1.0, metavar="MINUTES", help="a sign-in left unused this long ends"),
    ] = 30.0,
    secure_cookies: Annotated[
        bool, typer.Option("--secure-cookies", help="mark cookies Secure (behind a TLS-terminating proxy)")
    ] = False,
    origin: Annotated[
        list[str] | None,
        typer.Option("--origin", help="an origin the desk is served at, e.g. https://review.example (repeatable)"),
    ] = None,
    purge_minutes: Annotated[
        float,
        typer.Option(
            "--purge-interval",
            min=0.0,
            metavar="MINUTES",
            help="after a sign-in, delete ended sessions at most this often (0: never; cron runs purge-sessions)",
        ),
    ] = 10.0,
    config: ConfigOption = None,
) -> None:
    """Serve the review desk: the queue by reason, entries with the span as sent, outcomes, metrics, exports."""
    review = _review()
    target = resolve_db(db, config)
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        typer.echo(
            f"citelock: warning: serving on {host}, not loopback: anyone who can reach it can try to sign in; "
            "serve it behind TLS (and pass --secure-cookies)",
            err=True,
        )
    from sqlalchemy.exc import OperationalError

    typer.echo(f"citelock review desk on http://{host}:{port} (database {target})", err=True)
    try:
        review.serve(
            target,
            host=host,
            port=port,
            session_lifetime=timedelta(hours=session_hours),
            idle_timeout=timedelta(minutes=idle_minutes),
            secure_cookies=secure_cookies,
            origins=origin or (),
            purge_interval=timedelta(minutes=purge_minutes) if purge_minutes else None,
        )
    except OperationalError as exc:
        _unreachable(target, exc)
    except UsageError as exc:
        fail(f"cannot open the stores at {target}: {exc}")


@review_app.command("adduser")
def adduser(
    name: NameArg,
    role: Annotated[str, typer.Option("--role", help="reviewer or admin")] = "reviewer",
    password_stdin: PasswordStdin = False,
    db: DbOption = None,
) -> None:
    """Create an account (its password is hashed with argon2id; never stored in clear)."""
    review = _review()
    accounts, target = _accounts(db)
    try:
        account = review.create_account(accounts, name, _password(password_stdin), role=role)
    except CitelockError as exc:
        fail(str(exc))
    typer.echo(f"created {account.role} {account.username} in {target}")


@review_app.command("passwd")
def passwd(name: NameArg, password_stdin: PasswordStdin = False, db: DbOption = None) -> None:
    """Set an account's password."""
    review = _review()
    _on_account(db, name, lambda accounts: review.set_password(accounts, name, _password(password_stdin)))
    typer.echo(f"password of {name} changed")


@review_app.command("role")
def role(
    name: NameArg,
    new_role: Annotated[str, typer.Argument(metavar="ROLE", help="reviewer or admin")],
    db: DbOption = None,
) -> None:
    """Change an account's role (applies to its open sessions at once)."""
    _on_account(db, name, lambda accounts: accounts.set_role(name, new_role))
    typer.echo(f"{name} is now {new_role}")


@review_app.command("disable")
def disable(name: NameArg, db: DbOption = None) -> None:
    """Stop an account from signing in; end its sessions and revoke its API tokens now."""
    _on_account(db, name, lambda accounts: accounts.disable(name))
    typer.echo(f"{name} is disabled (sessions ended, tokens revoked)")


@review_app.command("enable")
def enable(name: NameArg, db: DbOption = None) -> None:
    """Let a disabled account sign in again."""
    _on_account(db, name, lambda accounts: accounts.enable(name))
    typer.echo(f"{name} is enabled")


@review_app.command("users")
def users(db: DbOption = None, as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """List the accounts."""
    accounts, _ = _accounts(db)
    found = accounts.accounts()
    if as_json:
        typer.echo(json.dumps([a.model_dump(mode="json") for a in found], indent=2))
        return
    for a in found:
        state = "disabled" if a.disabled else "enabled"
        typer.echo(f"{a.username}\t{a.role}\t{state}\tcreated {a.created_at:%Y-%m-%d}")


@review_app.command("token")
def token(
    name: NameArg,
    days: Annotated[
        float | None, typer.Option("--days", min=0.01, help="valid for this many days (default: until revoked)")
    ] = None,
    label: Annotated[str | None, typer.Option("--label", help="what the token is for")] = None,
    db: DbOption = None,
) -> None:
    """Issue an API token for an account (``Authorization: Bearer TOKEN``); printed once, stored as a hash."""
    lifetime = None if days is None else timedelta(days=days)
    typer.echo(
        _on_account(db, name, lambda accounts: accounts.open(name, kind="token", lifetime=lifetime, label=label))
    )


@review_app.command("revoke")
def revoke(name: NameArg, db: DbOption = None) -> None:
    """Revoke every API token of an account."""
    accounts, _ = _accounts(db)
    typer.echo(f"revoked {accounts.revoke_tokens(name)} token(s) of {name}")


@review_app.command("purge-sessions")
def purge_sessions(
    db: DbOption = None,
    idle_minutes: Annotated[
        float | None,
        typer.Option(
            "--idle-timeout",
            min=1.0,
            metavar="MINUTES",
            help="also end sign-ins unused this long: pass the desk's own --idle-timeout (default: expired only)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the count as JSON")] = False,
) -> None:
    """Delete expired sessions and API tokens (and, with --idle-timeout, idle sign-ins): for a cron job.

    The desk also does this by itself after sign-ins (``serve --purge-interval``). Exits 0 whether or not anything
    was deleted, 2 on bad options, 4 when the database cannot be reached.
    """
    from sqlalchemy.exc import OperationalError

    accounts, target = _accounts(db)
    idle = None if idle_minutes is None else timedelta(minutes=idle_minutes)
    try:
        deleted = accounts.purge_expired(idle=idle)
    except OperationalError as exc:
        _unreachable(target, exc)
    if as_json:
        typer.echo(json.dumps({"deleted": deleted, "idle_timeout_minutes": idle_minutes}))
        return
    scope = "expired" if idle is None else f"expired or unused for {idle_minutes:g} min"
    typer.echo(f"deleted {deleted} session(s) and token(s) ({scope})")
