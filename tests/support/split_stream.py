"""A scripted output cut into pieces of given sizes, and a backend that streams it so (for the split tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from citelock import FakeBackend
from citelock.backends import Generation
from citelock.records import PromptRecord

__all__ = ["SplitBackend", "split"]


def split(text: str, sizes: list[int]) -> list[str]:
    """``text`` cut into consecutive pieces, their sizes taken from ``sizes`` in turn."""
    pieces, at, k = [], 0, 0
    while at < len(text):
        step = sizes[k % len(sizes)]
        pieces.append(text[at : at + step])
        at, k = at + step, k + 1
    return pieces


class SplitBackend:
    """A backend streaming a scripted output in the given pieces (a FakeBackend underneath)."""

    def __init__(self, fake: FakeBackend, sizes: list[int]) -> None:
        self.fake, self.sizes = fake, sizes
        self.name, self.limits = fake.name, fake.limits

    def generate(self, record: PromptRecord, schema: Any, *, max_tokens: int) -> Generation:
        return self.fake.generate(record, schema, max_tokens=max_tokens)

    def stream(self, record: PromptRecord, schema: Any, *, max_tokens: int) -> Iterator[str | Generation]:
        generation = self.fake.generate(record, schema, max_tokens=max_tokens)
        yield from split(generation.text, self.sizes)
        yield generation
