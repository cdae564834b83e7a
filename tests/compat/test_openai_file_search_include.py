"""The ``openai`` SDK's ``include`` on reads: a search's passages, always kept, show only when the SDK asks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseFileSearchToolCall

from ferryman.testing import ScriptedReply, ScriptedToolCall
from file_search_support import KEYWORD_SEARCH, seed_vector_store
from inprocess import BASE_URL, Served

MODEL = "scripted-model"
HANDBOOK = "Staff must wear a life jacket on the open deck at all times."
INCLUDE: Any = ["file_search_call.results"]


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The real SDK on ferryman, never retrying."""
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=model.sdk_http_client(), api_key="unused", max_retries=0, timeout=30
    ) as client:
        yield client


def _passages(item: Any) -> list[str] | None:
    assert isinstance(item, ResponseFileSearchToolCall)
    return None if item.results is None else [result.text or "" for result in item.results]


def test_sdk_reads_show_the_passages_only_when_they_ask(oai: openai.OpenAI, model: Served) -> None:
    docs = seed_vector_store(model, {"handbook.md": HANDBOOK})
    tool: Any = {"type": "file_search", "vector_store_ids": [docs.vector_store_id], "ranking_options": KEYWORD_SEARCH}
    conversation = oai.conversations.create()
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": "life jacket deck"})]),
        ScriptedReply(text="Wear a life jacket on deck [1]."),
    )

    response = oai.responses.create(
        model=MODEL, input="What must staff wear on deck?", tools=[tool], conversation=conversation.id
    )

    assert _passages(response.output[0]) is None
    assert _passages(oai.responses.retrieve(response.id).output[0]) is None
    assert _passages(oai.responses.retrieve(response.id, include=INCLUDE).output[0]) == [HANDBOOK]
    listed = oai.conversations.items.list(conversation.id, order="asc")
    assert _passages(listed.data[1]) is None
    listed = oai.conversations.items.list(conversation.id, order="asc", include=INCLUDE)
    assert _passages(listed.data[1]) == [HANDBOOK]
    search_id = response.output[0].id or ""
    assert _passages(oai.conversations.items.retrieve(search_id, conversation_id=conversation.id)) is None
    item = oai.conversations.items.retrieve(search_id, conversation_id=conversation.id, include=INCLUDE)
    assert _passages(item) == [HANDBOOK]
