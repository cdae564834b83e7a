"""Fixtures for driving ferryman with the real ``llama_stack_client`` package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from compat_support import Conversation, open_conversation
from llama_stack_client import LlamaStackClient

from inprocess import BASE_URL, Served
from support import WEATHER_TOOL


@pytest.fixture()
def client(model: Served) -> Iterator[LlamaStackClient]:
    """A client that never retries, so that every test sees exactly one request per call.

    The library's default (``max_retries=2``) re-sends requests answered 408, 409,
    429 or 5xx after a back-off; the tests that are about that behaviour build
    their own client.
    """
    with LlamaStackClient(base_url=BASE_URL, http_client=model.http_client(), max_retries=0) as llama:
        yield llama


@pytest.fixture()
def chat(client: LlamaStackClient) -> Conversation:
    """A session of an agent without tools."""
    return open_conversation(client)


@pytest.fixture()
def weather_chat(client: LlamaStackClient) -> Conversation:
    """A session of an agent with the client-side ``get_weather`` tool."""
    return open_conversation(client, client_tools=[WEATHER_TOOL])
