"""Quotas per principal: requests per minute and running turns, a 429 with ``Retry-After`` past either.

In process, the caller set with ``acting_as`` (what the authentication
middleware does); counted in memory for one app, in Redis for two sharing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from replicas import redis_database

from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.auth.quotas import TURN_RETRY_SECONDS, quotas_for
from ferryman.coordination.select import quota_counters_for
from ferryman.quota_settings import QuotaSettings
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import check_script, serving

ALICE = Principal(PrincipalKind.SUBJECT, "alice")
BOB = Principal(PrincipalKind.SUBJECT, "bob")
ADMIN = Principal(PrincipalKind.SUBJECT, "root", {"roles": ("admin",)})


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel()
    yield scripted
    check_script(request, scripted.script)


def _services(tmp: Path, model: ScriptedModel, settings: QuotaSettings, url: str | None = None) -> Services:
    return build_services(
        SqliteStore(str(tmp / "ferryman.db")),
        [model],
        sole_process=True,
        quotas=quotas_for(settings, quota_counters_for(url)),
    )


def _session_count(tmp: Path) -> int:
    with contextlib.closing(sqlite3.connect(tmp / "ferryman.db")) as db:
        count: int = db.execute("SELECT count(*) FROM sessions").fetchone()[0]
    return count


def assert_limited(response: httpx.Response, retry_after: int | None = None) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "rate_limited"
    seconds = int(response.headers["Retry-After"])
    assert 1 <= seconds <= 60
    if retry_after is not None:
        assert seconds == retry_after


async def start_response(http: httpx.AsyncClient) -> httpx.Response:
    return await http.post("/v1/responses", json={"model": "scripted-model", "input": "hi", "background": True})


async def finished(http: httpx.AsyncClient, response_id: str) -> dict[str, Any]:
    """The response once its run ended: its replay stream ends when the run is settled."""
    async with http.stream("GET", f"/v1/responses/{response_id}", params={"stream": "true"}) as stream:
        async for _ in stream.aiter_lines():
            pass
    answer = await http.get(f"/v1/responses/{response_id}")
    return dict(answer.json())


@pytest.mark.anyio
async def test_requests_past_the_minute_quota_are_429_with_retry_after(tmp_path: Path, model: ScriptedModel) -> None:
    settings = QuotaSettings(requests_per_minute=2, roles={"admin": {"requests_per_minute": None}})
    async with serving(_services(tmp_path, model, settings)) as http:
        with acting_as(ALICE):
            assert (await http.get("/v1/agents")).status_code == 200
            assert (await http.get("/v1/agents")).status_code == 200
            assert_limited(await http.get("/v1/agents"))
            assert_limited(await http.post("/v1/agents", json={"agent_config": {}}))
        with acting_as(BOB):  # each principal has its own count
            assert (await http.get("/v1/agents")).status_code == 200
        with acting_as(ADMIN):  # the role lifts the limit
            for _ in range(4):
                assert (await http.get("/v1/agents")).status_code == 200
        for _ in range(4):  # no principal (no authentication): nothing is counted
            assert (await http.get("/v1/agents")).status_code == 200


@pytest.mark.anyio
async def test_running_turns_past_the_quota_are_429_and_a_finished_turn_frees_its_slot(
    tmp_path: Path, model: ScriptedModel
) -> None:
    model.enqueue_text("first", gate="first")
    model.enqueue_text("second")
    async with serving(_services(tmp_path, model, QuotaSettings(max_running_turns=1))) as http:
        with acting_as(ALICE):
            first = await start_response(http)
            assert first.status_code == 200, first.text
            assert_limited(await start_response(http), TURN_RETRY_SECONDS)
            assert _session_count(tmp_path) == 1  # the refused response stored nothing, not even a session
            model.script.open_gate("first")
            assert (await finished(http, first.json()["id"]))["status"] == "completed"
            second = await start_response(http)
            assert second.status_code == 200, second.text
            assert (await finished(http, second.json()["id"]))["status"] == "completed"


@pytest.mark.anyio
async def test_an_agent_turn_past_the_quota_is_429_and_stores_nothing(tmp_path: Path, model: ScriptedModel) -> None:
    model.enqueue_text("busy", gate="busy")
    async with serving(_services(tmp_path, model, QuotaSettings(max_running_turns=1))) as http:
        with acting_as(ALICE):
            agent = (await http.post("/v1/agents", json={"agent_config": _agent()})).json()["agent_id"]
            session = (await http.post(f"/v1/agents/{agent}/session", json={"session_name": "s"})).json()
            other = (await http.post(f"/v1/agents/{agent}/session", json={"session_name": "t"})).json()
            busy = asyncio.create_task(start_response_turn(http, agent, session["session_id"]))
            await model.script.wait_for_requests(1)  # the first turn is running, held by its gate
            refused = await start_response_turn(http, agent, other["session_id"])
            assert_limited(refused, TURN_RETRY_SECONDS)
            stored = await http.get(f"/v1/agents/{agent}/session/{other['session_id']}")
            assert stored.json()["turns"] == []
            model.script.open_gate("busy")
            assert (await busy).status_code == 200


def _agent() -> dict[str, Any]:
    return {"model": "scripted-model", "instructions": "be brief"}


async def start_response_turn(http: httpx.AsyncClient, agent: str, session: str) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    return await http.post(f"/v1/agents/{agent}/session/{session}/turn", json=body)


@asynccontextmanager
async def two_replicas(
    tmp: Path, model: ScriptedModel, settings: QuotaSettings
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Two apps (each its own SQLite) whose quotas share one Redis."""
    with redis_database() as url:
        async with AsyncExitStack() as stack:
            clients = []
            for name in ("a", "b"):
                (tmp / name).mkdir()
                services = _services(tmp / name, model, settings, url)
                clients.append(await stack.enter_async_context(serving(services)))
            yield clients


@pytest.mark.anyio
async def test_two_replicas_sharing_redis_count_requests_as_one(tmp_path: Path, model: ScriptedModel) -> None:
    async with two_replicas(tmp_path, model, QuotaSettings(requests_per_minute=3)) as (a, b):
        with acting_as(ALICE):
            assert (await a.get("/v1/agents")).status_code == 200
            assert (await b.get("/v1/agents")).status_code == 200
            assert (await a.get("/v1/agents")).status_code == 200
            assert_limited(await b.get("/v1/agents"))
        with acting_as(BOB):
            assert (await b.get("/v1/agents")).status_code == 200


@pytest.mark.anyio
async def test_two_replicas_sharing_redis_count_running_turns_as_one(tmp_path: Path, model: ScriptedModel) -> None:
    model.enqueue_text("first", gate="first")
    model.enqueue_text("second")
    async with two_replicas(tmp_path, model, QuotaSettings(max_running_turns=1)) as (a, b):
        with acting_as(ALICE):
            first = await start_response(a)
            assert first.status_code == 200, first.text
            assert_limited(await start_response(b), TURN_RETRY_SECONDS)
            model.script.open_gate("first")
            assert (await finished(a, first.json()["id"]))["status"] == "completed"
            second = await start_response(b)
            assert second.status_code == 200, second.text
            assert (await finished(b, second.json()["id"]))["status"] == "completed"


@pytest.mark.anyio
async def test_a_replica_whose_admission_of_a_running_turn_fails_leaves_that_turns_slot_alone() -> None:
    # A resume sent to two replicas at once: both admit the same turn, one runs it, the other's admission fails
    # and gives its slot back. That must not free the slot the turn runs under.
    with redis_database() as url:
        counters = quota_counters_for(url)
        assert counters is not None
        (_, runs), (_, races) = counters(), counters()
        try:
            assert await runs.take("alice", "turn_1", 1)
            if await races.take("alice", "turn_1", 1):
                await races.give_back("alice", "turn_1")
            assert not await runs.take("alice", "turn_2", 1), "the running turn's slot was freed by the other replica"
            assert await runs.take("alice", "turn_1", 1)  # the replica holding it may take it again
            await runs.give_back("alice", "turn_1")
            assert await races.take("alice", "turn_2", 1)  # freed by its holder, the slot is anyone's
        finally:
            await runs.close()
            await races.close()
