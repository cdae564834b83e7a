"""Apps served in this process (httpx over ASGI), their lifespan running: for route behaviour no real process needs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from ferryman.inference.base import ChatChunk, ChatRequest
from ferryman.server.app import Services, create_app
from ferryman.testing import ScriptedModel


class AskedModel(ScriptedModel):
    """The scripted model, telling when it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        self.asked.set()
        async for chunk in super().stream_chat(request):
            yield chunk


@asynccontextmanager
async def serving(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app over ``services``, with the app's lifespan (store, fan-out, leases, models) running."""
    app = create_app(services)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://ferryman", timeout=30) as client,
    ):
        yield client


async def agent_and_session(http: httpx.AsyncClient, model: str = "scripted-model") -> tuple[str, str]:
    """Create an agent of ``model`` and a session of it."""
    created = await http.post("/v1/agents", json={"agent_config": {"model": model, "instructions": "Be brief."}})
    assert created.status_code == 200, created.text
    agent_id = created.json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    assert session.status_code == 200, session.text
    return agent_id, session.json()["session_id"]
