import pytest

from citelock import BudgetExceededError, InputError, assemble, load_template, serialize


def _chunks(n: int, size: int = 100):
    return [{"id": f"c-{i}", "text": f"Chunk {i} " + "x" * size, "rank": i + 1} for i in range(n)]


def test_over_budget_fails_loudly_by_default() -> None:
    with pytest.raises(BudgetExceededError, match="over the budget"):
        assemble("q?", _chunks(10), max_chars=600)


def test_drop_drops_whole_chunks_and_records_them() -> None:
    ctx = assemble("q?", _chunks(10), max_chars=900, on_overflow="drop")
    assert 0 < len(ctx.chunks) < 10
    assert [c.id for c in ctx.chunks] + [d.id for d in ctx.dropped] == [f"c-{i}" for i in range(10)]
    assert all(d.reason == "budget" and d.chars == len("Chunk 0 ") + 100 for d in ctx.dropped)
    record = serialize(ctx)
    assert sum(len(m.content) for m in record.messages) <= 900
    for placed in record.chunks:  # every kept chunk is whole in the prompt
        p = placed.placement
        assert record.messages[p.message].content[p.start : p.end] == placed.chunk.text
    assert record.dropped == ctx.dropped


def test_nothing_fits() -> None:
    with pytest.raises(BudgetExceededError, match="even with no chunks"):
        assemble("q?", _chunks(3), max_chars=10, on_overflow="drop")


def test_token_budget_uses_the_counter() -> None:
    ctx = assemble("q?", _chunks(10), max_tokens=80, count_tokens=lambda s: len(s.split()), on_overflow="drop")
    assert len(ctx.chunks) + len(ctx.dropped) == 10 and ctx.dropped
    with pytest.raises(InputError, match="count_tokens"):
        assemble("q?", _chunks(1), max_tokens=5)


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "appears twice"),
        ([{"id": "a b", "text": "x"}], "whitespace"),
        ([{"id": "a", "text": "x", "bogus": 1}], "bogus"),
        ([{"text": "x"}], "id"),
    ],
)
def test_bad_chunks(chunks, message) -> None:
    with pytest.raises(InputError, match=message):
        assemble("q?", chunks)


def test_empty_question() -> None:
    with pytest.raises(InputError, match="question is empty"):
        assemble("  ", _chunks(1))


def test_record_contents() -> None:
    ctx = assemble('Is <b> & "c" safe?', [{"id": "c-1", "text": 'a < b & "c"'}])
    record = serialize(ctx, request_id="req-1", metadata={"surface": "legal"})
    assert record.request_id == "req-1"
    assert record.template.name == "answer_structured" and record.template.version == "2"
    assert len(record.sha256) == 64
    q = record.question_placement
    assert record.messages[q.message].content[q.start : q.end] == "Is &lt;b&gt; &amp; &quot;c&quot; safe?"
    assert record.normalized[q.message][q.norm_start : q.norm_end] == 'Is <b> & "c" safe?'
    p = record.chunks[0].placement
    assert record.normalized[p.message][p.norm_start : p.norm_end] == 'a < b & "c"'
    assert load_template("answer_naive").name == "answer_naive"
    with pytest.raises(InputError):
        load_template("nope")
