"""The prompt log's hash chain: how a link is computed, and the report of a walk over the chain.

Record ``n`` stores ``chain_hash(n) = H("citelock-prompt-log-chain-v1" | n | chain_hash(n-1) | request id |
sha256(record JSON))`` where ``H`` is SHA-256, or HMAC-SHA256 under a secret key. The first record's
predecessor is :data:`GENESIS`, or, in a log that holds records written before the chain existed, the
:func:`legacy_seal` of those records. Changing, removing, inserting or reordering any record therefore breaks
the link at (or right after) it, unless every later hash is recomputed too, which needs the key when there is
one. Removing records from the end leaves a shorter valid chain: only a head hash kept elsewhere (an anchor)
shows that.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock.errors import InputError

__all__ = [
    "ALG_HMAC",
    "ALG_PLAIN",
    "GENESIS",
    "KEY_ENV",
    "ChainProblem",
    "ChainReport",
    "content_hash",
    "link_hash",
    "legacy_seal",
    "log_key",
]

GENESIS = "0" * 64
"""The predecessor hash of the first record of a log that started with the chain."""

KEY_ENV = "CITELOCK_LOG_KEY"
"""The environment variable a prompt log reads its HMAC key from when no ``key=`` is given."""

ALG_PLAIN = "sha256"
ALG_HMAC = "hmac-sha256"
Alg = Literal["sha256", "hmac-sha256"]

_LINK_DOMAIN = "citelock-prompt-log-chain-v1"
_SEAL_DOMAIN = "citelock-prompt-log-legacy-seal-v1"


def log_key(key: str | bytes | None) -> bytes | None:
    """The HMAC key to use: ``key`` if given, else ``$CITELOCK_LOG_KEY`` if set, else None (plain SHA-256).

    Raises:
        InputError: an empty key (given or in the environment): an empty key would give no protection.
    """
    if key is None:
        env = os.environ.get(KEY_ENV)
        if env is None:
            return None
        if not env:
            raise InputError(f"${KEY_ENV} is set but empty; unset it or give a non-empty key")
        return env.encode("utf-8")
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if not raw:
        raise InputError("the prompt log key is empty; give a non-empty key or None")
    return raw


def content_hash(payload: str) -> str:
    """SHA-256 of a stored record's JSON text (the ``record_sha256`` column)."""
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def link_hash(key: bytes | None, seq: int, prev_hash: str, request_id: str, record_sha256: str) -> str:
    """The chain hash of record ``seq`` given its predecessor's (HMAC-SHA256 with a key, else SHA-256)."""
    message = "\n".join((_LINK_DOMAIN, str(seq), prev_hash, request_id, record_sha256)).encode("utf-8")
    if key is None:
        return hashlib.sha256(message).hexdigest()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def legacy_seal(rows: Iterable[tuple[str, str]]) -> str:
    """The predecessor of the first chained record in a log with unchained (pre-chain) records.

    Args:
        rows: ``(request_id, record_sha256)`` of every unchained record, sorted by request id (code points).
    """
    digest = hashlib.sha256(_SEAL_DOMAIN.encode("utf-8"))
    count = 0
    for request_id, record_sha256 in rows:
        digest.update(f"\n{request_id}\x1f{record_sha256}".encode())
        count += 1
    digest.update(f"\n{count}".encode())
    return digest.hexdigest()


class ChainProblem(BaseModel):
    """One broken place in the prompt log.

    Attributes:
        seq: The record's position in the chain (None: an unchained legacy record, or the log as a whole).
        request_id: The record's request id (None: the log as a whole, e.g. a missing anchor).
        problem: What is wrong, and what it means.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int | None
    request_id: str | None
    problem: str


class ChainReport(BaseModel):
    """The result of walking a prompt log's chain (:meth:`citelock.store.PromptLog.verify_chain`).

    Attributes:
        records: Records in the log.
        legacy: Unchained records written before the chain existed (each checked against its own hash, and
            together against the seal the first chained record carries).
        keyed: The chain was written with an HMAC key.
        macs_checked: Every link's hash was recomputed (False for a keyed chain walked without the key: links
            and content were checked, the MACs were not).
        head_seq: The last record's position in the chain (None: no chained record).
        head_hash: The last record's chain hash: keep it elsewhere and pass it as ``anchor`` later to detect
            records removed from the end.
        anchor: The anchor that was checked, if any.
        anchor_found: Whether the chain still contains the anchor (None without an anchor).
        problems: The broken places in walk order (legacy records, then the chain; the first 100).
        problem_count: How many broken places there are in all.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    records: int
    legacy: int
    keyed: bool
    macs_checked: bool
    head_seq: int | None
    head_hash: str | None
    anchor: str | None = None
    anchor_found: bool | None = None
    problems: list[ChainProblem] = Field(default_factory=list)
    problem_count: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is broken (and the anchor, if any, was found)."""
        return not self.problems

    @property
    def first_broken(self) -> ChainProblem | None:
        """The first broken record, or None."""
        return self.problems[0] if self.problems else None
