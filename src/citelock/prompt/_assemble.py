"""Assembly: a question and retrieved chunks become a :class:`Context` under a budget.

Over budget, assembly either fails loudly (the default) or drops *whole* chunks from the end of the ranking and
records each one. It never cuts a chunk's tail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from citelock.errors import BudgetExceededError, InputError
from citelock.prompt._templates import PromptTemplate, load_template
from citelock.records import Chunk, Context, DroppedChunk

__all__ = ["assemble", "coerce_chunks", "render_messages"]

OnOverflow = Literal["error", "drop"]

_CHUNKS: TypeAdapter[tuple[Chunk, ...]] = TypeAdapter(tuple[Chunk, ...])


def coerce_chunks(chunks: Iterable[Chunk | Mapping[str, Any]]) -> tuple[Chunk, ...]:
    """Turn chunks given as records or dicts into :class:`Chunk` records, rejecting duplicate ids.

    Raises:
        InputError: a chunk is malformed (names which one and why) or an id repeats.
    """
    items = list(chunks)
    try:
        out = _CHUNKS.validate_python(items)  # one call for all of them (records pass through as they are)
    except ValidationError as exc:
        err = exc.errors()[0]
        index, *loc = err["loc"]
        _reject_duplicates(_CHUNKS.validate_python(items[: int(index)]))  # an earlier repeat is reported first
        where = ".".join(str(p) for p in loc) or "(root)"
        raise InputError(f"chunk #{index} is not a valid chunk: {where}: {err['msg']}") from None
    _reject_duplicates(out)
    return out


def _reject_duplicates(chunks: tuple[Chunk, ...]) -> None:
    seen: set[str] = set()
    for index, chunk in enumerate(chunks):
        if chunk.id in seen:
            raise InputError(f"chunk #{index}: id {chunk.id!r} appears twice; chunk ids must be unique")
        seen.add(chunk.id)


def render_messages(template: PromptTemplate, question: str, chunks: Iterable[Chunk]) -> list[dict[str, str]]:
    """Render the messages for ``question`` and ``chunks`` (used for budget checks and serialization)."""
    body = template.separator.join(
        template.render({"id": c.id, "text": template.escaped(c.text)}, "chunk")[0] for c in chunks
    )
    user, _ = template.render({"chunks": body, "question": template.escaped(question)}, "user")
    return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]


def assemble(
    question: str,
    chunks: Iterable[Chunk | Mapping[str, Any]],
    *,
    template: str | PromptTemplate = "answer_structured",
    max_chars: int | None = None,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
    on_overflow: OnOverflow = "error",
) -> Context:
    """Assemble a question and chunks (in ranking order) into a :class:`Context` that fits the budget.

    The budget counts the whole rendered prompt (system and user messages) in characters (``max_chars``)
    and/or tokens (``max_tokens``, counted with ``count_tokens``).

    Args:
        question: The user's question.
        chunks: Retrieved chunks, best first; records or dicts with at least ``id`` and ``text``.
        template: Template name (or a loaded template) the prompt will be rendered with.
        max_chars: Character budget for the rendered prompt, or None.
        max_tokens: Token budget for the rendered prompt, or None (needs ``count_tokens``).
        count_tokens: Counts the tokens of a string (your model's tokenizer).
        on_overflow: ``error`` raises :class:`BudgetExceededError`; ``drop`` drops whole chunks from the end
            and records each in ``Context.dropped``.

    Raises:
        InputError: malformed chunks, duplicate ids, an empty question, or a token budget without a counter.
        BudgetExceededError: over budget with ``on_overflow="error"``, or nothing fits even with no chunks.
    """
    if not question.strip():
        raise InputError("question is empty; expected the user's question text")
    if max_tokens is not None and count_tokens is None:
        raise InputError("max_tokens needs count_tokens (a function str -> int using your model's tokenizer)")
    if on_overflow not in ("error", "drop"):
        raise InputError(f"on_overflow must be 'error' or 'drop', got {on_overflow!r}")
    tmpl = load_template(template) if isinstance(template, str) else template
    kept = list(coerce_chunks(chunks))

    def size(selection: list[Chunk]) -> tuple[int, int | None]:
        text = "".join(m["content"] for m in render_messages(tmpl, question, selection))
        tokens = count_tokens(text) if (max_tokens is not None and count_tokens) else None
        return len(text), tokens

    def fits(measured: tuple[int, int | None]) -> bool:
        chars, tokens = measured
        return (max_chars is None or chars <= max_chars) and (
            max_tokens is None or tokens is None or tokens <= max_tokens
        )

    measured = size(kept)
    dropped: list[DroppedChunk] = []
    if not fits(measured):
        if on_overflow == "error":
            raise BudgetExceededError(
                f"the prompt needs {measured[0]} chars"
                + (f" / {measured[1]} tokens" if measured[1] is not None else "")
                + f" with {len(kept)} chunks, over the budget (max_chars={max_chars}, max_tokens={max_tokens});"
                " raise the budget, retrieve fewer chunks, or pass on_overflow='drop' to drop whole chunks"
            )
        # Largest prefix of the ranking that fits: size grows with the prefix, so binary search it.
        low, high = 0, len(kept) - 1
        while low < high:
            mid = (low + high + 1) // 2
            if fits(size(kept[:mid])):
                low = mid
            else:
                high = mid - 1
        if not fits(size(kept[:low])):
            raise BudgetExceededError(
                f"even with no chunks the prompt needs {size([])[0]} chars, over max_chars={max_chars}"
            )
        dropped = [DroppedChunk(id=c.id, chars=len(c.text), reason="budget") for c in kept[low:]]
        kept = kept[:low]
    return Context(
        question=question,
        chunks=tuple(kept),
        dropped=tuple(dropped),
        budget_chars=max_chars,
    )
