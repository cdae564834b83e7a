"""Listing conversations, and a conversation's responses, from the SDK (sync and async) and the CLI."""

from __future__ import annotations

import httpx
import pytest
from cli_support import cli

from ferryman.client import AsyncClient, Client
from ferryman.testing import ScriptedServerClient


def _responded(http: httpx.Client, model: ScriptedServerClient, conversation_id: str) -> str:
    model.enqueue_text("ok")
    answer = http.post(
        "/v1/responses", json={"model": "scripted-model", "input": "hi", "conversation": conversation_id}
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def test_the_cli_lists_conversations_and_a_conversations_responses(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http:
        first, second = (http.post("/v1/conversations", json={"metadata": {"n": str(n)}}).json() for n in range(2))
        response_id = _responded(http, served_model, first["id"])

    listed = cli(capsys, served_base_url, "conversations", "list", "--limit", "2", "--json").json()
    assert listed == [second, first]
    oldest = cli(capsys, served_base_url, "conversations", "list", "--oldest-first", "--limit", "1", "--json").json()
    assert [c["id"] for c in oldest] != [second["id"]]
    table = cli(capsys, served_base_url, "conversations", "list", "--limit", "2")
    assert table.code == 0 and first["id"] in table.out and "n=0" in table.out

    of_first = cli(capsys, served_base_url, "responses", "list", "--conversation", first["id"], "--json").json()
    assert [r["id"] for r in of_first] == [response_id]
    table = cli(capsys, served_base_url, "responses", "list", "--conversation", first["id"])
    assert table.code == 0 and response_id in table.out and "ok" in table.out
    none = cli(capsys, served_base_url, "responses", "list", "--conversation", second["id"])
    assert none.code == 0 and "no responses" in none.err
    missing = cli(capsys, served_base_url, "responses", "list", "--conversation", "conv_nowhere")
    assert missing.code != 0 and "conv_nowhere" in missing.err


def test_the_sdk_pages_conversations_and_filters_responses(
    served_base_url: str, served_model: ScriptedServerClient
) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http, Client(served_base_url) as client:
        made = [client.conversations.create().id for _ in range(3)]
        page = client.conversations.list(limit=2)
        assert [c.id for c in page.data] == made[:0:-1]
        assert [c.id for c in page][:3] == made[::-1]
        response_id = _responded(http, served_model, made[1])
        assert [r.id for r in client.responses.list(conversation_id=made[1])] == [response_id]
        assert list(client.responses.list(conversation_id=made[0])) == []


@pytest.mark.anyio
async def test_the_async_sdk_pages_conversations_and_filters_responses(
    served_base_url: str, served_model: ScriptedServerClient
) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http:
        async with AsyncClient(served_base_url) as client:
            made = [(await client.conversations.create()).id for _ in range(3)]
            page = await client.conversations.list(limit=2, order="desc")
            assert [c.id for c in page.data] == made[:0:-1]
            every = [c.id async for c in page]
            assert every[:3] == made[::-1]
            response_id = _responded(http, served_model, made[2])
            listed = await client.responses.list(conversation_id=made[2])
            assert [r.id for r in listed.data] == [response_id]
