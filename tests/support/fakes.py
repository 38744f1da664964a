"""Deterministic test judges and record builders shared by the support/policy/queue/metrics tests.

The judges here are test doubles: a keyword-overlap judge, a recorder, a failing judge. The real offline
judge is tested with the guard in test_support_offline_judge.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from citelock import Chunk, PromptRecord, Verdict, assemble, serialize
from citelock.judges._routing import Routing

_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were with".split()
)


def content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9%]+", text.lower()) if w not in _STOP]


@dataclass
class KeywordJudge:
    """yes when every content word of the claim is in the passage, partial when at least half are, else no."""

    name: str = "keyword-test"
    version: str = "1"

    def judge(self, claim: str, passage: str) -> Verdict:
        words = content_words(claim)
        have = set(content_words(passage))
        share = sum(w in have for w in words) / len(words) if words else 0.0
        label = "yes" if share == 1.0 else "partial" if share >= 0.5 else "no"
        return Verdict(label=label, raw=f"{label} ({share:.2f})", judge=self.name, version=self.version)


@dataclass
class RecordingJudge:
    """Wraps a judge and records every (claim, passage) it was given."""

    inner: KeywordJudge = field(default_factory=KeywordJudge)
    calls: list[tuple[str, str]] = field(default_factory=list)
    name: str = "recording-test"
    version: str = "1"

    def judge(self, claim: str, passage: str) -> Verdict:
        self.calls.append((claim, passage))
        return self.inner.judge(claim, passage)


@dataclass
class FailingJudge:
    """Raises on every call (or only on passages containing ``trigger``)."""

    trigger: str | None = None
    name: str = "failing-test"
    version: str = "1"

    def judge(self, claim: str, passage: str) -> Verdict:
        if self.trigger is None or self.trigger in passage:
            raise RuntimeError("judge backend timed out")
        return KeywordJudge().judge(claim, passage)


@dataclass
class CountingCacheJudge:
    """A keyword judge with an in-memory cache whose hits say so on the verdict (``cached=True``), as caches do."""

    cache_hits: int = 0
    cache: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    name: str = "cached-keyword-test"
    version: str = "1"

    def judge(self, claim: str, passage: str) -> Verdict:
        key = (claim, passage)
        if key in self.cache:
            self.cache_hits += 1
            return self.cache[key].model_copy(update={"cached": True})
        self.cache[key] = KeywordJudge().judge(claim, passage)
        return self.cache[key]


def make_record(question: str, chunks: Iterable[Chunk | dict[str, object]], request_id: str = "req-1") -> PromptRecord:
    return serialize(assemble(question, list(chunks)), request_id=request_id)


REVENUE_CHUNKS = [
    Chunk(id="c1", text="Revenue grew 12% in 2024.", rank=1, strategy="sentence"),
    Chunk(id="c2", text="Operating margins expanded to 30% in 2024.", rank=2, strategy="paragraph"),
    Chunk(id="c3", text="Freight costs are billed to the buyer under clause 7.", rank=3, strategy="paragraph"),
]


@dataclass
class ShareJudge:
    """Score = share of the claim's content words found in the passage; label yes / partial (>= 0.5) / no."""

    name: str = "share-test"
    version: str = "1"
    calls: list[tuple[str, str]] = field(default_factory=list)

    def judge(self, claim: str, passage: str) -> Verdict:
        self.calls.append((claim, passage))
        words = content_words(claim)
        have = set(content_words(passage))
        share = sum(w in have for w in words) / len(words) if words else 0.0
        label = "yes" if share == 1.0 else "partial" if share >= 0.5 else "no"
        return Verdict(label=label, raw=f"share={share:.2f}", judge=self.name, version=self.version, score=share)


# the routing the share judge's scores are routed by in the routing and repair tests
ROUTING = Routing(pass_at=0.75, fail_below=0.4, judge="share-test", judge_version="1", method="manual")
