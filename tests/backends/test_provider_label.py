"""The server's label on generations and errors, and ``server=``, the one name of the server kind.

No server runs here: the ``/v1/models`` listings follow what each engine's source writes (vLLM's and SGLang's
``ModelCard.owned_by`` defaults, llama.cpp's ``llama-server`` ``"owned_by": "llamacpp"``, llama-cpp-python's
``"me"``). The real llama-cpp-python server is in ``test_server_integration.py``.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from dataclasses import replace
from typing import Any

import pytest

import citelock
from citelock.backends import InstructorBackend, OpenAIBackend
from citelock.constraint import build_schema
from citelock.errors import BackendError, BackendHTTPError
from citelock.judges import OpenAICompleter
from citelock.runtime import PROFILES, UNNAMED_KIND, said_kind

pytest.importorskip("openai")
from support.openai_transport import Server, completion, scripted_async_client, scripted_client

CHUNKS = [{"id": "s1", "text": "The plant opened in 1998. It makes glass bottles."}]
ANSWER = json.dumps(
    {"claims": [{"text": "It opened in 1998.", "citations": [{"chunk_id": "s1", "span": "The plant opened in 1998."}]}]}
)
SERVER_ERROR = (500, {"error": {"message": "out of memory"}}, {})


def listing(owned_by: str) -> dict[str, Any]:
    """A ``/v1/models`` body as the engine writes it."""
    return {"object": "list", "data": [{"id": "served", "object": "model", "created": 0, "owned_by": owned_by}]}


def generate(backend: OpenAIBackend) -> Any:
    context = citelock.assemble("When did it open?", CHUNKS)
    return backend.generate(citelock.serialize(context), build_schema(context, "sentence"), max_tokens=200)


def test_an_unnamed_server_is_openai_compatible_not_llama_cpp_python() -> None:
    server = Server(completion(ANSWER))
    backend = OpenAIBackend.from_client(scripted_client(server), model="m")
    assert backend.provider == UNNAMED_KIND == "openai-compatible"
    generation = generate(backend)
    assert server.bodies[0]["grammar"].startswith("root ::= ")  # still built as for llama-cpp-python
    assert (generation.server_kind, generation.profile, generation.delivery) == (
        "openai-compatible",
        "llama-cpp-python",
        "grammar",
    )
    assert "delivery: grammar (openai-compatible; built as for llama-cpp-python, assumed: name the server with" in (
        " ".join(generation.notes)
    )


@pytest.mark.parametrize(
    ("owned_by", "label"),
    [("vllm", "vllm"), ("sglang", "sglang"), ("llamacpp", "llama.cpp"), ("me", "openai-compatible")],
)
def test_the_listing_fetched_for_the_model_name_tells_what_the_server_is(owned_by: str, label: str) -> None:
    server = Server(listing(owned_by), completion(ANSWER))
    backend = OpenAIBackend.from_client(scripted_client(server))
    assert backend.provider == "openai-compatible"  # nothing asked yet: nothing is claimed
    generation = generate(backend)
    assert server.bodies[0] == {"get": "/v1/models"} and generation.model == "served"
    assert (generation.server_kind, generation.profile) == (label, "llama-cpp-python")
    assert backend.provider == label
    note = next(n for n in generation.notes if n.startswith("delivery: "))
    hint = f"pass server={label!r}" if label in PROFILES else "name the server with server="
    assert note == f"delivery: grammar ({label}; built as for llama-cpp-python, assumed: {hint})"


def test_a_configured_server_kind_is_the_label_whatever_the_listing_says() -> None:
    server = Server(listing("vllm"), completion(ANSWER))
    backend = OpenAIBackend.from_client(scripted_client(server), server="sglang")
    generation = generate(backend)
    assert (generation.server_kind, generation.profile, backend.provider) == ("sglang", "sglang", "sglang")
    assert "delivery: ebnf (sglang)" in generation.notes


def test_errors_carry_the_label_sync_and_async() -> None:
    backend = OpenAIBackend.from_client(scripted_client(Server(listing("llamacpp"), SERVER_ERROR)))
    with pytest.raises(BackendHTTPError) as info:
        citelock.answer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=50)
    assert info.value.provider == "llama.cpp" and info.value.status == 500

    backend = OpenAIBackend.from_client(scripted_async_client(Server(listing("vllm"), SERVER_ERROR)))
    with pytest.raises(BackendHTTPError) as info:
        asyncio.run(citelock.aanswer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=50))
    assert info.value.provider == "vllm"

    backend = OpenAIBackend.from_client(scripted_client(Server(SERVER_ERROR)), model="m")
    with pytest.raises(BackendHTTPError) as info:
        citelock.answer("When?", CHUNKS, backend=backend, policy="sentence", max_tokens=50)
    assert info.value.provider == "openai-compatible"


def test_the_constructors_label_as_from_client_does() -> None:
    assert OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m").provider == "openai-compatible"
    assert OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m", server="vllm").provider == "vllm"
    assert OpenAIBackend(api_key="sk-test", model="m").provider == "openai"  # OpenAI itself is no assumption
    assert InstructorBackend(base_url="http://127.0.0.1:9/v1", model="m").provider == "openai-compatible"
    completer = OpenAICompleter(base_url="http://127.0.0.1:9/v1", model="m", server="llama.cpp")
    assert completer.model_id == "llama.cpp:m"


def test_the_judge_labels_the_server_but_versions_by_profile_and_instructor_errors_say_what_it_said() -> None:
    completer = OpenAICompleter.from_client(scripted_client(Server(listing("sglang"))))
    # the version names how verdict requests are built: the same whether or not the listing was read
    assert completer.model_id == "llama-cpp-python:served" and completer.provider == "sglang"
    unlisted = OpenAICompleter.from_client(scripted_client(Server()), model="served")
    assert unlisted.model_id == completer.model_id and unlisted.provider == "openai-compatible"
    instructor = InstructorBackend.from_client(scripted_client(Server(listing("vllm"), SERVER_ERROR)), max_reasks=0)
    with pytest.raises(BackendError) as info:
        citelock.answer("When?", CHUNKS, backend=instructor, policy="sentence", max_tokens=50)
    assert info.value.provider == "vllm" and instructor.provider == "vllm"


def test_setting_a_profile_of_another_kind_names_the_server() -> None:
    backend = OpenAIBackend.from_client(scripted_client(Server()), model="m")
    backend.profile = backend.profile.with_limits(max_enum_values=3)  # same kind: still an assumption
    assert backend.provider == "openai-compatible"
    backend.profile = replace(PROFILES["llama.cpp"], kind="llama.cpp-b6000")
    assert backend.provider == "llama.cpp-b6000" and backend.delivery.name == "grammar"


def test_only_owned_by_values_that_name_a_server_are_read_as_one() -> None:
    assert [said_kind(v) for v in ("vllm", "sglang", "llamacpp")] == ["vllm", "sglang", "llama.cpp"]
    assert [said_kind(v) for v in ("me", "openai", "system", "", None, 3)] == [None] * 6


@pytest.mark.parametrize(
    "make", [OpenAIBackend.from_client, InstructorBackend.from_client, OpenAICompleter.from_client]
)
def test_server_is_the_one_name_of_the_server_kind(make: Any) -> None:
    client = scripted_client(Server())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # server= warns about nothing
        made = make(client, server="sglang", model="m")
    assert made.transport.profile.kind == "sglang" and made.transport.provider == "sglang"
    with pytest.raises(TypeError, match="profile"):  # the pre-0.1 alias is gone
        make(client, profile="sglang", model="m")
