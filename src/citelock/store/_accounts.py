"""Review-desk accounts: who may sign in and with which role, and their browser sessions and API tokens.

An account has a name, a role (``reviewer`` or ``admin``) and a password hash made by the caller (the review
desk uses argon2id): this store never sees a password. Browser sessions and API tokens are random secrets
handed to the client once; only their SHA-256 is stored, so a copy of the database signs nobody in. Each
browser session also carries its own CSRF token. Disabling an account ends its sessions and revokes its
tokens at once; a disabled account cannot sign in until it is enabled again.

A browser session can also end by being left unused: :meth:`AccountStore.credential` with ``idle=`` refuses
(and deletes) a session last used longer ago than that. The last use is the ``last_used_at`` column, written
when a session is used but at most once a minute per session (one conditional ``UPDATE``), so a request does
not cost a write and an idle session may end up to a minute early. Sessions made before that column existed
have it empty and count as last used when they were created: an upgrade never lengthens a session.

Unlike the queue, these tables are not append-only: a password changes, a session ends. What reviewers did
is recorded in the queue's events (with the account name), never here.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
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
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from citelock.errors import InputError
from citelock.store._engine import make_engine, serialized
from citelock.store._tables import ensure_tables
from citelock.store._utc import aware

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
    # nullable: added to older databases, whose sessions have none (they count as last used when created)
    Column("last_used_at", DateTime(timezone=True), nullable=True),
)
_last_used = func.coalesce(_sessions.c.last_used_at, _sessions.c.created_at)

_TOUCH_INTERVAL = timedelta(minutes=1)  # a session's last use is written at most this often


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


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _check_idle(idle: timedelta | None, kind: SessionKind) -> None:
    if idle is None:
        return
    if kind != "session":
        raise InputError("an idle timeout applies to browser sessions (kind='session') only, not to API tokens")
    if idle <= timedelta(0):
        raise InputError(f"an idle timeout must be positive, got {idle}")


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
        clock: The current time, aware (default: the system clock in UTC); tests pass their own.

    Attributes:
        clock: The clock every method reads ``now`` from (may be replaced, e.g. by a test).
    """

    def __init__(self, target: str | Path | Engine, *, clock: Callable[[], datetime] | None = None) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        self.clock: Callable[[], datetime] = clock or _utc_now
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

    def _now(self, now: datetime | None = None) -> datetime:
        """``now`` or the clock's time, in UTC (stored times are UTC; SQLite keeps no zone)."""
        moment = now or self.clock()
        if moment.tzinfo is None:
            raise InputError(f"the time must be timezone-aware, got {moment!r}")
        return moment.astimezone(UTC)

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
        now = self._now()
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
                    last_used_at=now,
                )
            )
        return token

    def credential(
        self, token: str, *, kind: SessionKind, idle: timedelta | None = None, now: datetime | None = None
    ) -> Credential | None:
        """What ``token`` stands for, or None (unknown, expired, idle too long, of another kind, account disabled).

        Args:
            token: The secret a session cookie or ``Authorization: Bearer`` header carried.
            kind: ``session`` or ``token``: a token of the other kind is not accepted.
            idle: For a browser session: refuse it when it was last used longer ago than this (and delete it);
                when it is accepted, its last use becomes ``now`` (written at most once a minute).
                None: no idle timeout (and no last use is written).
            now: The current time (default: :attr:`clock`).

        Raises:
            InputError: ``idle`` for an API token, or not positive.
        """
        _check_idle(idle, kind)
        if not token:
            return None
        now = self._now(now)
        digest = _digest(token)
        query = (
            select(
                _sessions.c.kind,
                _sessions.c.csrf,
                _sessions.c.expires_at,
                _last_used.label("last_used"),
                _accounts.c.username,
                _accounts.c.role,
            )
            .select_from(_sessions.join(_accounts, _accounts.c.username == _sessions.c.username))
            .where(
                _sessions.c.token_sha256 == digest,
                _sessions.c.kind == kind,
                _accounts.c.disabled_at.is_(None),
            )
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        expires = aware(row["expires_at"])
        if expires is not None and expires <= now:
            return None
        if idle is not None:
            last_used = aware(row["last_used"]) or now
            if now - last_used > idle:
                self._end_idle(digest, now - idle)
                return None
            if now - last_used >= _TOUCH_INTERVAL:
                self._touch(digest, now)
        return Credential(
            username=row["username"], role=row["role"], kind=row["kind"], csrf=row["csrf"], expires_at=expires
        )

    def _end_idle(self, digest: str, cutoff: datetime) -> None:
        """Delete a session left unused since before ``cutoff`` (not one another request has just used)."""
        with self.engine.begin() as conn:
            conn.execute(
                delete(_sessions).where(
                    _sessions.c.token_sha256 == digest, _sessions.c.kind == "session", _last_used < cutoff
                )
            )

    def _touch(self, digest: str, now: datetime) -> None:
        """Record a session's use at ``now``, unless it was recorded less than a minute ago (by a racing request)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(_sessions)
                .where(_sessions.c.token_sha256 == digest, _last_used <= now - _TOUCH_INTERVAL)
                .values(last_used_at=now)
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

    def purge_expired(self, *, idle: timedelta | None = None) -> int:
        """Delete expired sessions and tokens, and with ``idle`` also browser sessions unused that long.

        It deletes exactly what :meth:`credential` would refuse (with the same ``idle``), so it never ends a
        session that is still valid. Several processes may purge one database at once: the purges take turns
        (the database's write lock on SQLite, an advisory lock on PostgreSQL) and each row is deleted once. A
        session used by a concurrent request is not deleted, since its last use is re-read under the lock.

        Args:
            idle: The idle timeout the desk serves with (``citelock review serve --idle-timeout``); None: delete
                only expired sessions and tokens.

        Returns:
            How many were deleted.

        Raises:
            InputError: ``idle`` not positive.
        """
        _check_idle(idle, "session")
        now = self._now()
        condition = _sessions.c.expires_at <= now
        if idle is not None:
            condition = condition | ((_sessions.c.kind == "session") & (_last_used < now - idle))
        with serialized(self.engine, "citelock_review_sessions.purge") as conn:
            return int(conn.execute(delete(_sessions).where(condition)).rowcount)


def _account(row: object) -> Account:
    data = dict(row)  # type: ignore[call-overload]
    return Account(
        username=data["username"],
        role=data["role"],
        created_at=aware(data["created_at"]) or datetime.now(UTC),
        disabled=data["disabled_at"] is not None,
    )
