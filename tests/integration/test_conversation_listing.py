"""``GET /v1/conversations`` and ``GET /v1/responses?conversation_id=`` (ferryman's own) on every backend.

Two API keys: each caller lists only the conversations it may read, newest
first unless asked, a page at a time; the responses of a conversation are
those made in it, and a conversation the caller may not read is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from keyed_app import answered, keyed_app
from starlette.testclient import TestClient

from ferryman.testing import ScriptedModel, ScriptedReply
from inprocess import check_script

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"


@dataclass
class Callers:
    http: httpx.AsyncClient
    model: ScriptedModel
    keys: dict[str, dict[str, str]]

    async def ok(self, method: str, url: str, who: str = "alice", status: int = 200, **kwargs: Any) -> Any:
        return await answered(self.http, method, url, self.keys[who], status, **kwargs)

    async def conversations(self, who: str, count: int) -> list[str]:
        """``count`` new conversations of ``who``, oldest first."""
        return [(await self.ok("POST", "/v1/conversations", who, json={}))["id"] for _ in range(count)]

    async def respond(self, conversation_id: str | None, who: str = "alice") -> str:
        self.model.enqueue(ScriptedReply(text="ok"))
        body: dict[str, Any] = {"model": MODEL, "input": "hi"}
        if conversation_id is not None:
            body["conversation"] = conversation_id
        return str((await self.ok("POST", "/v1/responses", who, json=body))["id"])

    async def all_pages(self, url: str, who: str = "alice", **params: Any) -> list[list[str]]:
        """The ids of every page of a listing, following ``last_id`` until ``has_more`` is false."""
        pages: list[list[str]] = []
        while True:
            listing = await self.ok("GET", url, who, params=params)
            assert listing["object"] == "list"
            ids = [item["id"] for item in listing["data"]]
            assert (listing["first_id"], listing["last_id"]) == ((ids[0], ids[-1]) if ids else (None, None))
            pages.append(ids)
            if not listing["has_more"]:
                return pages
            params = {**params, "after": listing["last_id"]}


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def callers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callers]:
    scripted = ScriptedModel()
    async with keyed_app(request.param, tmp_path, scripted, ("alice", "bob")) as (_, http, bearer):
        yield Callers(http, scripted, bearer)
    check_script(request, scripted.script)


async def test_each_caller_lists_its_own_conversations_newest_first_a_page_at_a_time(callers: Callers) -> None:
    alices = await callers.conversations("alice", 3)
    bobs = await callers.conversations("bob", 2)
    alices += await callers.conversations("alice", 2)  # after bob's: his are filtered out between hers

    assert await callers.all_pages("/v1/conversations", limit=2) == [alices[:2:-1], alices[2:0:-1], alices[:1]]
    assert await callers.all_pages("/v1/conversations", order="asc", limit=3) == [alices[:3], alices[3:]]
    assert await callers.all_pages("/v1/conversations", "bob") == [bobs[::-1]]
    # A page of exactly what is left says there is no more.
    assert await callers.all_pages("/v1/conversations", limit=5) == [alices[::-1]]


async def test_a_listed_conversation_is_the_conversation_as_got(callers: Callers) -> None:
    created = await callers.ok("POST", "/v1/conversations", json={"metadata": {"topic": "tides"}})
    listing = await callers.ok("GET", "/v1/conversations")
    assert listing["data"] == [created] == [await callers.ok("GET", f"/v1/conversations/{created['id']}")]


async def test_deleted_and_forked_conversations_leave_and_join_the_list(callers: Callers) -> None:
    first, second = await callers.conversations("alice", 2)
    item = {"type": "message", "role": "user", "content": "hello"}
    [added] = (await callers.ok("POST", f"/v1/conversations/{first}/items", json={"items": [item]}))["data"]
    fork = await callers.ok("POST", f"/v1/conversations/{first}/fork", json={"item_id": added["id"]})
    await callers.ok("DELETE", f"/v1/conversations/{second}")
    assert await callers.all_pages("/v1/conversations") == [[fork["id"], first]]


async def test_a_cursor_the_caller_may_not_read_and_a_limit_too_large_are_refused(callers: Callers) -> None:
    [bobs] = await callers.conversations("bob", 1)
    missing = await callers.ok("GET", "/v1/conversations", params={"after": bobs}, status=404)
    assert bobs in missing["error"]["message"]
    for bad in ({"limit": 101}, {"limit": 0}, {"order": "sideways"}):
        await callers.ok("GET", "/v1/conversations", params=bad, status=400)


async def test_responses_are_listed_by_conversation(callers: Callers) -> None:
    tides, other = await callers.conversations("alice", 2)
    in_tides = [await callers.respond(tides), await callers.respond(other), await callers.respond(tides)]
    outside = await callers.respond(None)
    del in_tides[1]

    pages = await callers.all_pages("/v1/responses", conversation_id=tides, limit=1)
    assert pages == [[in_tides[1]], [in_tides[0]]]
    assert await callers.all_pages("/v1/responses", conversation_id=tides, order="asc") == [in_tides]
    everything = await callers.all_pages("/v1/responses")
    assert outside in everything[0] and len(everything[0]) == 4
    # A cursor from another conversation is no place in this one.
    await callers.ok("GET", "/v1/responses", params={"conversation_id": tides, "after": outside}, status=404)


async def test_responses_of_a_conversation_the_caller_may_not_read_are_missing(callers: Callers) -> None:
    [tides] = await callers.conversations("alice", 1)
    await callers.respond(tides)
    refused = await callers.ok("GET", "/v1/responses", "bob", params={"conversation_id": tides}, status=404)
    assert tides in refused["error"]["message"]
    await callers.ok("GET", "/v1/responses", params={"conversation_id": "conv_nowhere"}, status=404)
    await callers.ok("DELETE", f"/v1/conversations/{tides}")
    await callers.ok("GET", "/v1/responses", params={"conversation_id": tides}, status=404)


def test_without_authentication_every_conversation_is_listed(http: TestClient) -> None:
    created = [http.post("/v1/conversations", json={}).json()["id"] for _ in range(2)]
    listing = http.get("/v1/conversations", params={"limit": 100}).json()
    listed = [item["id"] for item in listing["data"]]
    assert listed[:2] == created[::-1]
