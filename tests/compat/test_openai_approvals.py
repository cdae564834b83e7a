"""Approvals on the Responses API with the real ``openai`` SDK: a held call ends the response as an
``mcp_approval_request``; a later response's ``mcp_approval_response`` runs it or refuses it.

The held tool is ``file_search`` with ferryman's ``require_approval`` extension (the ``mcp`` tool holds
calls the same way, labelled with its server).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.responses.response_input_param import McpApprovalResponse
from openai.types.responses.response_output_item import McpApprovalRequest

from ferryman.engine.channel import TurnRunner
from ferryman.testing import ScriptedReply, ScriptedToolCall
from file_search_support import KEYWORD_SEARCH, SeededStore, seed_vector_store
from inprocess import BASE_URL, Served

MODEL = "scripted-model"
HANDBOOK = "Ferries leave the harbour at nine; tickets cost four euros."


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The real SDK on ferryman, never retrying."""
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=model.sdk_http_client(), api_key="unused", max_retries=0, timeout=30
    ) as client:
        yield client


@pytest.fixture()
def held_search(model: Served) -> Any:
    """A file_search tool whose every call waits for approval."""
    docs: SeededStore = seed_vector_store(model, {"handbook.md": HANDBOOK})
    return {
        "type": "file_search",
        "vector_store_ids": [docs.vector_store_id],
        "ranking_options": KEYWORD_SEARCH,
        "require_approval": "always",
    }


def _ask(oai: openai.OpenAI, model: Served, tool: Any) -> tuple[str, McpApprovalRequest]:
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": "harbour"})]))
    response = oai.responses.create(model=MODEL, input="When do ferries leave?", tools=[tool])
    assert response.status == "completed"
    [request] = response.output
    assert isinstance(request, McpApprovalRequest)
    assert (request.server_label, request.name, request.arguments) == (
        "ferryman",
        "file_search",
        '{"query": "harbour"}',
    )
    assert len(model.requests()) == 1  # the search did not run
    return response.id, request


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_an_approved_call_runs_first_in_the_next_response(oai: openai.OpenAI, model: Served, held_search: Any) -> None:
    held_id, request = _ask(oai, model, held_search)
    model.enqueue(ScriptedReply(text="At nine."))
    answer = oai.responses.create(
        model=MODEL,
        previous_response_id=held_id,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
        tools=[held_search],
    )
    assert answer.status == "completed", answer.error
    assert [item.type for item in answer.output] == ["file_search_call", "message"]
    assert answer.output_text.startswith("At nine.")
    [tool_message] = _tool_messages(model.requests()[1])
    assert "nine" in tool_message


def test_a_denied_call_is_reported_and_cannot_be_answered_twice(
    oai: openai.OpenAI, model: Served, held_search: Any
) -> None:
    conversation = oai.conversations.create()
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": "harbour"})]))
    held = oai.responses.create(model=MODEL, input="Ferries?", tools=[held_search], conversation=conversation.id)
    [request] = held.output
    assert isinstance(request, McpApprovalRequest)
    denial: McpApprovalResponse = {
        "type": "mcp_approval_response",
        "approval_request_id": request.id,
        "approve": False,
        "reason": "no",
    }
    model.enqueue(ScriptedReply(text="I will not search."))
    answer = oai.responses.create(model=MODEL, input=[denial], tools=[held_search], conversation=conversation.id)
    assert answer.status == "completed"
    assert [item.type for item in answer.output] == ["message"]
    assert _tool_messages(model.requests()[1]) == ["the user denied this call: no"]
    with pytest.raises(openai.BadRequestError):
        oai.responses.create(model=MODEL, input=[denial], tools=[held_search], conversation=conversation.id)
    unknown: McpApprovalResponse = {**denial, "approval_request_id": "mcpr_unknown"}
    with pytest.raises(openai.BadRequestError):
        oai.responses.create(model=MODEL, input=[unknown], tools=[held_search], conversation=conversation.id)


def test_an_answer_sent_as_soon_as_the_held_response_completed_waits_for_its_items(
    oai: openai.OpenAI, model: Served, held_search: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held response's stream says ``response.completed`` (its turn is stored completed) a moment before
    its items are stored: an answer sent in that moment waits for them instead of finding no request (400)."""
    store_class = type(model.services.store)
    finish, wait = store_class.finish_response, TurnRunner.settled_owned_by
    storing, gate, waiting = threading.Event(), threading.Event(), threading.Event()

    async def held_back(store: Any, record: Any, events: list[str], items: list[Any]) -> None:
        storing.set()
        await asyncio.to_thread(gate.wait, 30)
        await finish(store, record, events, items)

    async def noted(runner: TurnRunner, owner: str, seconds: float) -> None:
        waiting.set()
        await wait(runner, owner, seconds)

    monkeypatch.setattr(store_class, "finish_response", held_back)
    monkeypatch.setattr(TurnRunner, "settled_owned_by", noted)
    conversation = oai.conversations.create()
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": "harbour"})]))
    stream = oai.responses.create(
        model=MODEL, input="Ferries?", tools=[held_search], conversation=conversation.id, stream=True
    )
    with stream:
        completed = next(event for event in stream if event.type == "response.completed")
    [request] = completed.response.output
    assert isinstance(request, McpApprovalRequest) and storing.wait(10)
    denial: McpApprovalResponse = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False}
    model.enqueue(ScriptedReply(text="I will not search."))
    answers: list[Any] = []

    def answer() -> None:
        try:
            answers.append(
                oai.responses.create(model=MODEL, input=[denial], tools=[held_search], conversation=conversation.id)
            )
        except openai.APIError as exc:
            answers.append(exc)

    answering = threading.Thread(target=answer)
    answering.start()
    waiting.wait(10)  # the answer waits for the held response's run (on the code before: it was refused at once)
    gate.set()
    answering.join(30)
    [answered] = answers
    assert not isinstance(answered, Exception), answered
    assert answered.status == "completed" and answered.output_text.startswith("I will not search.")
