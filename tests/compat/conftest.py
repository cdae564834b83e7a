"""Fixtures for driving ferryman with the real ``llama_stack_client`` package."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from llama_stack_client import LlamaStackClient

from support import WEATHER_TOOL

MODEL_ID = "scripted-model"


@pytest.fixture()
def client(base_url: str) -> Iterator[LlamaStackClient]:
    """A client that never retries, so that every test sees exactly one request per call.

    The library's default (``max_retries=2``) re-sends requests answered 408, 409,
    429 or 5xx after a back-off; the tests that are about that behaviour build
    their own client.
    """
    with LlamaStackClient(base_url=base_url, max_retries=0) as llama:
        yield llama


@dataclass(frozen=True)
class Conversation:
    """An agent and one session of it."""

    agent_id: str
    session_id: str


def open_conversation(client: LlamaStackClient, **config: object) -> Conversation:
    """Create an agent on the scripted model (``config`` overrides) and a session of it."""
    agent_config = {"model": MODEL_ID, "instructions": "You are a test agent.", **config}
    agent = client.agents.create(agent_config=agent_config)  # type: ignore[arg-type]
    session = client.agents.session.create(agent_id=agent.agent_id, session_name="compat")
    return Conversation(agent.agent_id, session.session_id)


@pytest.fixture()
def chat(client: LlamaStackClient) -> Conversation:
    """A session of an agent without tools."""
    return open_conversation(client)


@pytest.fixture()
def weather_chat(client: LlamaStackClient) -> Conversation:
    """A session of an agent with the client-side ``get_weather`` tool."""
    return open_conversation(client, client_tools=[WEATHER_TOOL])
