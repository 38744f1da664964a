from __future__ import annotations

from pathlib import Path

import pytest

from citelock import MissingExtraError
from citelock.metrics import METRIC_DEFINITIONS, compute_metrics, metrics_chart, metrics_from_store
from citelock.store import ResultStore, ReviewQueue
from support.metrics_answers import results


def test_hand_computed_metrics() -> None:
    a, b, c = results()
    assert (a.decision, b.decision, c.decision) == ("block", "block", "pass")
    m = compute_metrics([a, b, c])
    # precision: judged pairs A0 yes, A1 no, B0 yes
    assert m.get("citation_precision").value == pytest.approx(2 / 3)
    assert (m.get("citation_precision").numerator, m.get("citation_precision").denominator) == (2, 3)
    # recall: factual claims with a supporting citation: A0, B0 of A0 A1 A2 B0 B1 (C1 is unassessed)
    assert m.get("citation_recall").value == pytest.approx(2 / 5)
    # faithfulness: mean of A = 1/3 and B = 1/2 (C has no assessed factual claim)
    assert m.get("faithfulness").value == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert m.get("faithfulness").denominator == 2
    assert m.get("pass_rate").value == pytest.approx(1 / 3)
    assert m.get("unassessed_claims").numerator == 1
    assert m.get("answers").numerator == 3
    # judge calls: A0, A1 + one diagnosis call (c2 says yes), B0 = 4; saved by sampling: C1
    assert m.get("judge_calls").numerator == 4
    assert m.get("saved_by_sampling").numerator == 1
    assert m.get("saved_by_ordering").numerator == 0
    # by rank / strategy of the cited chunk: c1 (rank 1, sentence) 1 of 2; c2 (rank 2, paragraph) 1 of 1
    assert m.get("support_rate_by_rank", key="1").value == pytest.approx(0.5)
    assert m.get("support_rate_by_rank", key="2").value == pytest.approx(1.0)
    assert m.get("support_rate_by_strategy", key="sentence").value == pytest.approx(0.5)
    assert m.get("support_rate_by_strategy", key="paragraph").denominator == 1


def test_scopes_per_surface_and_week() -> None:
    m = compute_metrics(results())
    assert m.surfaces == ["chat", "search"]
    assert m.weeks == ["2025-W07", "2025-W08"]
    assert m.get("answers", surface="chat").numerator == 2
    assert m.get("pass_rate", surface="chat").value == 0.0
    assert m.get("pass_rate", surface="search").value == 1.0
    assert m.get("answers", week="2025-W08").numerator == 1
    assert m.get("citation_recall", surface="chat", week="2025-W07").value == pytest.approx(2 / 5)
    assert m.get("citation_precision", surface="search").value is None  # nothing judged: n/a, not 0
    assert m.get("citation_precision", surface="search").formatted() == "n/a (0/0)"
    with pytest.raises(KeyError):
        m.get("answers", surface="chat", week="2025-W08")
    only = compute_metrics(results(), surface="search")
    assert only.surfaces == ["search"]
    assert only.get("answers").numerator == 1


def test_every_value_carries_its_definition() -> None:
    m = compute_metrics(results())
    assert {v.name for v in m.values} <= set(METRIC_DEFINITIONS)
    assert all(v.definition == METRIC_DEFINITIONS[v.name] for v in m.values)
    data = m.to_json()
    assert data["definitions"]["citation_precision"].startswith("cited (claim, passage) pairs")
    assert len(data["metrics"]) == len(m.values)


def test_metrics_from_the_store_match_and_replays_count_once(tmp_path: Path) -> None:
    db = tmp_path / "citelock.db"
    queue, store = ReviewQueue(db), ResultStore(db)
    direct = compute_metrics(results())
    results(queue, store)
    results(queue, store)  # a replay: appended again, counted once
    assert len(store) == 6
    assert len(queue) == 3  # WRONG_CHUNK, UNCITED_CLAIM, ID_NOT_IN_PROMPT, queued once each
    stored = metrics_from_store(db)
    for name in ("answers", "citation_precision", "citation_recall", "faithfulness", "pass_rate"):
        assert stored.get(name).value == pytest.approx(direct.get(name).value), name
    volume = {v.key: v.numerator for v in stored.scope() if v.name == "queue_volume"}
    assert volume == {"WRONG_CHUNK": 1, "UNCITED_CLAIM": 1, "ID_NOT_IN_PROMPT": 1}
    # queue entries count in the week the answer was served, not the week they were queued
    assert {e.week for e in queue} == {"2025-W07"}
    assert stored.get("queue_volume", week="2025-W07", key="WRONG_CHUNK").numerator == 1
    assert stored.get("queue_repair_rate").value is None
    grouped = queue.grouped()
    queue.resolve(grouped[next(iter(grouped))][0].id, "repair", note="re-cite c2")
    entries = list(queue)
    other = next(e for e in entries if queue.resolution(e.id) is None)
    queue.resolve(other.id, "accept")
    rate = metrics_from_store(db).get("queue_repair_rate")
    assert (rate.numerator, rate.denominator) == (1, 2)
    assert metrics_from_store(db, surface="search").get("answers").numerator == 1


def test_empty_store_gives_na_not_zero(tmp_path: Path) -> None:
    m = metrics_from_store(tmp_path / "empty.db")
    assert m.get("answers").numerator == 0
    assert m.get("citation_precision").value is None
    assert m.get("pass_rate").formatted() == "n/a (0/0)"


def test_chart_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = metrics_chart(compute_metrics(results()), tmp_path / "charts" / "metrics.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


def test_chart_labels_an_undefined_rate_na_and_a_zero_rate_0_percent() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from citelock.metrics._charts import _metrics_figure
    from citelock.metrics._compute import MetricsReport, MetricValue

    def value(name: str, v: float | None, num: float, den: int, key: str | None = None) -> MetricValue:
        return MetricValue(
            name=name, key=key, value=v, numerator=num, denominator=den, definition=METRIC_DEFINITIONS[name]
        )

    report = MetricsReport(
        (
            value("citation_precision", 0.0, 0, 4),  # a real zero: nothing supported out of 4
            value("citation_recall", None, 0, 0),  # undefined: nothing to measure
            value("faithfulness", 0.5, 1.0, 2),
            value("pass_rate", 1.0, 3, 3),
            value("support_rate_by_rank", 0.0, 0, 2, key="1"),
            value("support_rate_by_rank", None, 0, 0, key="2"),
            value("support_rate_by_strategy", 0.25, 1, 4, key="sentence"),
            *(value(n, 2.0, 2, 1) for n in ("judge_calls", "saved_by_ordering", "saved_by_sampling", "cache_hits")),
        )
    )
    fig = _metrics_figure(report, "t")
    try:
        headline, rank = fig.axes[0], fig.axes[3]
        # One label per bar, in _HEADLINE order: precision 0, recall undefined, faithfulness, pass rate.
        assert [t.get_text() for t in headline.texts] == ["0%", "n/a", "50%", "100%"]
        zero, na = headline.texts[0], headline.texts[1]
        assert zero.get_position()[1] == na.get_position()[1] == 0.0  # both at the axis, told apart by the label
        assert [t.get_text() for t in rank.texts] == ["0%\nn=2", "n/a\nn=0"]
        assert [t.get_text() for t in fig.axes[4].texts] == ["25%\nn=4"]
    finally:
        plt.close(fig)


def test_chart_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(MissingExtraError, match=r'pip install "citelock\[eval\]"'):
        metrics_chart(compute_metrics([]), tmp_path / "x.png")
