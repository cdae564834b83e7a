"""A turn that ended in a stored failure answers a non-streamed call with that failure's own status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedReply
from inprocess import AskedModel, agent_and_session, check_script, migrated_sqlite, serving


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> Iterator[AskedModel]:
    asked = AskedModel()
    yield asked
    check_script(request, asked.script)


@pytest.fixture()
async def http(tmp_path: Path, model: AskedModel) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(build_services(SqliteStore(migrated_sqlite(tmp_path / "f.db")), [model])) as client:
        yield client


@pytest.mark.anyio
async def test_a_turn_cancelled_while_the_client_waits_is_a_409_cancelled(
    http: httpx.AsyncClient, model: AskedModel
) -> None:
    agent_id, session_id = await agent_and_session(http)
    model.enqueue(ScriptedReply(text="never sent", gate="held"))
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    waiting = asyncio.create_task(http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body))
    await model.asked.wait()
    deleted = await http.delete(f"/v1/agents/{agent_id}/session/{session_id}")
    assert deleted.status_code == 200, deleted.text
    answer = await waiting
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "cancelled"


@pytest.mark.anyio
async def test_a_turn_cut_off_by_the_server_stopping_is_a_503_interrupted(tmp_path: Path, model: AskedModel) -> None:
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "stop.db")), [model])
    async with serving(services) as http:
        agent_id, session_id = await agent_and_session(http)
        model.enqueue(ScriptedReply(text="never sent", gate="held"))
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
        waiting = asyncio.create_task(http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body))
        await model.asked.wait()
        await services.runner.shutdown()  # what the server does as it stops
        answer = await waiting
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "interrupted"
        turn = (await http.get(f"/v1/agents/{agent_id}/session/{session_id}")).json()["turns"][0]
        assert turn["status"] == "failed" and turn["error"]["code"] == "interrupted"
