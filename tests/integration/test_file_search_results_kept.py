"""A ``file_search_call`` keeps its passages for the conversation, and shows them only to a request asking for them.

Every read path hides ``results`` unless its ``include`` names
``file_search_call.results`` (a query parameter on reads, repeated, bracketed
or comma-separated); a later response in the conversation, or along
``previous_response_id``, gives the model the passages as it read them.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ferryman.testing import ScriptedReply, ScriptedToolCall
from file_search_support import KEYWORD_SEARCH, SeededStore, seed_vector_store
from inprocess import Served
from sse import frames

MODEL = "scripted-model"
TIMETABLE = "The first ferry leaves the harbour at nine in the morning."
INCLUDE = "file_search_call.results"


@pytest.fixture()
def docs(model: Served) -> SeededStore:
    """A vector store of one file."""
    return seed_vector_store(model, {"timetable.txt": TIMETABLE})


def _search_then(model: Served, answer: str) -> None:
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": "first ferry"})]),
        ScriptedReply(text=answer),
    )


def _body(docs: SeededStore, **extra: Any) -> dict[str, Any]:
    tool = {"type": "file_search", "vector_store_ids": [docs.vector_store_id], "ranking_options": KEYWORD_SEARCH}
    return {"model": MODEL, "input": "When does the first ferry leave?", "tools": [tool], **extra}


def _create(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    created: dict[str, Any] = answer.json()
    return created


def _results(items: list[dict[str, Any]]) -> list[Any]:
    """The ``results`` of each ``file_search_call`` among ``items``."""
    return [item["results"] for item in items if item["type"] == "file_search_call"]


def _found(results: list[Any]) -> bool:
    """Whether every search shows the passage it found."""
    return bool(results) and all(r is not None and r[0]["text"] == TIMETABLE for r in results)


def _streamed(http: httpx.Client, method: str, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    with http.stream(method, url, **kwargs) as answer:
        assert answer.status_code == 200
        return [frame.json() for frame in frames(answer)]


def _event_results(events: list[dict[str, Any]]) -> list[Any]:
    """The ``results`` of the searches the events hold: finished items and the final response's output."""
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    return _results(done) + _results(events[-1]["response"]["output"])


def test_a_response_shows_its_passages_only_to_a_read_that_asks(
    http: httpx.Client, model: Served, docs: SeededStore
) -> None:
    _search_then(model, "At nine [1].")

    response = _create(http, _body(docs))

    assert _results(response["output"]) == [None]
    url = f"/v1/responses/{response['id']}"
    assert _results(http.get(url).json()["output"]) == [None]
    assert _results(http.get(url, params={"include": "message.input_image.image_url"}).json()["output"]) == [None]
    for asks in ({"include[]": INCLUDE}, {"include": INCLUDE}, {"include": f"reasoning.encrypted_content,{INCLUDE}"}):
        assert _found(_results(http.get(url, params=asks).json()["output"])), asks
    listed = http.get("/v1/responses").json()["data"]
    assert _results(next(r for r in listed if r["id"] == response["id"])["output"]) == [None]


def test_a_streamed_response_shows_its_passages_only_to_a_stream_that_asks(
    http: httpx.Client, model: Served, docs: SeededStore
) -> None:
    _search_then(model, "At nine [1].")
    _search_then(model, "At nine [1].")

    hidden = _streamed(http, "POST", "/v1/responses", json=_body(docs, stream=True))
    shown = _streamed(http, "POST", "/v1/responses", json=_body(docs, stream=True, include=[INCLUDE]))

    assert _event_results(hidden) == [None, None]
    assert _found(_event_results(shown))
    url = f"/v1/responses/{hidden[0]['response']['id']}"
    replayed = _streamed(http, "GET", url, params={"stream": "true"})
    assert [e["sequence_number"] for e in replayed] == [e["sequence_number"] for e in hidden]
    assert _event_results(replayed) == [None, None]
    assert _found(_event_results(_streamed(http, "GET", url, params={"stream": "true", "include[]": INCLUDE})))


def test_a_conversation_keeps_the_passages_for_the_model_and_lists_them_only_when_asked(
    http: httpx.Client, model: Served, docs: SeededStore
) -> None:
    conversation = http.post("/v1/conversations", json={}).json()["id"]
    _search_then(model, "At nine [1].")
    first = _create(http, _body(docs, conversation=conversation))
    model.enqueue(ScriptedReply(text="The timetable says nine."))

    _create(http, {"model": MODEL, "input": "Which passage said so?", "conversation": conversation})

    _, answered, follow_up = model.requests()
    assert follow_up["messages"][2]["role"] == "tool"
    assert follow_up["messages"][2]["content"] == answered["messages"][-1]["content"], "the passages as read"
    assert TIMETABLE in follow_up["messages"][2]["content"]
    items = f"/v1/conversations/{conversation}/items"
    assert _results(http.get(items).json()["data"]) == [None]
    assert _found(_results(http.get(items, params={"include[]": INCLUDE}).json()["data"]))
    search_id = first["output"][0]["id"]
    assert http.get(f"{items}/{search_id}").json()["results"] is None
    assert _found(_results([http.get(f"{items}/{search_id}", params={"include": INCLUDE}).json()]))


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "from-store"])
def test_a_follow_up_along_previous_response_id_gives_the_model_the_passages(
    http: httpx.Client, model: Served, docs: SeededStore, cached: bool
) -> None:
    _search_then(model, "At nine [1].")
    first = _create(http, _body(docs))
    if not cached:
        model.services.responses.forget(None)
    model.enqueue(ScriptedReply(text="The timetable says nine."))

    _create(http, {"model": MODEL, "input": "Which passage said so?", "previous_response_id": first["id"]})

    _, answered, follow_up = model.requests()
    tool_outputs = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert tool_outputs == [answered["messages"][-1]["content"]]
    assert TIMETABLE in tool_outputs[0]


def test_search_items_a_client_sends_show_their_passages_only_when_asked(http: httpx.Client, model: Served) -> None:
    passage = {"file_id": "file-1", "filename": "timetable.txt", "score": 0.9, "text": TIMETABLE}
    searched = {"type": "file_search_call", "status": "completed", "queries": ["first ferry"], "results": [passage]}
    conversation = http.post("/v1/conversations", json={}).json()["id"]
    items = f"/v1/conversations/{conversation}/items"

    added = http.post(items, json={"items": [searched]}).json()["data"]
    shown = http.post(items, params={"include[]": INCLUDE}, json={"items": [searched]}).json()["data"]

    assert _results(added) == [None] and _found(_results(shown))
    model.enqueue(ScriptedReply(text="Nine."))
    response = _create(http, {"model": MODEL, "input": [searched, {"role": "user", "content": "When?"}]})
    assert TIMETABLE in model.requests()[-1]["messages"][1]["content"]
    inputs = f"/v1/responses/{response['id']}/input_items"
    assert _results(http.get(inputs).json()["data"]) == [None]
    assert _found(_results(http.get(inputs, params={"include": INCLUDE}).json()["data"]))
