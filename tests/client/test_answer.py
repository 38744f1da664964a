"""The wrapper API with the scripted FakeBackend: assembly, schema, logging, parsing, guard, rendering."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import citelock
from citelock import BackendLimits, ConstraintViolationError, FakeBackend, GuardedAnswer, ReasonCode, SchemaOptions
from citelock.backends import Generation, TruncatedOutputError

CHUNKS = [
    {
        "id": "c-1",
        "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay.",
        "source": "https://example.org/aurora",
    },
    {"id": "c-2", "text": "Café prices in Zürich rose 5% in 2023."},
]
QUESTION = "How long is the Aurora bridge?"
NAIVE = BackendLimits(policies=())


def _out(*claims: tuple[str, str, str]) -> str:
    data = {"claims": [{"text": t, "citations": [{"chunk_id": c, "span": s}]} for t, c, s in claims]}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def test_constrained_answer_passes_and_renders_footnotes() -> None:
    fake = FakeBackend([_out(("The bridge spans 880 meters.", "c-1", "spans 880 meters"))])
    result = citelock.answer(QUESTION, CHUNKS, backend=fake)
    assert result.ok and not result.findings
    assert result.span_policy == "substring" and result.requested_policy == "substring"
    assert result.downgrade_reason is None
    assert result.answer.claims[0].citations[0].span == "spans 880 meters"
    assert result.rendered == (
        "The bridge spans 880 meters.[1]\n\n[1] c-1 (https://example.org/aurora): “spans 880 meters”"
    )
    assert result.template == "answer_structured.v2"
    sent = fake.calls[0]
    assert sent.schema is not None and sent.schema.policy == "substring"
    assert sent.max_tokens == sent.schema.max_output_chars()
    assert sent.record.metadata["span_policy"] == "substring"


def test_links_and_none_rendering() -> None:
    out = _out(
        ("It spans 880 meters.", "c-1", "It spans 880 meters across the bay."),
        ("Prices rose.", "c-2", "Café prices in Zürich rose 5% in 2023."),
    )
    links = citelock.answer(QUESTION, CHUNKS, backend=FakeBackend([out]), policy="sentence", render="links")
    assert links.rendered == "It spans 880 meters. [c-1](https://example.org/aurora) Prices rose. [c-2](#c-2)"
    plain = citelock.answer(QUESTION, CHUNKS, backend=FakeBackend([out]), policy="sentence", render="none")
    assert plain.rendered == "It spans 880 meters. Prices rose."


def test_a_broken_constraint_is_a_loud_error_never_a_quiet_pass() -> None:
    fake = FakeBackend([_out(("The Aurora bridge is 880 meters long.", "c-999", "spans"))])
    with pytest.raises(ConstraintViolationError, match="c-999"):
        citelock.answer(QUESTION, CHUNKS, backend=fake)


def test_unenforced_structured_output_goes_to_the_guard() -> None:
    fake = FakeBackend([_out(("The Aurora bridge is 880 meters long.", "c-999", "spans"))], enforced=False)
    result = citelock.answer(QUESTION, CHUNKS, backend=fake, policy="id")
    assert not result.ok
    assert [f.reason for f in result.findings] == [ReasonCode.ID_NOT_IN_PROMPT]
    assert "unverified: ID_NOT_IN_PROMPT" in result.rendered


def test_naive_backend_uses_the_free_text_template_and_parser() -> None:
    fake = FakeBackend(["The bridge spans 880 meters [c-1]. Prices rose 5% [c-9]. It is pretty."], limits=NAIVE)
    result = citelock.answer(QUESTION, CHUNKS, backend=fake)
    assert fake.calls[0].schema is None
    assert result.span_policy is None and result.requested_policy is None
    assert result.template == "answer_naive.v3"
    assert result.answer.format == "free_text"
    reasons = sorted(f.reason.value for f in result.findings)
    assert reasons == ["ID_NOT_IN_PROMPT", "UNCITED_CLAIM"]


def test_naive_unparseable_output_raises_with_the_raw_text() -> None:
    fake = FakeBackend(["The bridge [] is long."], limits=NAIVE)
    with pytest.raises(citelock.UnparsedAnswerError, match="empty citation marker") as info:
        citelock.answer(QUESTION, CHUNKS, backend=fake)
    assert info.value.generation.text == "The bridge [] is long."
    assert isinstance(info.value, citelock.RuntimeFailure) and not isinstance(info.value, citelock.UsageError)


def test_downgrade_is_recorded_on_the_answer() -> None:
    fake = FakeBackend(
        [_out(("It spans 880 meters.", "c-1", "It spans 880 meters across the bay."))],
        limits=BackendLimits(policies=("sentence", "id"), json_schema=True),
    )
    result = citelock.answer(QUESTION, CHUNKS, backend=fake, policy="substring")
    assert result.span_policy == "sentence" and result.requested_policy == "substring"
    assert result.downgrade_reason is not None and "substring" in result.downgrade_reason
    assert result.answer.span_policy == "sentence"


def test_truncated_constrained_output_is_a_runtime_failure() -> None:
    class Truncating(FakeBackend):
        def generate(
            self, record: citelock.PromptRecord, schema: citelock.CitationSchema | None, *, max_tokens: int
        ) -> Generation:
            gen = super().generate(record, schema, max_tokens=max_tokens)
            return Generation(text=gen.text[:20], backend="fake", model="m", enforced=True, finish_reason="length")

    with pytest.raises(TruncatedOutputError, match="max_tokens") as caught:
        citelock.answer(QUESTION, CHUNKS, backend=Truncating(["{}"]), max_tokens=5)
    assert isinstance(caught.value, citelock.RuntimeFailure)  # still caught by `except RuntimeFailure`
    assert caught.value.max_tokens == 5 and caught.value.partial == "{}"


def test_prompt_is_logged_exactly_as_sent(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    fake = FakeBackend([_out(("It spans 880 meters.", "c-1", "spans 880 meters"))])
    result = citelock.answer(QUESTION, CHUNKS, backend=fake, log=db, request_id="req-1", metadata={"surface": "docs"})
    logged = citelock.PromptLog(db).get("req-1")
    assert logged == fake.calls[0].record
    assert logged.sha256 == result.prompt_sha256
    assert logged.metadata == {"surface": "docs", "backend": "fake", "span_policy": "substring"}
    # the guard replayed against the log gives the same report
    assert citelock.check(logged, result.answer) == result.report


def test_store_ids_tell_stale_from_fabricated() -> None:
    fake = FakeBackend(["The Aurora bridge spans 880 meters [c-7]. Prices rose 5% [c-8]."], limits=NAIVE)
    result = citelock.answer(QUESTION, CHUNKS, backend=fake, known_ids={"c-1", "c-2", "c-7"})
    assert [f.reason for f in result.findings] == [ReasonCode.STALE_ID, ReasonCode.FABRICATED_ID]


def test_options_bound_the_schema_and_max_tokens() -> None:
    fake = FakeBackend([_out(("Long.", "c-1", "spans"))])
    options = SchemaOptions(max_claims=1, max_citations=1, max_text_chars=40, max_span_chars=30)
    citelock.answer(QUESTION, CHUNKS, backend=fake, options=options, max_tokens=77)
    assert fake.calls[0].max_tokens == 77
    assert fake.calls[0].schema is not None and fake.calls[0].schema.options == options


def test_guarded_answer_is_a_frozen_strict_record_that_round_trips() -> None:
    fake = FakeBackend([_out(("It spans 880 meters.", "c-1", "spans 880 meters"))])
    result = citelock.answer(QUESTION, CHUNKS, backend=fake)
    again = GuardedAnswer.model_validate_json(result.model_dump_json())
    assert again == result
    with pytest.raises(Exception, match="frozen"):
        result.rendered = ""  # type: ignore[misc]
    data = json.loads(result.model_dump_json())
    data["surprise"] = 1
    with pytest.raises(Exception, match="surprise"):
        GuardedAnswer.model_validate(data)
    schema = citelock.guarded_answer_json_schema()
    assert {"answer", "result", "span_policy", "rendered"} <= set(schema["properties"])
    assert not {"findings", "ok", "report", "decision"} & set(schema["properties"])  # read from result


def test_async_variant_matches_sync() -> None:
    out = _out(("It spans 880 meters.", "c-1", "spans 880 meters"))
    sync = citelock.answer(QUESTION, CHUNKS, backend=FakeBackend([out]), request_id="r")
    result = asyncio.run(citelock.aanswer(QUESTION, CHUNKS, backend=FakeBackend([out]), request_id="r"))
    assert result.answer == sync.answer and result.ok and result.rendered == sync.rendered


def test_async_backend_agenerate_is_awaited() -> None:
    class AsyncFake(FakeBackend):
        awaited = 0

        async def agenerate(
            self, record: citelock.PromptRecord, schema: citelock.CitationSchema | None, *, max_tokens: int
        ) -> Generation:
            AsyncFake.awaited += 1
            return self.generate(record, schema, max_tokens=max_tokens)

    backend = AsyncFake([_out(("It spans 880 meters.", "c-1", "spans 880 meters"))])
    assert isinstance(backend, citelock.backends.AsyncBackend)
    result = asyncio.run(citelock.aanswer(QUESTION, CHUNKS, backend=backend))
    assert result.ok and AsyncFake.awaited == 1


def test_fake_backend_script_exhaustion_and_function_scripts() -> None:
    fake = FakeBackend([])
    with pytest.raises(citelock.RuntimeFailure, match="exhausted"):
        citelock.answer(QUESTION, CHUNKS, backend=fake)

    def quote_first_sentence(
        record: citelock.PromptRecord, schema: citelock.CitationSchema | None
    ) -> dict[str, object]:
        assert schema is not None
        chunk_id, sentences = next(iter(schema.sentences.items()))
        return {"claims": [{"text": sentences[0], "citations": [{"chunk_id": chunk_id, "span": sentences[0]}]}]}

    opened = "When did the Aurora bridge open?"  # the first sentence answers this (not QUESTION: OFF_QUESTION)
    result = citelock.answer(opened, CHUNKS, backend=FakeBackend(quote_first_sentence), policy="sentence")
    assert result.ok and result.answer.claims[0].text == "The Aurora bridge opened in 1932."


def test_not_a_backend_is_a_usage_error() -> None:
    with pytest.raises(citelock.UsageError, match=r"citelock\.Backend"):
        citelock.answer(QUESTION, CHUNKS, backend=object())  # type: ignore[arg-type]


def test_answer_runs_the_tiered_surface_guard_and_queues(tmp_path) -> None:
    from citelock.backends import FakeBackend
    from citelock.guard import SurfacePolicy
    from citelock.judges import LexicalJudge
    from citelock.store import ResultStore, ReviewQueue

    chunks = [
        {"id": "c-1", "text": "Revenue grew 12% in 2023."},
        {"id": "c-2", "text": "Freight is paid by the buyer under clause 7."},
    ]
    cite = {"chunk_id": "c-1", "span": "Revenue grew"}
    claim = {"text": "Freight is paid by the buyer.", "citations": [cite]}
    wrong = json.dumps({"claims": [claim]}, separators=(",", ":"))
    db = tmp_path / "team.db"
    plain = citelock.answer("Who pays freight?", chunks, backend=FakeBackend([wrong]))
    assert plain.ok and plain.decision == "pass"  # ①② alone cannot see it
    assert plain.result.accounting.judge_calls == 0
    result = citelock.answer(
        "Who pays freight?", chunks, backend=FakeBackend([wrong]),
        surface=SurfacePolicy(name="legal", stakes="high"), judge=LexicalJudge(),
        queue=ReviewQueue(db), results=ResultStore(db),
    )  # fmt: skip
    assert not result.ok and result.decision == "block" and result.surface == "legal"
    assert [(f.reason.value, f.related_chunk_id) for f in result.findings] == [("WRONG_CHUNK", "c-2")]
    assert result.result.accounting.judge_calls == 1
    assert [e.reason.value for e in ReviewQueue(db)] == ["WRONG_CHUNK"]
    with pytest.raises(citelock.UsageError, match="surface="):
        citelock.answer("Who pays freight?", chunks, backend=FakeBackend([wrong]), judge=LexicalJudge())


@pytest.mark.parametrize("chunks", [5, None, "The Aurora Bridge opened in 1932.", {"id": "c-1", "text": "x"}])
def test_chunks_that_are_no_list_of_chunks_are_refused_at_every_entry(chunks: object) -> None:
    client = citelock.Citelock(backend=FakeBackend())
    expected = "chunks must be an iterable of chunks"
    with pytest.raises(citelock.InputError, match=expected):
        client.answer("When did the Aurora Bridge open?", chunks)  # type: ignore[arg-type]
    with pytest.raises(citelock.InputError, match=expected):
        list(client.stream("When did the Aurora Bridge open?", chunks))  # type: ignore[arg-type]
    with pytest.raises(citelock.InputError, match=expected):
        asyncio.run(client.aanswer("When did the Aurora Bridge open?", chunks))  # type: ignore[arg-type]


def test_history_that_is_no_list_of_messages_is_refused() -> None:
    client = citelock.Citelock(backend=FakeBackend())
    with pytest.raises(citelock.InputError, match="history must be an iterable of messages"):
        client.answer("q?", [{"id": "c-1", "text": "A."}], history="earlier turn")  # type: ignore[arg-type]
