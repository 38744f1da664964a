"""Review-desk accounts: who may sign in and with which role, and their browser sessions and API tokens.

An account has a name, a role (``reviewer`` or ``admin``) and a password hash made by the caller (the review
desk uses argon2id): this store never sees a password. Browser sessions and API tokens are random secrets
handed to the client once; only their SHA-256 is stored, so a copy of the database signs nobody in. Each
browser session also carries its own CSRF token. Disabling an account ends its sessions and revokes its
tokens at once; a disabled account cannot sign in until it is enabled again.

Unlike the queue, these tables are not append-only: a password changes, a session ends. What reviewers did
is recorded in the queue's events (with the account name), never here.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    ForeignKey,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from citelock.errors import InputError
from citelock.store._engine import make_engine
from citelock.store._tables import ensure_tables

__all__ = ["Account", "AccountStore", "Credential", "Role", "SessionKind"]

Role = Literal["reviewer", "admin"]
SessionKind = Literal["session", "token"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")

_metadata = MetaData()
_accounts = Table(
    "citelock_review_accounts",
    _metadata,
    Column("username", String(64), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("password_hash", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("disabled_at", DateTime(timezone=True), nullable=True),
)
_sessions = Table(
    "citelock_review_sessions",
    _metadata,
    Column("token_sha256", String(64), primary_key=True),
    Column("username", String(64), ForeignKey("citelock_review_accounts.username"), nullable=False, index=True),
    Column("kind", String(8), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("label", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
)


class Account(BaseModel):
    """One account (never its password hash).

    Attributes:
        username: The sign-in name, recorded as the reviewer of every outcome the account records.
        role: ``reviewer`` (reviews open entries, re-reviews its own outcomes) or ``admin`` (also re-reviews
            anyone's).
        created_at: When it was created (UTC).
        disabled: True when it may not sign in.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    username: str
    role: Role
    created_at: datetime
    disabled: bool = False


class Credential(BaseModel):
    """What a valid session cookie or API token stands for.

    Attributes:
        username: The account.
        role: Its role now (a role change applies to open sessions at once).
        kind: ``session`` (a browser sign-in) or ``token`` (an API token).
        csrf: The session's CSRF token (forms and the ``X-CSRF-Token`` header must carry it).
        expires_at: When it stops working (None: an API token without an expiry).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    username: str
    role: Role
    kind: SessionKind
    csrf: str
    expires_at: datetime | None


def _aware(moment: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; every stored time is UTC."""
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _check_name(username: str) -> str:
    if not _NAME.fullmatch(username):
        raise InputError(
            f"account name {username!r} is not valid: expected 1-64 characters, letters, digits, '.', '_', '@' "
            "or '-', starting with a letter or digit"
        )
    return username


def _check_role(role: str) -> Role:
    if role not in get_args(Role):
        raise InputError(f"role must be reviewer or admin, got {role!r}")
    return role  # type: ignore[return-value]


class AccountStore:
    """Accounts, sessions and API tokens of the review desk, in the stores' database.

    Args:
        target: A SQLite file path (created if missing), a database URL (``postgresql://...``) or an engine.
    """

    def __init__(self, target: str | Path | Engine) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        ensure_tables(self.engine, _metadata)

    # --- accounts ---------------------------------------------------------------------------------------------

    def add(self, username: str, *, role: Role, password_hash: str) -> Account:
        """Create an account.

        Raises:
            InputError: an invalid name or role, an empty hash, or the name is taken.
        """
        _check_name(username)
        _check_role(role)
        if not password_hash:
            raise InputError("an account needs a password hash")
        account = Account(username=username, role=role, created_at=datetime.now(UTC))
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(_accounts).values(
                        username=username, role=role, password_hash=password_hash, created_at=account.created_at
                    )
                )
        except IntegrityError:
            raise InputError(f"an account named {username!r} already exists") from None
        return account

    def get(self, username: str) -> Account:
        """The account named ``username``.

        Raises:
            KeyError: no such account.
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(_accounts).where(_accounts.c.username == username)).mappings().first()
        if row is None:
            raise KeyError(username)
        return _account(row)

    def accounts(self) -> list[Account]:
        """Every account, by name."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(_accounts).order_by(_accounts.c.username)).mappings().all()
        return [_account(row) for row in rows]

    def password_hash(self, username: str) -> str | None:
        """The stored hash of an enabled account, or None (no such account, or disabled)."""
        query = select(_accounts.c.password_hash).where(
            _accounts.c.username == username, _accounts.c.disabled_at.is_(None)
        )
        with self.engine.connect() as conn:
            found = conn.execute(query).scalar_one_or_none()
        return None if found is None else str(found)

    def set_password_hash(self, username: str, password_hash: str) -> None:
        """Replace an account's password hash (its open sessions stay valid; disable it to end them).

        Raises:
            KeyError: no such account.
            InputError: an empty hash.
        """
        if not password_hash:
            raise InputError("an account needs a password hash")
        self._update(username, password_hash=password_hash)

    def set_role(self, username: str, role: Role) -> None:
        """Change an account's role (applies to its open sessions at once).

        Raises:
            KeyError: no such account.
            InputError: an unknown role.
        """
        self._update(username, role=_check_role(role))

    def disable(self, username: str) -> None:
        """Stop an account from signing in, end its sessions and revoke its API tokens.

        Raises:
            KeyError: no such account.
        """
        with self.engine.begin() as conn:
            changed = conn.execute(
                update(_accounts)
                .where(_accounts.c.username == username, _accounts.c.disabled_at.is_(None))
                .values(disabled_at=datetime.now(UTC))
            ).rowcount
            conn.execute(delete(_sessions).where(_sessions.c.username == username))
        if not changed:
            self.get(username)  # raises KeyError for an unknown name; an already disabled one is fine

    def enable(self, username: str) -> None:
        """Let a disabled account sign in again.

        Raises:
            KeyError: no such account.
        """
        self._update(username, disabled_at=None)

    def _update(self, username: str, **values: object) -> None:
        with self.engine.begin() as conn:
            changed = conn.execute(update(_accounts).where(_accounts.c.username == username).values(**values)).rowcount
        if not changed:
            raise KeyError(username)

    # --- sessions and tokens ----------------------------------------------------------------------------------

    def open(
        self,
        username: str,
        *,
        kind: SessionKind = "session",
        lifetime: timedelta | None = timedelta(hours=12),
        label: str | None = None,
    ) -> str:
        """Start a browser session or issue an API token for an enabled account.

        Args:
            username: The account.
            kind: ``session`` or ``token``.
            lifetime: How long it stays valid (None: until revoked; only for API tokens).
            label: What the token is for (shown by ``citelock review tokens``).

        Returns:
            The secret token (shown once; only its SHA-256 is stored).

        Raises:
            KeyError: no such account.
            InputError: the account is disabled, a session without a lifetime, or an unknown kind.
        """
        if kind not in get_args(SessionKind):
            raise InputError(f"kind must be session or token, got {kind!r}")
        if kind == "session" and lifetime is None:
            raise InputError("a browser session needs a lifetime")
        account = self.get(username)
        if account.disabled:
            raise InputError(f"account {username!r} is disabled")
        token = secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        with self.engine.begin() as conn:
            conn.execute(
                insert(_sessions).values(
                    token_sha256=_digest(token),
                    username=username,
                    kind=kind,
                    csrf=secrets.token_urlsafe(32),
                    label=label,
                    created_at=now,
                    expires_at=None if lifetime is None else now + lifetime,
                )
            )
        return token

    def credential(self, token: str, *, kind: SessionKind) -> Credential | None:
        """What ``token`` stands for, or None (unknown, expired, of another kind, or its account disabled)."""
        if not token:
            return None
        query = (
            select(_sessions.c.kind, _sessions.c.csrf, _sessions.c.expires_at, _accounts.c.username, _accounts.c.role)
            .select_from(_sessions.join(_accounts, _accounts.c.username == _sessions.c.username))
            .where(
                _sessions.c.token_sha256 == _digest(token),
                _sessions.c.kind == kind,
                _accounts.c.disabled_at.is_(None),
            )
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        expires = _aware(row["expires_at"])
        if expires is not None and expires <= datetime.now(UTC):
            return None
        return Credential(
            username=row["username"], role=row["role"], kind=row["kind"], csrf=row["csrf"], expires_at=expires
        )

    def close(self, token: str) -> None:
        """End a session or revoke a token (nothing happens for an unknown one)."""
        with self.engine.begin() as conn:
            conn.execute(delete(_sessions).where(_sessions.c.token_sha256 == _digest(token)))

    def revoke_tokens(self, username: str) -> int:
        """Revoke every API token of an account; returns how many there were."""
        with self.engine.begin() as conn:
            return int(
                conn.execute(
                    delete(_sessions).where(_sessions.c.username == username, _sessions.c.kind == "token")
                ).rowcount
            )

    def purge_expired(self) -> int:
        """Delete expired sessions and tokens; returns how many."""
        with self.engine.begin() as conn:
            return int(conn.execute(delete(_sessions).where(_sessions.c.expires_at <= datetime.now(UTC))).rowcount)


def _account(row: object) -> Account:
    data = dict(row)  # type: ignore[call-overload]
    return Account(
        username=data["username"],
        role=data["role"],
        created_at=_aware(data["created_at"]) or datetime.now(UTC),
        disabled=data["disabled_at"] is not None,
    )
