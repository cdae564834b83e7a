"""Another principal's shield is unusable: not by an agent, a response's guardrails, nor moderations.

Each refusal reads like one for a shield nobody registered, so B learns nothing of A's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from tests.inprocess import scripted_provider, serving
from tests.integration.test_access_control import A, B, StaticTokens

from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply

pytestmark = pytest.mark.anyio

LOCAL = {"provider_id": "ferryman-local"}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    services = build_services(
        SqliteStore(str(tmp_path / "shields.db")),
        [scripted_provider(Script(default_reply=ScriptedReply(text="ok")))],
        sole_process=True,
        authenticator=StaticTokens(),
    )
    async with serving(services) as http:
        assert (await http.post("/v1/shields", json={"shield_id": "alice-shield", **LOCAL}, headers=A)).is_success
        yield http


def _same_refusal(theirs: httpx.Response, nobodys: httpx.Response) -> None:
    assert theirs.status_code == nobodys.status_code == 400
    assert theirs.json()["error"]["message"].replace("alice-shield", "X") == nobodys.json()["error"]["message"].replace(
        "nobody-shield", "X"
    )


async def test_an_agent_cannot_name_anothers_shield(served: httpx.AsyncClient) -> None:
    def agent(shield: str) -> dict[str, object]:
        return {"agent_config": {"model": "scripted-model", "instructions": "x", "input_shields": [shield]}}

    assert (await served.post("/v1/agents", json=agent("alice-shield"), headers=A)).is_success
    theirs = await served.post("/v1/agents", json=agent("alice-shield"), headers=B)
    _same_refusal(theirs, await served.post("/v1/agents", json=agent("nobody-shield"), headers=B))


async def test_a_response_cannot_name_anothers_guardrail(served: httpx.AsyncClient) -> None:
    def response(shield: str) -> dict[str, object]:
        return {"model": "scripted-model", "input": "hi", "guardrails": [shield], "store": False}

    theirs = await served.post("/v1/responses", json=response("alice-shield"), headers=B)
    _same_refusal(theirs, await served.post("/v1/responses", json=response("nobody-shield"), headers=B))


async def test_moderations_cannot_use_anothers_shield(served: httpx.AsyncClient) -> None:
    theirs = await served.post("/v1/moderations", json={"input": "x", "model": "alice-shield"}, headers=B)
    _same_refusal(
        theirs, await served.post("/v1/moderations", json={"input": "x", "model": "nobody-shield"}, headers=B)
    )
    mine = await served.post("/v1/moderations", json={"input": "x", "model": "alice-shield"}, headers=A)
    assert mine.status_code == 200 and mine.json()["results"][0]["flagged"] is False
