"""The Responses API's ``file_search`` tool, in process: the model searches, reads the passages, answers citing them.

The scripted model's first reply calls ``file_search`` with a query; the
server runs the search inside the response and the second reply answers.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ferryman.testing import ScriptedReply, ScriptedToolCall
from file_search_support import KEYWORD_SEARCH, SeededStore, seed_vector_store
from inprocess import Served
from sse import frames

MODEL = "scripted-model"
TIMETABLE = "The first ferry leaves the harbour at nine in the morning."
FARES = "A single ferry ticket costs four euros; children travel free."
SEARCH_EVENTS = [
    "response.output_item.added",
    "response.file_search_call.in_progress",
    "response.file_search_call.searching",
    "response.file_search_call.completed",
    "response.output_item.done",
]


@pytest.fixture()
def docs(model: Served) -> SeededStore:
    """A vector store of two files."""
    return seed_vector_store(model, {"timetable.txt": TIMETABLE, "fares.txt": FARES})


def _tool(store: SeededStore, **extra: Any) -> dict[str, Any]:
    return {
        "type": "file_search",
        "vector_store_ids": [store.vector_store_id],
        "ranking_options": KEYWORD_SEARCH,
        **extra,
    }


def _search_then(model: Served, answer: str, query: str = "first ferry harbour") -> None:
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": query})]),
        ScriptedReply(text=answer),
    )


def _create(http: httpx.Client, store: SeededStore, **body: Any) -> dict[str, Any]:
    answer = http.post("/v1/responses", json={"model": MODEL, "input": "When does the first ferry leave?", **body})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_the_model_searches_and_its_answer_cites_the_file(http: httpx.Client, model: Served, docs: SeededStore) -> None:
    _search_then(model, "It leaves at nine [1].")

    response = _create(http, docs, tools=[_tool(docs)], include=["file_search_call.results"])

    assert response["status"] == "completed"
    search, message = response["output"]
    assert search["type"] == "file_search_call" and search["id"].startswith("fs_")
    assert search["status"] == "completed" and search["queries"] == ["first ferry harbour"]
    assert search["results"][0]["file_id"] == docs.file_ids["timetable.txt"]
    assert search["results"][0]["filename"] == "timetable.txt" and search["results"][0]["text"] == TIMETABLE
    assert 0 <= search["results"][0]["score"] <= 1
    part = message["content"][0]
    assert part["text"] == "It leaves at nine [1]."
    assert part["annotations"] == [
        {
            "type": "file_citation",
            "file_id": docs.file_ids["timetable.txt"],
            "filename": "timetable.txt",
            "index": len("It leaves at nine [1]"),
        }
    ]
    offered, answered = model.requests()
    assert [tool["function"]["name"] for tool in offered["tools"]] == ["file_search"]
    assert set(offered["tools"][0]["function"]["parameters"]["properties"]) == {"query"}
    tool_output = answered["messages"][-1]
    assert tool_output["role"] == "tool" and TIMETABLE in tool_output["content"]
    assert "[1] timetable.txt" in tool_output["content"]
    stored = http.get(f"/v1/responses/{response['id']}", params={"include[]": "file_search_call.results"}).json()
    assert stored["output"] == response["output"]


def test_results_stay_out_unless_included_and_an_uncited_answer_names_its_sources(
    http: httpx.Client, model: Served, docs: SeededStore
) -> None:
    _search_then(model, "Nine in the morning.", query="ferry")

    response = _create(http, docs, tools=[_tool(docs, max_num_results=5)])

    search, message = response["output"]
    assert search["status"] == "completed" and search["results"] is None
    text = message["content"][0]["text"]
    cited = message["content"][0]["annotations"]
    assert {c["file_id"] for c in cited} == set(docs.file_ids.values())
    assert all(c["index"] == len(text) for c in cited)


def test_the_stream_announces_the_search_in_order(http: httpx.Client, model: Served, docs: SeededStore) -> None:
    _search_then(model, "At nine [1].")

    with http.stream(
        "POST", "/v1/responses", json={"model": MODEL, "input": "When?", "tools": [_tool(docs)], "stream": True}
    ) as streamed:
        events = [frame.json() for frame in frames(streamed)]

    types = [e["type"] for e in events]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    start = types.index("response.output_item.added")
    assert types[start : start + len(SEARCH_EVENTS)] == SEARCH_EVENTS
    added, done = events[start], events[start + len(SEARCH_EVENTS) - 1]
    assert added["item"]["type"] == "file_search_call" and added["item"]["status"] == "in_progress"
    assert added["response_id"] == done["response_id"] == events[0]["response"]["id"]
    assert {e["item_id"] for e in events[start + 1 : start + 4]} == {added["item"]["id"]}
    assert done["item"]["status"] == "completed"
    annotation = next(e for e in events if e["type"] == "response.output_text.annotation.added")
    assert annotation["annotation"]["file_id"] == docs.file_ids["timetable.txt"]
    assert types.index("response.output_text.annotation.added") < types.index("response.output_text.done")
    assert types[-1] == "response.completed"
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["file_search_call", "message"]


def test_a_search_stays_in_the_conversation_as_the_call_and_the_passages_the_model_read(
    http: httpx.Client, model: Served, docs: SeededStore
) -> None:
    conversation = http.post("/v1/conversations", json={}).json()["id"]
    _search_then(model, "At nine [1].")
    first = _create(http, docs, tools=[_tool(docs)], conversation=conversation, include=["file_search_call.results"])
    model.enqueue(ScriptedReply(text="The timetable.txt passage."))

    _create(http, docs, conversation=conversation, input="Which passage said so?")

    items = http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()["data"]
    assert [item["type"] for item in items] == ["message", "file_search_call", "message", "message", "message"]
    _, answered, follow_up = model.requests()
    history = follow_up["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    (call,) = history[1]["tool_calls"]
    assert call["function"]["name"] == "file_search" and call["id"] == first["output"][0]["id"]
    assert json.loads(call["function"]["arguments"]) == {"query": "first ferry harbour"}
    assert history[2]["tool_call_id"] == call["id"]
    assert history[2]["content"] == answered["messages"][-1]["content"], "the passages as the model read them"
    assert TIMETABLE in history[2]["content"]


def test_a_search_item_sent_back_without_passages_stays_in_the_conversation_as_what_was_searched(
    http: httpx.Client, model: Served
) -> None:
    searched = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["first ferry harbour"]}
    conversation = http.post("/v1/conversations", json={"items": [searched]}).json()["id"]
    model.enqueue(ScriptedReply(text="You are welcome."))

    answer = http.post("/v1/responses", json={"model": MODEL, "input": "Thanks!", "conversation": conversation})

    assert answer.status_code == 200, answer.text
    history = model.requests()[-1]["messages"]
    assert [m["role"] for m in history] == ["assistant", "tool", "user"]
    assert "'first ferry harbour'" in history[1]["content"] and "not kept" in history[1]["content"]


@pytest.mark.parametrize(
    ("tool", "status"),
    [
        ({"type": "file_search", "vector_store_ids": ["vs_missing"]}, 404),
        ({"type": "file_search", "vector_store_ids": []}, 400),
        ({"type": "file_search", "vector_store_ids": ["vs_x"], "ranking_options": {"ranker": "magic"}}, 400),
        ({"type": "file_search", "vector_store_ids": ["vs_x"], "max_num_results": 51}, 400),
        ({"type": "file_search", "vector_store_ids": ["vs_x"], "filters": {"type": "eq"}}, 400),
    ],
)
def test_a_search_that_could_not_run_is_refused_at_creation(
    http: httpx.Client, model: Served, tool: dict[str, Any], status: int
) -> None:
    answer = http.post("/v1/responses", json={"model": MODEL, "input": "hi", "tools": [tool]})

    assert answer.status_code == status, answer.text
    assert model.requests() == []


def test_two_file_search_tools_are_refused(http: httpx.Client, model: Served, docs: SeededStore) -> None:
    answer = http.post("/v1/responses", json={"model": MODEL, "input": "hi", "tools": [_tool(docs), _tool(docs)]})

    assert answer.status_code == 400
    assert "at most one file_search tool" in answer.text
