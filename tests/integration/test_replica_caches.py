"""What one replica keeps in memory never outlives a delete made on another (PostgreSQL records, Redis notices)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack

import httpx
import pytest
from replicas import postgres_database, redis_database

from ferryman.coordination.base import Notice, NoticeHandler, RecordDeleted
from ferryman.coordination.redis_fanout import RedisFanout
from ferryman.redis_url import split_prefix
from ferryman.server.app import build_services
from ferryman.storage.sql.postgres import PostgresStore
from ferryman.testing import ScriptedModel
from inprocess import check_script, serving


class WatchedFanout(RedisFanout):
    """The Redis fan-out, telling each notice after this replica acted on it."""

    def __init__(self, url: str) -> None:
        super().__init__(*split_prefix(url))
        self.acted: asyncio.Queue[Notice] = asyncio.Queue()

    async def open(self, on_notice: NoticeHandler) -> None:
        async def watched(notice: Notice) -> None:
            await on_notice(notice)
            self.acted.put_nowait(notice)

        await super().open(watched)

    async def acted_on(self, expected: Notice) -> None:
        async with asyncio.timeout(10):
            while await self.acted.get() != expected:
                pass


@pytest.fixture()
def shared() -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL database and a Redis key prefix, removed afterwards."""
    with postgres_database() as db_url, redis_database() as redis_url:
        yield db_url, redis_url


class Replicas:
    def __init__(self, a: httpx.AsyncClient, b: httpx.AsyncClient, b_fanout: WatchedFanout) -> None:
        self.a, self.b, self.b_fanout = a, b, b_fanout


@pytest.fixture()
async def replicas(shared: tuple[str, str], model: ScriptedModel) -> AsyncIterator[Replicas]:
    db_url, redis_url = shared
    fanouts = [WatchedFanout(redis_url), WatchedFanout(redis_url)]
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(serving(build_services(PostgresStore(db_url), [model], fanout=fanout)))
            for fanout in fanouts
        ]
        yield Replicas(clients[0], clients[1], fanouts[1])


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel()
    yield scripted
    check_script(request, scripted.script)


@pytest.mark.anyio
async def test_an_agent_deleted_on_one_replica_is_gone_on_the_other(replicas: Replicas) -> None:
    created = await replicas.a.post(
        "/v1/agents", json={"agent_config": {"model": "scripted-model", "instructions": "x"}}
    )
    assert created.status_code == 200, created.text
    agent_id = created.json()["agent_id"]
    session = await replicas.b.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    assert (await replicas.b.get(f"/v1/agents/{agent_id}")).status_code == 200
    assert (await replicas.a.delete(f"/v1/agents/{agent_id}")).status_code == 200
    gone = await replicas.b.get(f"/v1/agents/{agent_id}")
    assert gone.status_code == 404, gone.text
    turn = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    refused = await replicas.b.post(f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn", json=turn)
    assert refused.status_code == 404, refused.text


async def _respond(http: httpx.AsyncClient, text: str, previous: str | None = None) -> str:
    body = {"model": "scripted-model", "input": text, "previous_response_id": previous}
    response = await http.post("/v1/responses", json={k: v for k, v in body.items() if v is not None})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


@pytest.mark.anyio
async def test_a_response_deleted_on_one_replica_leaves_the_chains_the_other_kept(
    replicas: Replicas, model: ScriptedModel
) -> None:
    for reply in ("first answer", "second answer", "third answer"):
        model.enqueue_text(reply)
    first = await _respond(replicas.b, "the first secret")
    second = await _respond(replicas.b, "second question", first)  # b keeps the chain first → second
    assert (await replicas.a.delete(f"/v1/responses/{first}")).status_code == 200
    await replicas.b_fanout.acted_on(RecordDeleted(first, "response"))
    await _respond(replicas.b, "third question", second)
    sent = str(model.requests[-1]["messages"])
    # As the store has it now: the chain stops where the deleted response was.
    assert "second question" in sent and "the first secret" not in sent
