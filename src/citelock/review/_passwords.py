"""Passwords of review-desk accounts: argon2id (argon2-cffi, the ``review`` extra), never stored in clear.

The hash parameters are argon2-cffi's defaults (RFC 9106's second recommended profile); a stored hash made with
older parameters is re-hashed at the next successful sign-in. Signing in as an unknown or disabled account
still verifies a password against a hash, so the answer takes as long as for a real account.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from citelock.errors import InputError, MissingExtraError
from citelock.store._accounts import Account, AccountStore, Role

__all__ = ["MIN_PASSWORD_LENGTH", "authenticate", "create_account", "hash_password", "set_password", "verify_password"]

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 1024


@cache
def _hasher() -> Any:
    try:
        from argon2 import PasswordHasher
    except ImportError:
        raise MissingExtraError("review", "argon2-cffi") from None
    return PasswordHasher()


@cache
def _dummy_hash() -> str:
    return str(_hasher().hash("citelock: no such account"))


def _check(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InputError(f"a password needs at least {MIN_PASSWORD_LENGTH} characters, got {len(password)}")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InputError(f"a password has at most {MAX_PASSWORD_LENGTH} characters, got {len(password)}")


def hash_password(password: str) -> str:
    """An argon2id hash of ``password``.

    Raises:
        InputError: shorter than :data:`MIN_PASSWORD_LENGTH` or longer than 1024 characters.
        MissingExtraError: argon2-cffi is not installed (``pip install "citelock[review]"``).
    """
    _check(password)
    return str(_hasher().hash(password))


def verify_password(stored_hash: str, password: str) -> bool:
    """Whether ``password`` matches ``stored_hash`` (False for a malformed hash too)."""
    from argon2.exceptions import InvalidHashError, VerificationError

    if len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        return bool(_hasher().verify(stored_hash, password))
    except (VerificationError, InvalidHashError):
        return False


def create_account(accounts: AccountStore, username: str, password: str, *, role: Role = "reviewer") -> Account:
    """Create an account with a hashed password.

    Raises:
        InputError: an invalid name, role or password, or the name is taken.
    """
    return accounts.add(username, role=role, password_hash=hash_password(password))


def set_password(accounts: AccountStore, username: str, password: str) -> None:
    """Replace an account's password.

    Raises:
        KeyError: no such account.
        InputError: the password is too short or too long.
    """
    accounts.set_password_hash(username, hash_password(password))


def authenticate(accounts: AccountStore, username: str, password: str) -> Account | None:
    """The account when ``password`` is its password and it is enabled, else None (in the same time)."""
    stored = accounts.password_hash(username)
    if stored is None:
        verify_password(_dummy_hash(), password)
        return None
    if not verify_password(stored, password):
        return None
    if _hasher().check_needs_rehash(stored):
        accounts.set_password_hash(username, hash_password(password))
    return accounts.get(username)
