"""The ``file_search`` tool driven with the real ``openai`` SDK: its output item, stream events and citations parse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import (
    ResponseFileSearchToolCall,
    ResponseOutputMessage,
    ResponseOutputTextAnnotationAddedEvent,
)
from openai.types.responses.response_output_text import AnnotationFileCitation

from ferryman.testing import ScriptedReply, ScriptedToolCall
from file_search_support import KEYWORD_SEARCH, SeededStore, seed_vector_store
from inprocess import BASE_URL, Served

MODEL = "scripted-model"
HANDBOOK = "Staff must wear a life jacket on the open deck at all times."


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The real SDK on ferryman, never retrying."""
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=model.sdk_http_client(), api_key="unused", max_retries=0, timeout=30
    ) as client:
        yield client


@pytest.fixture()
def docs(model: Served) -> SeededStore:
    """A vector store of one file."""
    return seed_vector_store(model, {"handbook.md": HANDBOOK})


def search_tool(docs: SeededStore) -> Any:
    """The tool over the test's store, ranked by keyword (beyond OpenAI's rankers): the test server embeds nothing."""
    return {"type": "file_search", "vector_store_ids": [docs.vector_store_id], "ranking_options": KEYWORD_SEARCH}


def _search_then_answer(model: Served) -> None:
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": "life jacket deck"})]),
        ScriptedReply(text="Wear a life jacket on deck [1]."),
    )


def test_sdk_reads_the_search_call_and_the_citation(oai: openai.OpenAI, model: Served, docs: SeededStore) -> None:
    _search_then_answer(model)

    response = oai.responses.create(
        model=MODEL,
        input="What must staff wear on deck?",
        tools=[search_tool(docs)],
        include=["file_search_call.results"],
    )

    search, message = response.output
    assert isinstance(search, ResponseFileSearchToolCall)
    assert search.status == "completed" and search.queries == ["life jacket deck"]
    assert search.results is not None and search.results[0].filename == "handbook.md"
    assert search.results[0].text == HANDBOOK
    assert isinstance(message, ResponseOutputMessage)
    assert response.output_text == "Wear a life jacket on deck [1]."
    (citation,) = message.content[0].annotations  # type: ignore[union-attr]
    assert isinstance(citation, AnnotationFileCitation)
    assert citation.file_id == docs.file_ids["handbook.md"] and citation.filename == "handbook.md"
    assert response.tools[0].type == "file_search"


def test_sdk_streams_the_search(oai: openai.OpenAI, model: Served, docs: SeededStore) -> None:
    _search_then_answer(model)

    events = list(
        oai.responses.create(model=MODEL, input="What must staff wear on deck?", tools=[search_tool(docs)], stream=True)
    )
    types = [event.type for event in events]
    final = events[-1].response  # type: ignore[union-attr]

    assert types.index("response.file_search_call.in_progress") < types.index("response.file_search_call.searching")
    assert types.index("response.file_search_call.searching") < types.index("response.file_search_call.completed")
    annotation = next(e for e in events if isinstance(e, ResponseOutputTextAnnotationAddedEvent))
    cited: Any = annotation.annotation
    assert cited.type == "file_citation" and cited.file_id == docs.file_ids["handbook.md"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    search = final.output[0]
    assert isinstance(search, ResponseFileSearchToolCall) and search.results is None
    assert final.output_text == "Wear a life jacket on deck [1]."
