"""A keyed route's claim lifecycle (``keyed`` over ``IdempotencyKeys``), over a stand-in app and a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ferryman.server.errors import EXCEPTION_HANDLERS
from ferryman.server.idempotent_routes import fingerprint, keyed
from ferryman.services.idempotency import IdempotencyKeys, StoredAnswer, TurnReplay, decode_outcome, encode_outcome
from ferryman.storage.base import IdempotencyRecord
from ferryman.storage.sql.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

LEASE = timedelta(milliseconds=30)


class RenewWatchingStore(SqliteStore):
    """SQLite, telling when a pending claim was renewed."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.renewed = asyncio.Event()

    async def renew_idempotency_key(self, claim: IdempotencyRecord, expires_at: datetime) -> bool:
        renewed = await super().renew_idempotency_key(claim, expires_at)
        self.renewed.set()
        return renewed


class StandIn:
    """An app whose answers a test chooses, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0
        self.status = 200
        self.go = asyncio.Event()
        self.go.set()
        self.hold = asyncio.Event()
        self.hold.set()
        self.streaming = asyncio.Event()

    async def create(self, request: Request) -> Response:
        self.runs += 1
        await self.go.wait()
        return JSONResponse({"run": self.runs}, status_code=self.status)

    async def stream(self, request: Request) -> Response:
        self.runs += 1

        async def frames() -> AsyncIterator[str]:
            yield "data: {}\n\n"
            self.streaming.set()
            await self.hold.wait()
            yield "data: {}\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")


@pytest.fixture()
async def store(tmp_path: Path) -> AsyncIterator[RenewWatchingStore]:
    opened = RenewWatchingStore(str(tmp_path / "keys.db"))
    await opened.open()
    yield opened
    await opened.close()


@pytest.fixture()
def stand_in() -> StandIn:
    return StandIn()


@pytest.fixture()
async def http(store: RenewWatchingStore, stand_in: StandIn) -> AsyncIterator[httpx.AsyncClient]:
    routes = [
        Route("/v1/agents", keyed(stand_in.create), methods=["POST"]),
        Route("/v1/responses", keyed(stand_in.stream), methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS)
    app.state.services = SimpleNamespace(idempotency=IdempotencyKeys(store, lease=LEASE))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield client


async def call(http: httpx.AsyncClient, path: str = "/v1/agents") -> httpx.Response:
    return await http.post(path, json={"a": 1}, headers={"Idempotency-Key": "k"})


async def test_a_running_call_renews_its_claim(
    http: httpx.AsyncClient, store: RenewWatchingStore, stand_in: StandIn
) -> None:
    stand_in.go.clear()
    first = asyncio.create_task(call(http))
    await asyncio.wait_for(store.renewed.wait(), 10)
    now = datetime.now(UTC)
    probe = IdempotencyRecord("", "k", "probe", "fp", now, now + LEASE)
    held = await store.claim_idempotency_key(probe, now)
    assert held is not None and held.result is None and held.expires_at > held.created_at + LEASE
    stand_in.go.set()
    assert (await first).json() == {"run": 1}
    assert (await call(http)).json() == {"run": 1}


async def test_a_claim_left_pending_by_a_dead_replica_lapses_with_its_lease(
    http: httpx.AsyncClient, store: RenewWatchingStore, stand_in: StandIn
) -> None:
    then = datetime.now(UTC) - timedelta(minutes=5)
    dead = IdempotencyRecord("", "k", "dead", fingerprint("/v1/agents", b'{"a":1}'), then, then + timedelta(minutes=1))
    assert await store.claim_idempotency_key(dead, then) is None
    answer = await call(http)
    assert answer.status_code == 200 and "idempotent-replayed" not in answer.headers and stand_in.runs == 1


@pytest.mark.parametrize("status", [409, 429, 500, 503])
async def test_answers_a_retry_may_change_give_the_key_back(
    http: httpx.AsyncClient, stand_in: StandIn, status: int
) -> None:
    stand_in.status = status
    assert (await call(http)).status_code == status
    stand_in.status = 200
    assert (await call(http)).json() == {"run": 2}


async def test_a_stream_that_names_no_run_gives_the_key_back(http: httpx.AsyncClient, stand_in: StandIn) -> None:
    await call(http, "/v1/responses")
    await call(http, "/v1/responses")
    assert stand_in.runs == 2


async def test_a_stream_holds_its_key_while_it_streams(http: httpx.AsyncClient, stand_in: StandIn) -> None:
    stand_in.hold.clear()
    first = asyncio.create_task(call(http, "/v1/responses"))
    await asyncio.wait_for(stand_in.streaming.wait(), 10)
    busy = await call(http, "/v1/responses")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "idempotency_key_in_use"
    assert busy.headers["retry-after"] == "1"
    stand_in.hold.set()
    assert (await first).status_code == 200
    assert (await call(http, "/v1/responses")).status_code == 200 and stand_in.runs == 2


async def test_a_key_of_another_request_is_refused(http: httpx.AsyncClient, stand_in: StandIn) -> None:
    await call(http)
    other = await http.post("/v1/agents", json={"a": 2}, headers={"Idempotency-Key": "k"})
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"
    assert stand_in.runs == 1


def test_outcomes_read_back_as_stored_and_as_the_earlier_middleware_stored_them() -> None:
    answer = StoredAnswer(201, [("content-type", "application/json")], '{"id": "x"}')
    run = TurnReplay("a", "s", "t", 4)
    assert [decode_outcome(encode_outcome(outcome)) for outcome in (answer, run)] == [answer, run]
    legacy = '{"replay": {"path": "/v1/agents/a/session/s/turn/t/events", "after": 4, "one_run": true}}'
    assert decode_outcome(legacy) == run
