"""The entry and prompt views: the cited span at the offsets guard ① verified, the cut point of a cut chunk."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from citelock import ReasonCode
from citelock.metrics import metrics_from_store
from citelock.review import chunk_view, prompt_view
from citelock.review._charts import HEADLINE, bars_chart, rates_chart
from citelock.text import normalize
from support.review_desk import Seeded, seed_desk


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed_desk(str(tmp_path_factory.mktemp("views") / "desk.db"), accounts=False)


def test_the_span_is_marked_at_the_verified_offsets(seeded: Seeded) -> None:
    view = seeded.desk.entry(seeded.ids[ReasonCode.UNSUPPORTED])
    cited = view.cited
    assert cited is not None and cited.status == "complete" and cited.verified
    record = seeded.records["req-finance"]
    assert cited.message is not None and cited.span_start is not None and cited.span_end is not None
    content = record.messages[cited.message].content
    assert content[cited.span_start : cited.span_end] == "billed to the buyer"
    assert cited.body_start is not None and cited.body_end is not None
    assert cited.body_start <= cited.span_start < cited.span_end <= cited.body_end
    # the segments are the body as sent, split around the span
    assert "".join(s.text for s in cited.segments) == content[cited.body_start : cited.body_end]
    marked = [s for s in cited.segments if s.kind == "span"]
    assert [s.text for s in marked] == ["billed to the buyer"]
    before = "".join(s.text for s in cited.segments[: cited.segments.index(marked[0])])
    assert before == content[cited.body_start : cited.span_start]
    assert "characters" in cited.note and str(cited.span_start) in cited.note


def test_a_cut_chunk_shows_where_it_was_cut_and_the_span_beyond(seeded: Seeded) -> None:
    view = seeded.desk.entry(seeded.ids[ReasonCode.SPAN_TRUNCATED])
    cited = view.cited
    assert cited is not None and cited.status == "truncated" and not cited.verified
    record = seeded.records["req-warranty"]
    chunk = next(pc.chunk for pc in record.chunks if pc.id == "d1")
    assert cited.cut_at is not None and cited.unsent_chars == len(chunk.text) - cited.cut_at
    sent = [s for s in cited.segments if s.kind == "text"]
    unsent = [s for s in cited.segments if s.kind in ("cut", "cut_span")]
    assert normalize("".join(s.text for s in sent)) == normalize(chunk.text[: cited.cut_at])
    assert "".join(s.text for s in unsent) == chunk.text[cited.cut_at :]
    assert [s.text for s in cited.segments if s.kind == "cut_span"] == ["billed at the standard hourly rate"]
    assert "never saw" in cited.note


def test_wrong_chunk_shows_the_chunk_that_supports_it(seeded: Seeded) -> None:
    view = seeded.desk.entry(seeded.ids[ReasonCode.WRONG_CHUNK])
    assert view.related is not None and view.related.chunk_id == "c2"
    assert "".join(s.text for s in view.related.segments).startswith("Operating margins expanded to 30%")
    assert view.answer is not None and view.answer.decision == "block"
    assert view.chunk_ids == ("c1", "c2", "c3")


def test_a_span_in_another_chunk_is_marked_there(seeded: Seeded) -> None:
    view = seeded.desk.entry(seeded.ids[ReasonCode.SPAN_IN_OTHER_CHUNK])
    assert view.cited is not None and not view.cited.verified
    assert "different assembled chunk" in view.cited.note
    assert view.related is not None and view.related.chunk_id == "c2" and view.related.verified
    assert [s.text for s in view.related.segments if s.kind == "span"] == ["expanded to 30%"]


def test_ids_the_prompt_never_had_and_missing_chunks(seeded: Seeded) -> None:
    record = seeded.records["req-finance"]
    assert chunk_view(record, "nope", None).status == "not_in_prompt"
    view = chunk_view(record, "c1", None)
    assert view.status == "complete" and [s.kind for s in view.segments] == ["text"]


def test_without_the_logged_prompt_the_passage_is_shown_unverified(tmp_path: Path) -> None:
    seeded = seed_desk(str(tmp_path / "desk.db"), accounts=False)
    entry = seeded.desk.queue.get(seeded.ids[ReasonCode.UNSUPPORTED])
    from citelock.review import entry_view
    from citelock.store import PromptLog, ResultStore

    other = PromptLog(tmp_path / "empty.db")
    view = entry_view(entry, [], other, ResultStore(tmp_path / "empty.db"))
    assert view.prompt_state == "missing" and "not in the prompt log" in view.prompt_problem
    assert view.cited is not None and view.cited.status == "unverified" and not view.cited.verified
    assert [s.text for s in view.cited.segments if s.kind == "found"] == ["billed to the buyer"]
    assert view.answer is None


def test_the_prompt_view_cuts_messages_into_pieces_that_add_up(seeded: Seeded) -> None:
    record = seeded.records["req-finance"]
    entry = seeded.desk.queue.get(seeded.ids[ReasonCode.UNSUPPORTED])
    view = prompt_view(record, entry)
    for message, original in zip(view.messages, record.messages, strict=True):
        assert "".join(p.text for p in message.pieces) == original.content
    marked = [p for m in view.messages for p in m.pieces if p.marked]
    assert [p.text for p in marked] == ["billed to the buyer"]
    chunks = {p.chunk_id for m in view.messages for p in m.pieces if p.chunk_id}
    assert chunks == {"c1", "c2", "c3"}
    assert any(p.question for m in view.messages for p in m.pieces)


def test_no_template_bypasses_escaping() -> None:
    folder = Path(__file__).resolve().parents[2] / "src" / "citelock" / "review" / "templates"
    templates = sorted(folder.glob("*.html"))
    assert len(templates) >= 8
    for path in templates:
        text = path.read_text(encoding="utf-8")
        for bypass in ("|safe", "| safe", "autoescape false", "Markup(", "<script>", " style=", " on"):
            if bypass == " on":
                assert not re.search(r"\son[a-z]+\s*=", text), path.name  # no inline event handlers
                continue
            assert bypass not in text, (path.name, bypass)


def test_an_undefined_rate_is_drawn_as_n_a_not_zero(seeded: Seeded) -> None:
    report = metrics_from_store(seeded.db)
    # the warranty answer alone on its surface and week: its one citation failed provenance, nothing was judged
    (scope,) = [
        (v.surface, v.week)
        for v in report.values
        if v.name == "citation_precision" and v.value is None and "all" not in (v.surface, v.week)
    ]
    chart = rates_chart(report, [("all", "all", "all"), ("that", *scope)], "t")
    undefined = [name for name in HEADLINE if report.get(name, surface=scope[0], week=scope[1]).value is None]
    assert "citation_precision" in undefined
    assert [label.text for label in chart.labels].count("n/a") == len(undefined)
    tips = [rect.title for rect in chart.rects]
    assert len(tips) == 2 * len(HEADLINE) - len(undefined)
    assert not any(t.startswith(f"{name.replace('_', ' ')} — that") for t in tips for name in undefined)
    volume = bars_chart([("UNSUPPORTED", 4), ("WRONG_CHUNK", 2)], "v")
    assert [r.width for r in volume.rects] == [320.0, 160.0]
