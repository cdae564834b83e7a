"""``ferryman.client``'s other resources: models, tools, responses, conversations, files and vector stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_serving import knowledge_app, needs_model, settled

from ferryman.api.response_events import ResponseCompleted
from ferryman.client import AsyncClient, Client, NotFoundError
from ferryman.testing import ScriptedReply
from inprocess import Served

TEXT = b"Ferrymen carry passengers across rivers.\n\nThe toll is paid in silver coins before the crossing."


def test_models_toolgroups_and_tools_are_listed_and_read(model: Served) -> None:
    client = Client(http_client=model.http_client())
    assert "scripted-model" in [m.identifier for m in client.models.list()]
    assert client.models.retrieve("scripted-model").model_type == "llm"
    groups = client.toolgroups.list()
    assert groups and client.toolgroups.retrieve(groups[0].identifier).identifier == groups[0].identifier
    tools = client.tools.list(toolgroup_id=groups[0].identifier)
    assert all(tool.toolgroup_id == groups[0].identifier for tool in tools)
    with pytest.raises(NotFoundError):
        client.models.retrieve("no-such-model")


def test_responses_run_stream_list_and_delete(model: Served) -> None:
    client = Client(http_client=model.http_client())
    model.enqueue(ScriptedReply(text="Plain."), ScriptedReply(text="Streamed."))
    created = client.responses.create(model="scripted-model", input="hi")
    assert created.status == "completed" and client.responses.retrieve(created.id).id == created.id
    events = list(client.responses.create(model="scripted-model", input="again", stream=True))
    assert isinstance(events[-1].data, ResponseCompleted) and events[-1].event == "response.completed"
    replayed = list(client.responses.stream(events[-1].data.response.id))
    assert [e.id for e in replayed] == [e.id for e in events]
    assert [i.type for i in client.responses.input_items(created.id)] == ["message"]
    assert {created.id, events[-1].data.response.id} <= {r.id for r in client.responses.list(limit=1)}
    assert client.responses.delete(created.id).deleted


def test_conversations_and_their_items(model: Served) -> None:
    client = Client(http_client=model.http_client())
    conversation = client.conversations.create(items=[{"type": "message", "role": "user", "content": "one"}])
    more = [{"type": "message", "role": "user", "content": text} for text in ("two", "three")]
    added = client.conversations.items.create(conversation.id, items=more)
    assert len(added.data) == 2
    assert len(list(client.conversations.items.list(conversation.id, limit=1, order="asc"))) == 3
    item = client.conversations.items.retrieve(conversation.id, added.data[0].id)  # type: ignore[union-attr]
    assert item.type == "message"
    assert client.conversations.update(conversation.id, metadata={"k": "v"}).metadata == {"k": "v"}
    client.conversations.items.delete(conversation.id, item.id)  # type: ignore[union-attr]
    assert client.conversations.delete(conversation.id).deleted
    with pytest.raises(NotFoundError):
        client.conversations.retrieve(conversation.id)


@pytest.mark.anyio
@needs_model
async def test_files_and_vector_stores_with_the_async_client(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services), AsyncClient(http_client=http) as client:
        file = await client.files.create(("river.txt", TEXT))
        assert (await client.files.content(file.id)) == TEXT
        assert [f.id async for f in await client.files.list(limit=1)] == [file.id]
        store = await client.vector_stores.create(name="docs")
        attached = await client.vector_stores.files.create(store.id, file_id=file.id, attributes={"lang": "en"})
        assert attached.status in ("in_progress", "completed")
        await settled(services)
        assert [f.id async for f in await client.vector_stores.files.list(store.id)] == [file.id]
        found = await client.vector_stores.search(store.id, query="what is the toll paid in?", max_num_results=1)
        assert "silver" in found.data[0].content[0].text
        chunks = await client.vector_stores.files.content(store.id, file.id)
        assert any("silver" in part.text for part in chunks.data)
        batch = await client.vector_stores.file_batches.create(store.id, file_ids=[file.id])
        assert (await client.vector_stores.file_batches.retrieve(store.id, batch.id)).id == batch.id
        assert (await client.vector_stores.update(store.id, name="renamed")).name == "renamed"
        assert [s.id async for s in await client.vector_stores.list()] == [store.id]
        assert (await client.vector_stores.files.delete(store.id, file.id)).deleted
        assert (await client.vector_stores.delete(store.id)).deleted
        assert (await client.files.delete(file.id)).deleted
