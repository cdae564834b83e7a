"""A turn's document URLs are fetched only where the operator allows: loopback is refused unless allow-listed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from inprocess import AskedModel, agent_and_session, migrated_sqlite, serving
from support import Proc


async def _turn_with_document(tmp_path: Path, url: str, policy: FetchPolicy) -> tuple[int, dict[str, object], str]:
    model = AskedModel()
    model.enqueue_text("Read it.")
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "docs.db")), [model], fetch=policy)
    async with serving(services) as http:
        agent_id, session_id = await agent_and_session(http)
        body = {
            "messages": [{"role": "user", "content": "Which models are listed?"}],
            "documents": [{"content": {"uri": url}, "mime_type": "application/json"}],
            "stream": False,
        }
        answer = await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
    seen = str(model.requests[-1]["messages"]) if model.requests else ""
    return answer.status_code, answer.json(), seen


@pytest.mark.anyio
async def test_a_document_on_loopback_is_refused_by_default(tmp_path: Path, scripted_proc: tuple[Proc, str]) -> None:
    status, body, seen = await _turn_with_document(tmp_path, f"{scripted_proc[1]}/v1/models", FetchPolicy())
    assert status == 400, body
    error = body["error"]
    assert isinstance(error, dict) and error["field"] == "documents" and "not a public address" in error["message"]
    assert seen == ""


@pytest.mark.anyio
async def test_a_document_on_an_allow_listed_host_reaches_the_model(
    tmp_path: Path, scripted_proc: tuple[Proc, str]
) -> None:
    policy = FetchPolicy(allowed_hosts=["127.0.0.1"])
    status, body, seen = await _turn_with_document(tmp_path, f"{scripted_proc[1]}/v1/models", policy)
    assert status == 200, body
    assert "scripted-model" in seen


async def _turn_without_model(
    tmp_path: Path, documents: list[dict[str, object]], session: str | None = None
) -> dict[str, Any]:
    """A turn that must be refused before the model is asked (no reply scripted: asking it fails the test)."""
    model = AskedModel()
    policy = FetchPolicy(allowed_hosts=["127.0.0.1"])
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "refused.db")), [model], fetch=policy)
    async with serving(services) as http:
        agent_id, session_id = await agent_and_session(http)
        body = {"messages": [{"role": "user", "content": "Read these."}], "documents": documents, "stream": False}
        answer = await http.post(f"/v1/agents/{agent_id}/session/{session or session_id}/turn", json=body)
    assert model.requests == []
    return {"status": answer.status_code, **answer.json()}


@pytest.mark.anyio
async def test_a_turn_may_carry_at_most_twenty_documents(tmp_path: Path) -> None:
    many = [{"content": f"text {i}", "mime_type": "text/plain"} for i in range(21)]
    answer = await _turn_without_model(tmp_path, many)
    assert answer["status"] == 400 and answer["error"]["field"] == "documents"


@pytest.mark.anyio
async def test_documents_of_a_turn_in_an_unknown_session_are_not_fetched(tmp_path: Path) -> None:
    hits: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hits.append(await reader.readline())
        writer.close()

    listener = await asyncio.start_server(record, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        document = {"content": {"uri": f"http://127.0.0.1:{port}/doc"}, "mime_type": "text/plain"}
        answer = await _turn_without_model(tmp_path, [document], session="no-such-session")
    finally:
        listener.close()
        await listener.wait_closed()
    assert answer["status"] == 404 and hits == []


@pytest.mark.anyio
async def test_a_data_url_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    big = "data:text/plain," + "x" * 1_000_001
    answer = await _turn_without_model(tmp_path, [{"content": {"uri": big}, "mime_type": "text/plain"}])
    assert answer["status"] == 400 and "larger than" in answer["error"]["message"]
