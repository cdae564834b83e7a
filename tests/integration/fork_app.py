"""The app the fork tests drive: a server on one storage backend, its scripted model and its (unchecked) store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import message_text, session_url, turn_url, user
from storage_backends import unopened_store

from ferryman.server.app import build_services
from ferryman.storage.base import Store
from ferryman.testing import Script
from inprocess import scripted_provider, serving

WAIT_SECONDS = 20


class App:
    """The client of a server on one backend, the script its model answers from, and its (unchecked) store."""

    def __init__(self, http: httpx.AsyncClient, script: Script, store: Store) -> None:
        self.http, self.script, self.store = http, script, store

    async def turn(self, agent_id: str, session_id: str, text: str) -> dict[str, Any]:
        answer = await self.http.post(turn_url(agent_id, session_id), json={"messages": [user(text)], "stream": False})
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    async def session(self, agent_id: str, session_id: str) -> dict[str, Any]:
        found = await self.http.get(session_url(agent_id, session_id))
        assert found.status_code == 200, found.text
        return found.json()  # type: ignore[no-any-return]

    async def prompt(self, n: int) -> dict[str, Any]:
        """The model's ``n``-th request (from 1)."""
        async with asyncio.timeout(WAIT_SECONDS):
            return (await self.script.wait_for_requests(n))[n - 1]


@pytest.fixture(name="app", params=["sqlite", "postgres", "redis"])
async def app_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[App]:
    script = Script()
    async with unopened_store(request.param, tmp_path) as store:
        services = build_services(store, [scripted_provider(script)], sole_process=True)
        async with serving(services) as http:
            yield App(http, script, store)
    script.check()


def texts(request: dict[str, Any]) -> list[str]:
    """The texts of a prompt's user and assistant messages, in order."""
    return [message_text(m) for m in request["messages"] if m["role"] in ("user", "assistant")]
