"""The free relevance check (``OFF_QUESTION``): question focus, routing, the guard and ``citelock check``.

What is asserted is what the check guarantees by its rule (an answer holding nothing of what was asked fails,
one that states it passes, the finding is answer-level and consistent with the route), through the real CLI
where a user meets it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock import Guard, SurfacePolicy, UsageError, assemble, serialize
from citelock import check as citelock_check
from citelock.cli import app
from citelock.guard import SHIPPED_RELEVANCE, RelevanceRouting, check_relevance, chunk_relevance, should_abstain
from citelock.guard._relevance import answer_focus, claim_relevance, score_answer
from citelock.prompt import parse_answer
from citelock.records import Layer, ReasonCode
from citelock.text import content_terms, has_answer_type, question_focus, stem

runner = CliRunner()
CHUNKS = [
    {"id": "c-1", "text": "The Aurora Bridge opened to traffic in 1932. It spans 880 meters across Harlow Bay."},
    {"id": "c-10", "text": "The bridge's main span is supported by two steel towers, each 120 meters tall."},
    {"id": "c-3", "text": "Harlow's city council voted 7 to 2 to raise the bridge toll to $3.50 in 2023."},
]
OPENED = "The Aurora Bridge opened to traffic in 1932."


def _quote(text: str, chunk: str) -> dict[str, object]:
    return {"claims": [{"text": text, "citations": [{"chunk_id": chunk, "span": text}]}]}


def test_focus_names_what_a_wh_question_asks_for() -> None:
    assert question_focus("When did the Aurora Bridge open?").answer_type == "date"
    assert question_focus("How long is the Aurora Bridge?").answer_type == "quantity"
    assert question_focus("Who designed the bridge?").answer_type == "agent"
    assert question_focus("Where is the bridge?").answer_type == "place"
    toll = question_focus("What is the toll on the bridge?")
    assert (toll.answer_type, toll.attribute, toll.measure) == ("quantity", "toll", True)
    assert question_focus("Why was the bridge closed?").answer_type is None
    assert "long" not in question_focus("How long is the Aurora Bridge?").terms  # the wh-phrase is not a topic
    assert stem("opened") == stem("open") and stem("bridges") == stem("bridge")
    assert content_terms("The and of what") == ()


def test_a_question_asking_two_things_is_answered_by_either() -> None:
    question = "When did the Aurora bridge open, and how long is it?"
    assert question_focus(question).answer_type is None  # two wh-parts: no one type is required
    for claim in ("It spans 880 meters.", "The Aurora bridge opened in 1932."):
        text = "The Aurora bridge opened in 1932. It spans 880 meters across the bay."
        record = serialize(assemble(question, [{"id": "c-1", "text": text}]))
        answer = {"claims": [{"text": claim, "citations": [{"chunk_id": "c-1", "span": claim.rstrip(".")}]}]}
        report = citelock_check(record, answer)
        assert ReasonCode.OFF_QUESTION not in {f.reason for f in report.findings}, claim


def test_answer_types_are_told_apart() -> None:
    assert has_answer_type(OPENED, "date")
    assert not has_answer_type(OPENED, "quantity")  # a bare year is a date, not a length
    assert has_answer_type("It spans 880 meters.", "quantity")
    assert has_answer_type("It was designed by Ada Lee.", "agent")
    assert not has_answer_type(OPENED, "agent", question_focus("Who designed the Aurora Bridge?").names)


def test_routing_never_passes_an_answer_that_misses_what_was_asked() -> None:
    routing = RelevanceRouting(fail_below=0.2, review_below=0.4)
    assert routing.route(0.1) == "fail"
    assert routing.route(0.3) == "review"
    assert routing.route(0.9) == "pass"
    assert routing.route(0.9, focus_met=False) == "review"
    assert SHIPPED_RELEVANCE.fail_below <= SHIPPED_RELEVANCE.review_below


def test_scores_are_bounded_and_an_on_question_claim_outscores_an_off_question_one() -> None:
    question = "When did the Aurora Bridge open to traffic?"
    on = claim_relevance(question, OPENED)
    off = claim_relevance(question, "Harlow's city council voted 7 to 2 to raise the bridge toll.")
    assert 0.0 <= off < on <= 1.0
    assert score_answer(question, []) == (0.0, None)
    score, met, best = answer_focus(question, ["Hello.", OPENED])
    assert met and best == 1 and score == pytest.approx(1.0)


def test_chunk_relevance_and_abstention() -> None:
    question = "What is the population of Harlow?"
    assert should_abstain(question, [c["text"] for c in CHUNKS])  # no chunk names the measure asked for
    assert not should_abstain("When did the Aurora Bridge open?", [c["text"] for c in CHUNKS])
    assert should_abstain("When did the Aurora Bridge open?", [])
    assert not should_abstain(None, [])  # unknown question: never abstain on it
    score, met = chunk_relevance("How long is the Aurora Bridge?", CHUNKS[0]["text"])
    assert met and score > SHIPPED_RELEVANCE.review_below


def _record(question: str):  # type: ignore[no-untyped-def]
    return serialize(assemble(question, CHUNKS))


@pytest.mark.parametrize(
    ("question", "answer", "route"),
    [
        ("When did the Aurora Bridge open to traffic?", _quote(OPENED, "c-1"), "pass"),
        ("What is the population of Harlow?", _quote(CHUNKS[1]["text"], "c-10"), "fail"),
        ("How long is the Aurora Bridge?", _quote(OPENED, "c-1"), "review"),
    ],
)
def test_guard_reports_off_question_as_an_answer_level_finding(question: str, answer: object, route: str) -> None:
    result = Guard().run(_record(question), answer)  # type: ignore[arg-type]
    assert result.relevance is not None and result.relevance.route == route
    off = [f for f in result.report.findings if f.reason is ReasonCode.OFF_QUESTION]
    assert len(off) == (route != "pass")
    assert Layer.RELEVANCE in result.report.layers
    for finding in off:
        assert finding.claim_index == -1 and finding.layer is Layer.RELEVANCE
        assert finding.verdicts["relevance"] == route and question in finding.detail  # (+ the slot score)
        assert result.decision == "block"
    assert Guard(relevance="off").run(_record(question), answer).relevance is None  # type: ignore[arg-type]


def test_surfaces_decide_what_an_off_question_answer_does() -> None:
    record = _record("What is the population of Harlow?")
    answer = _quote(CHUNKS[1]["text"], "c-10")
    base = {"name": "docs", "stakes": "low", "sample_rate": 0.0}
    assert Guard(SurfacePolicy(**base, on_fail="drop_claim")).run(record, answer).decision == "block"
    marked = Guard(SurfacePolicy(**base, on_fail="mark")).run(record, answer)
    assert marked.decision == "repaired" and all(c.action == "mark" for c in marked.claims)
    off = Guard(SurfacePolicy(**base, relevance="off")).run(record, answer)
    assert off.relevance is None and off.decision == "pass"
    review = _record("How long is the Aurora Bridge?")
    low = Guard(SurfacePolicy(**base)).run(review, _quote(OPENED, "c-1"))  # review: served, queued
    assert low.decision == "pass" and low.report.counts == {"OFF_QUESTION": 1}


def test_an_abstention_or_an_unknown_question_is_not_checked() -> None:
    record = _record("When did the Aurora Bridge open?")
    assert Guard().run(record, {"claims": [{"text": "The sources do not say."}]}).relevance is None
    unknown = record.model_copy(update={"question": None})
    assert Guard().run(unknown, _quote(CHUNKS[1]["text"], "c-10")).relevance is None
    claims = Guard().run(record, _quote(OPENED, "c-1")).report.claims
    assert check_relevance("  ", parse_answer(_quote(OPENED, "c-1")), claims, [None]) is None


def _prompt_file(tmp_path: Path, question: str) -> Path:
    context = "\n".join(f"[{c['id']}] {c['text']}" for c in CHUNKS)
    prompt = {
        "messages": [
            {"role": "system", "content": "Answer from the context."},
            {"role": "user", "content": f"Context:\n{context}\nQuestion: {question}"},
        ],
        "chunks": CHUNKS,
        "question": question,
    }
    path = tmp_path / f"prompt-{abs(hash(question))}.json"
    path.write_text(json.dumps(prompt), encoding="utf-8")
    return path


def test_citelock_check_reports_an_answer_to_another_question(tmp_path: Path) -> None:
    answer = tmp_path / "a.json"
    answer.write_text(json.dumps(_quote(OPENED, "c-1")), encoding="utf-8")
    other = runner.invoke(
        app,
        ["check", "--prompt", str(_prompt_file(tmp_path, "Who designed the toll?")), "--answer", str(answer), "--json"],
    )
    assert other.exit_code == 1, other.output
    assert [f["reason"] for f in json.loads(other.stdout)["findings"]] == ["OFF_QUESTION"]
    own = runner.invoke(
        app,
        [
            "check",
            "--prompt",
            str(_prompt_file(tmp_path, "When did the Aurora Bridge open?")),
            "--answer",
            str(answer),
            "--json",
        ],
    )
    assert own.exit_code == 0, own.output
    assert json.loads(own.stdout)["findings"] == []


class _Recording:
    """A text completer that answers a fixed word and records what it was sent."""

    model_id = "recording"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.sent: list[list[dict[str, str]]] = []

    def complete(self, messages: list[dict[str, str]], *, choices: list[str] | None, max_tokens: int) -> str:
        self.sent.append(messages)
        return self.answer


def _judged(answer: str) -> tuple[Guard, _Recording]:
    from citelock.judges import RelevanceJudge

    completer = _Recording(answer)
    policy = SurfacePolicy(name="docs", stakes="low", sample_rate=0.0, relevance="judged")
    return Guard(policy, relevance_judge=RelevanceJudge(completer)), completer


@pytest.mark.parametrize(("word", "route"), [("yes", "pass"), ("partial", "review"), ("no", "fail")])
def test_the_relevance_judge_settles_what_the_free_check_does_not_pass(word: str, route: str) -> None:
    guard, completer = _judged(word)
    result = guard.run(_record("How long is the Aurora Bridge?"), _quote(OPENED, "c-1"))
    assert result.relevance is not None and result.relevance.judge_label == word and result.relevance.route == route
    assert result.relevance.judge_version == "relevance.v1/recording"
    off = [f for f in result.report.findings if f.reason is ReasonCode.OFF_QUESTION]
    assert len(off) == (route != "pass")
    (sent,) = completer.sent  # the question and the claims, nothing else
    assert "How long is the Aurora Bridge?" in sent[1]["content"] and OPENED in sent[1]["content"]
    assert "880 meters" not in sent[1]["content"]  # no passage
    clean, unused = _judged("no")
    assert clean.run(_record("When did the Aurora Bridge open?"), _quote(OPENED, "c-1")).relevance.route == "pass"  # type: ignore[union-attr]
    assert unused.sent == []  # the free check passed it: the judge is not asked


def test_a_relevance_judge_that_answers_otherwise_is_a_check_error() -> None:
    guard, _ = _judged("maybe")
    result = guard.run(_record("How long is the Aurora Bridge?"), _quote(OPENED, "c-1"))
    errors = [f for f in result.report.findings if f.reason is ReasonCode.CHECK_ERROR]
    assert len(errors) == 1 and errors[0].layer is Layer.RELEVANCE and "maybe" in errors[0].detail
    with pytest.raises(UsageError, match="relevance_judge"):
        Guard(SurfacePolicy(name="docs", stakes="low", sample_rate=0.0, relevance="judged"))
