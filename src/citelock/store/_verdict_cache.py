"""A verdict cache in front of any judge, keyed by what the judge sees and who the judge is.

Key: ``(sha256(claim), sha256(passage), judge name, judge version)``. Nothing else enters the key, because
nothing else enters the judge: the same pair gets the same verdict whatever request it came from. A new judge
version never reuses an old verdict. Memory by default; a SQLite file (or database URL) to share across runs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from sqlalchemy import Column, Float, MetaData, String, Table, Text, func, select
from sqlalchemy.exc import IntegrityError

from citelock.judges._protocol import Judge
from citelock.records import Verdict
from citelock.store._engine import make_engine
from citelock.store._tables import ensure_tables

__all__ = ["CacheKey", "CachedJudge", "MemoryVerdictCache", "SqlVerdictCache", "VerdictCache", "cache_key"]

CacheKey = tuple[str, str, str, str]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(claim: str, passage: str, judge: str, version: str) -> CacheKey:
    """The cache key of one judgement."""
    return (_sha(claim), _sha(passage), judge, version)


class VerdictCache(Protocol):
    """Where cached verdicts live."""

    def get(self, key: CacheKey) -> Verdict | None:
        """The cached verdict, or None."""
        ...

    def put(self, key: CacheKey, verdict: Verdict) -> None:
        """Store a verdict."""
        ...


class MemoryVerdictCache:
    """An in-process dict."""

    def __init__(self) -> None:
        self._data: dict[CacheKey, Verdict] = {}

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: CacheKey) -> Verdict | None:
        """The cached verdict, or None."""
        return self._data.get(key)

    def put(self, key: CacheKey, verdict: Verdict) -> None:
        """Store a verdict."""
        self._data[key] = verdict


_metadata = MetaData()
_verdicts = Table(
    "citelock_judge_verdicts",
    _metadata,
    Column("claim_sha256", String(64), primary_key=True),
    Column("passage_sha256", String(64), primary_key=True),
    Column("judge", String(128), primary_key=True),
    Column("version", String(128), primary_key=True),
    Column("label", String(16), nullable=False),
    Column("raw", Text, nullable=False),
    Column("score", Float, nullable=True),
)


class SqlVerdictCache:
    """Verdicts in a SQLite file or a database URL (created on first use; concurrent writers tolerated).

    Args:
        target: A SQLite path or a database URL (see :func:`citelock.store.make_engine`).
    """

    def __init__(self, target: str | Path) -> None:
        self._engine = make_engine(target)
        ensure_tables(self._engine, _metadata)

    def __len__(self) -> int:
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(_verdicts)).scalar_one())

    def get(self, key: CacheKey) -> Verdict | None:
        """The cached verdict, or None."""
        c = _verdicts.c
        query = select(c.label, c.raw, c.score).where(
            c.claim_sha256 == key[0], c.passage_sha256 == key[1], c.judge == key[2], c.version == key[3]
        )
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return Verdict(label=row.label, raw=row.raw, judge=key[2], version=key[3], score=row.score)

    def put(self, key: CacheKey, verdict: Verdict) -> None:
        """Store a verdict (a concurrent writer that got there first wins; verdicts are equal by key)."""
        values = {
            "claim_sha256": key[0],
            "passage_sha256": key[1],
            "judge": key[2],
            "version": key[3],
            "label": verdict.label,
            "raw": verdict.raw,
            "score": verdict.score,
        }
        try:
            with self._engine.begin() as conn:
                conn.execute(_verdicts.insert().values(**values))
        except IntegrityError:
            pass  # same key already stored by another writer


class CachedJudge:
    """Wrap ``judge`` with a verdict cache; it is itself a :class:`Judge` with the same name and version.

    Args:
        judge: Any judge.
        cache: None for memory, a path or URL for SQL, or any :class:`VerdictCache`.
    """

    def __init__(self, judge: Judge, cache: VerdictCache | str | Path | None = None) -> None:
        self.inner = judge
        self.name = judge.name
        self.version = judge.version
        if cache is None:
            self.cache: VerdictCache = MemoryVerdictCache()
        elif isinstance(cache, str | Path):
            self.cache = SqlVerdictCache(cache)
        else:
            self.cache = cache
        self.hits = 0
        self.misses = 0

    def judge(self, claim: str, passage: str) -> Verdict:
        """The cached verdict for this exact pair and judge version, or a fresh one (then cached)."""
        key = cache_key(claim, passage, self.inner.name, self.inner.version)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached.model_copy(update={"cached": True})
        self.misses += 1
        verdict = self.inner.judge(claim, passage)
        self.cache.put(key, verdict.model_copy(update={"cached": False}))
        return verdict
