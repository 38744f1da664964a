"""A small lexical retriever for a corpus file: BM25 over lowercased words (``citelock answer --top-k``).

Not a production retriever: it lets the command line pick the chunks of a corpus that a question is about, so a
newcomer can try citelock without one. Bring your own retriever in code: :meth:`citelock.Citelock.answer` takes
the retrieved chunks, best first.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from citelock.records import Chunk

__all__ = ["lexical_top_k"]

_WORD = re.compile(r"\w+", re.UNICODE)


def lexical_top_k(question: str, chunks: list[Chunk], k: int) -> list[Chunk]:
    """The ``k`` chunks scoring highest for ``question`` under BM25 (k1=1.2, b=0.75) over lowercased words.

    Ties keep file order; chunks that share no word with the question are still ranked (score 0) so the result
    always has ``min(k, len(chunks))`` chunks. Returned best first, with ``rank`` set.
    """
    docs = [[w.lower() for w in _WORD.findall(c.text)] for c in chunks]
    average = sum(len(d) for d in docs) / len(docs) or 1.0
    frequency = Counter(w for d in docs for w in set(d))
    terms = {w.lower() for w in _WORD.findall(question)}

    def score(doc: list[str]) -> float:
        counts = Counter(doc)
        total = 0.0
        for term in terms:
            tf = counts.get(term, 0)
            if tf:
                idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
                total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / average))
        return total

    order = sorted(range(len(chunks)), key=lambda i: (-score(docs[i]), i))[:k]
    return [chunks[i].model_copy(update={"rank": n}) for n, i in enumerate(order, start=1)]
