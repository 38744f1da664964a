"""A placement counts only where the prompt as sent put that chunk: forged records whose derived fields agree.

Three forgeries passed the derived check while every offset and normalized copy was right: (a) a chunk's id
renamed in the record's ``chunks`` (the prompt still says the old id); (b) a chunk "placed" on text that is no
chunk body: the question, the system message, the template's own words; (c) a chunk placed on an earlier
assistant turn (the model's own words presented as retrieved evidence). Each let a span be verified against
text that was never a retrieved passage. Records are built by the real serializer (two bundled templates, and
``record_from_messages`` for a prompt assembled elsewhere), then edited; honest ones of the same shapes verify.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from citelock import InputError, serialize
from citelock.prompt import assemble, derived_problem, load_record, load_template, record_from_messages
from citelock.prompt._serialize import with_history
from citelock.text import normalize, raw_offset

BODY = "The Aurora Bridge opened to traffic in 1932."
QUESTION = "When did the Aurora Bridge open?"
SAID = "It opened in 1999, as I said before."
HISTORY = [{"role": "user", "content": "Tell me about the bridge."}, {"role": "assistant", "content": SAID}]
TEMPLATES = [("answer_structured", "2"), ("answer_naive", "3")]


def _serialized(template: tuple[str, str]) -> dict[str, Any]:
    context = assemble(QUESTION, [{"id": "c-1", "text": BODY}, {"id": "c-2", "text": "Tolls ended in 1965."}])
    record = with_history(serialize(context, template=load_template(*template)), HISTORY)
    data: dict[str, Any] = json.loads(record.model_dump_json())
    return data


def _external() -> dict[str, Any]:
    user = f"Context:\n[c-1] {BODY}\n[c-2] Tolls ended in 1965.\n\nQuestion: {QUESTION}"
    messages = [{"role": "system", "content": "Answer from the context."}, *HISTORY, {"role": "user", "content": user}]
    chunks = [{"id": "c-1", "text": BODY}, {"id": "c-2", "text": "Tolls ended in 1965."}]
    data: dict[str, Any] = json.loads(record_from_messages(messages, chunks, question=QUESTION).model_dump_json())
    return data


def _place(data: dict[str, Any], message: int, text: str) -> dict[str, int]:
    """The placement of ``text`` (its first occurrence) in message ``message``, offsets mapped as a builder would."""
    norm, needle = data["normalized"][message], normalize(text)
    at = norm.find(needle)
    assert at >= 0, (message, text)
    anchors = [tuple(a) for a in data["offset_maps"][message]]
    end = at + len(needle)
    return {"message": message, "start": raw_offset(anchors, at), "end": raw_offset(anchors, end),
            "norm_start": at, "norm_end": end}  # fmt: skip


def _user(data: dict[str, Any]) -> int:
    return len(data["messages"]) - 1


def _rename(data: dict[str, Any]) -> None:
    data["chunks"][0]["chunk"]["id"] = "c-9"  # the prompt as sent still says c-1


def _swap_ids(data: dict[str, Any]) -> None:
    first, second = data["chunks"][0]["chunk"], data["chunks"][1]["chunk"]
    first["id"], second["id"] = second["id"], first["id"]


def _on_question(data: dict[str, Any]) -> None:
    data["chunks"][1]["chunk"]["text"] = QUESTION
    data["chunks"][1]["placement"] = dict(data["question_placement"])


def _on_system(data: dict[str, Any]) -> None:
    words = data["messages"][0]["content"].split(".")[0]
    data["chunks"].append({"chunk": {"id": "c-3", "text": words}, "status": "complete", "placement": None})
    data["chunks"][-1]["placement"] = _place(data, 0, words)


def _on_template_words(data: dict[str, Any]) -> None:
    user = data["messages"][_user(data)]["content"]
    words = "sources" if "<sources>" in user else "Context:"
    data["chunks"][1]["chunk"]["text"] = words
    data["chunks"][1]["placement"] = _place(data, _user(data), words)


def _on_assistant_turn(data: dict[str, Any]) -> None:
    data["chunks"].append(
        {"chunk": {"id": "c-3", "text": SAID}, "status": "complete", "placement": _place(data, 2, SAID)}
    )


FORGERIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "renamed id": _rename,
    "swapped ids": _swap_ids,
    "on the question": _on_question,
    "on the system message": _on_system,
    "on the template's words": _on_template_words,
    "on an assistant turn": _on_assistant_turn,
}


@pytest.mark.parametrize("template", TEMPLATES, ids="{0[0]}.v{0[1]}".format)
def test_the_serialized_record_with_history_verifies(template: tuple[str, str]) -> None:
    assert derived_problem(load_record(_serialized(template))) is None


@pytest.mark.parametrize("template", TEMPLATES, ids="{0[0]}.v{0[1]}".format)
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_placement_in_a_bundled_templates_record_is_refused(forgery: str, template: tuple[str, str]) -> None:
    data = _serialized(template)
    FORGERIES[forgery](data)
    with pytest.raises(InputError, match=rf"prompt record .*{template[0]}\.v{template[1]}"):
        load_record(data)


def test_a_bundled_template_names_where_it_puts_each_chunk() -> None:
    data = _serialized(TEMPLATES[0])
    _rename(data)
    with pytest.raises(InputError, match=r"not what answer_structured\.v2 renders .*chunks, question and history"):
        load_record(data)


def test_a_record_naming_a_bundled_template_it_was_not_rendered_with_is_refused() -> None:
    data = _external()  # an honest record of a prompt assembled elsewhere, relabelled as the bundled template's
    data["template"] = {"name": "answer_structured", "version": "2"}
    with pytest.raises(InputError, match=r"answer_structured\.v2"):
        load_record(data)


# --- a prompt assembled elsewhere: structural checks ----------------------------------------------------------


def _rename_last(data: dict[str, Any]) -> None:
    data["chunks"][-1]["chunk"]["id"] = "c-9"  # no other id after it: the header's shape gives it away


EXTERNAL_REFUSED = {
    "renamed id": (_rename, "chunk 'c-9': the messages put its text under id 'c-1'"),
    "renamed last id": (_rename_last, "chunk 'c-9': the messages put its text under id 'c-2'"),
    "swapped ids": (_swap_ids, "under id"),
    "on the question": (_on_question, "the question"),
    "on an assistant turn": (_on_assistant_turn, "assistant turn"),
}


def test_the_external_record_with_history_verifies() -> None:
    assert derived_problem(load_record(_external())) is None


@pytest.mark.parametrize("forgery", sorted(EXTERNAL_REFUSED))
def test_a_forged_placement_in_an_external_record_is_refused(forgery: str) -> None:
    data = _external()
    edit, expected = EXTERNAL_REFUSED[forgery]
    edit(data)
    with pytest.raises(InputError, match=f"prompt record .*{expected}"):
        load_record(data)


def test_the_locator_skips_assistant_turns_and_the_question() -> None:
    """A body an assistant turn repeats is located in the context, not in the model's words; one only the
    model's words or the question hold is not in the prompt as a passage (``missing``)."""
    user = f"Context:\n[c-1] {BODY}\n\nQuestion: Is it true that {SAID}"
    messages = [{"role": "assistant", "content": f"{BODY} {SAID}"}, {"role": "user", "content": user}]
    chunks = [{"id": "c-1", "text": BODY}, {"id": "c-2", "text": SAID}]
    record = record_from_messages(messages, chunks, question=f"Is it true that {SAID}")
    first, second = record.chunks
    assert first.status == "complete" and first.placement is not None and first.placement.message == 1
    assert second.status == "missing" and second.placement is None
    assert derived_problem(load_record(record.model_dump_json())) is None


def test_a_history_repeating_a_chunk_still_verifies_for_every_builder() -> None:
    history = [{"role": "user", "content": BODY}, {"role": "assistant", "content": f"Yes: {BODY}"}]
    for template in TEMPLATES:
        context = assemble(QUESTION, [{"id": "c-1", "text": BODY}])
        record = with_history(serialize(context, template=load_template(*template)), history)
        assert derived_problem(load_record(record.model_dump_json())) is None
        sent = [m.model_dump() for m in record.messages]
        located = record_from_messages(sent, [{"id": "c-1", "text": BODY}], question=QUESTION)
        placement = located.chunks[0].placement
        assert placement is not None and located.messages[placement.message].role != "assistant"
        assert derived_problem(load_record(located.model_dump_json())) is None


def test_ids_written_after_their_bodies_are_read_as_trailers() -> None:
    """A prompt citing ``text (c-1)``: the id right after a body is its own, not the next body's header."""
    chunks = [{"id": "c-1", "text": BODY}, {"id": "c-2", "text": "Tolls ended in 1965."}, {"id": "c-3", "text": SAID}]
    user = "Sources:\n" + "\n".join(f"{c['text']} ({c['id']})" for c in chunks) + f"\nQuestion: {QUESTION}"
    record = record_from_messages([{"role": "user", "content": user}], chunks, question=QUESTION)
    data = json.loads(record.model_dump_json())
    assert derived_problem(load_record(data)) is None
    data["chunks"][1]["chunk"]["id"], data["chunks"][2]["chunk"]["id"] = "c-3", "c-2"
    with pytest.raises(InputError, match="chunk 'c-3': the messages put its text under id"):
        load_record(data)


def test_a_template_of_ones_own_needs_a_name_of_its_own() -> None:
    """Named like a bundled template, a caller's own template's record is refused when read back; named
    otherwise it gets the structural checks and verifies."""
    import dataclasses

    own = dataclasses.replace(load_template("answer_structured", "2"), system="Answer briefly from the sources.")
    context = assemble(QUESTION, [{"id": "c-1", "text": BODY}])
    with pytest.raises(InputError, match=r"messages\[0\] is not what answer_structured\.v2 renders"):
        load_record(serialize(context, template=own).model_dump_json())
    renamed = dataclasses.replace(own, name="ours", version="1")
    assert derived_problem(load_record(serialize(context, template=renamed).model_dump_json())) is None


def test_a_relabelled_record_still_may_not_place_a_chunk_on_a_bundled_system_prompt() -> None:
    """The template name is input: relabelled (as ``external``, a path, a template that is no answer template), a
    bundled template's record gets the structural checks, and its system prompt is still citelock's own words."""
    for name in ("external", "judge", "../prompts/answer_structured"):
        data = _serialized(TEMPLATES[0])
        data["template"] = {"name": name, "version": "2"}
        assert derived_problem(load_record(data)) is None
        _on_system(data)
        where = r"chunks\[2\] \('c-3'\): it is placed on messages\[0\], the system prompt of answer_structured"
        with pytest.raises(InputError, match=where):
            load_record(data)


def test_a_chunk_equal_to_an_earlier_chunks_surviving_words_is_placed_after_its_own_header() -> None:
    """Honest messages (a case the slow linear-rewrite property test drew): c-1 cut to one word that is all of
    c-2's text. The first occurrence of c-2's text is under c-1's header, where the label check finds it under
    c-1's id; the locator then looks for c-2 after its own header (it refused these messages)."""
    chunks = [
        {"id": "c-0", "text": "alpha"},
        {"id": "c-1", "text": "gamma beta"},
        {"id": "c-2", "text": "gamma"},
        {"id": "c-3", "text": "beta gamma."},
    ]
    user = "Context:\n[c-0] alpha\n[c-1] gamma\n[c-2] gamma\n[c-3] beta gamma.\nQuestion: what of beta gamma?"
    record = record_from_messages([{"role": "user", "content": user}], chunks, question="what of beta gamma?")
    placed = {pc.id: pc for pc in record.chunks}
    c2 = placed["c-2"].placement
    assert placed["c-2"].status == "complete" and c2 is not None
    assert user[c2.start - len("[c-2] ") : c2.end] == "[c-2] gamma"
    assert derived_problem(load_record(record.model_dump_json())) is None


def test_a_chunks_text_under_another_id_only_is_still_refused() -> None:
    chunks = [{"id": "c-1", "text": "Tolls rose in 2023 after the vote."}, {"id": "c-2", "text": "It is 880 m."}]
    user = "[c-2] Tolls rose in 2023 after the vote.\n[c-2] It is 880 m.\nQuestion: When?"
    with pytest.raises(InputError, match=r"c-1.*under id 'c-2'"):
        record_from_messages([{"role": "user", "content": user}], chunks, question="When?")
