"""Gateway API keys: who may call the gateway, and on which surfaces.

A key is a random secret handed out once (``citelock gateway key create``); the store keeps only its SHA-256,
exactly as the review desk keeps its API tokens (:mod:`citelock.store._accounts`), so a copy of the database
lets nobody in. Each key names the surfaces it may use. Once any key exists, every request needs one
(``Authorization: Bearer KEY``), also after every key was revoked: none or an unknown one is 401, a
surface the key does not name is 403. Keys
live in the stores' database (SQLite or PostgreSQL) so every worker, on every machine, sees the same keys.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Column, DateTime, Engine, MetaData, String, Table, Text, insert, select, update

from citelock.errors import InputError
from citelock.store._accounts import _digest
from citelock.store._engine import make_engine
from citelock.store._tables import ensure_tables

__all__ = ["GatewayKey", "GatewayKeys", "KEY_PREFIX"]

KEY_PREFIX = "clk_"
"""Every gateway key starts with this (so a leaked one is recognisable in logs and secret scanners)."""

_SURFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

_metadata = MetaData()
_keys = Table(
    "citelock_gateway_keys",
    _metadata,
    Column("key_sha256", String(64), primary_key=True),
    Column("key_id", String(16), nullable=False, unique=True),
    Column("surfaces", Text, nullable=False),  # a JSON list of surface names
    Column("label", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)


class GatewayKey(BaseModel):
    """One gateway key (never its secret).

    Attributes:
        key_id: A short public id (the first characters of the key after its prefix), for listing and revoking.
        surfaces: The surfaces it may call.
        label: What it is for.
        created_at: When it was made (UTC).
        revoked: True once revoked.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_id: str
    surfaces: tuple[str, ...]
    label: str | None = None
    created_at: datetime
    revoked: bool = False

    def allows(self, surface: str) -> bool:
        """Whether this key may call ``surface``."""
        return not self.revoked and surface in self.surfaces


class GatewayKeys:
    """The gateway's keys, in the stores' database.

    Args:
        target: A SQLite file path, a database URL (``postgresql://...``) or an engine.
    """

    def __init__(self, target: str | Path | Engine) -> None:
        self.engine = target if isinstance(target, Engine) else make_engine(target)
        ensure_tables(self.engine, _metadata)
        self._any = False  # once a key was seen it stays so (keys are revoked, never deleted): no more reads

    def create(self, surfaces: Collection[str], *, label: str | None = None) -> str:
        """Make a key for ``surfaces``; return its secret (shown once: only its SHA-256 is stored).

        Raises:
            InputError: no surface, or a surface name that is not 1-64 letters, digits, ``.``, ``_`` or ``-``.
        """
        names = tuple(dict.fromkeys(surfaces))
        if not names:
            raise InputError("a gateway key needs at least one surface it may call (--surface NAME)")
        for name in names:
            if not _SURFACE.fullmatch(name):
                raise InputError(
                    f"surface name {name!r} is not valid: expected 1-64 letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit"
                )
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        while secret[len(KEY_PREFIX)] == "-":  # an id starting with '-' would read as an option on the command line
            secret = KEY_PREFIX + secrets.token_urlsafe(32)
        with self.engine.begin() as conn:
            conn.execute(
                insert(_keys).values(
                    key_sha256=_digest(secret),
                    key_id=secret[len(KEY_PREFIX) : len(KEY_PREFIX) + 12],
                    surfaces=json.dumps(list(names)),
                    label=label,
                    created_at=datetime.now(UTC),
                )
            )
        return secret

    def any(self) -> bool:
        """Whether any key was ever made: then every request needs a valid one.

        Revoking every key does not open the gateway again. Until a key exists every call reads the store (a key
        made by another process counts at once); after that none does.
        """
        if not self._any:
            with self.engine.connect() as conn:
                self._any = conn.execute(select(_keys.c.key_id).limit(1)).first() is not None
        return self._any

    def lookup(self, secret: str) -> GatewayKey | None:
        """The key ``secret`` is, or None (unknown or revoked)."""
        if not secret:
            return None
        with self.engine.connect() as conn:
            row = conn.execute(select(_keys).where(_keys.c.key_sha256 == _digest(secret))).mappings().first()
        if row is None or row["revoked_at"] is not None:
            return None
        return _key(row)

    def entries(self) -> list[GatewayKey]:
        """Every key, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(_keys).order_by(_keys.c.created_at)).mappings().all()
        return [_key(row) for row in rows]

    def revoke(self, key_id: str) -> None:
        """Revoke the key with this public id (it stops working at once, on every worker).

        Raises:
            KeyError: no key has this id.
        """
        with self.engine.begin() as conn:
            done = conn.execute(
                update(_keys)
                .where(_keys.c.key_id == key_id, _keys.c.revoked_at.is_(None))
                .values(revoked_at=datetime.now(UTC))
            )
        if done.rowcount == 0:
            raise KeyError(key_id)


def _key(row: object) -> GatewayKey:
    values = dict(row)  # type: ignore[call-overload]
    created = values["created_at"]
    return GatewayKey(
        key_id=values["key_id"],
        surfaces=tuple(json.loads(values["surfaces"])),
        label=values["label"],
        created_at=created if created.tzinfo is not None else created.replace(tzinfo=UTC),
        revoked=values["revoked_at"] is not None,
    )
