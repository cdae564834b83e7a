"""Reading server-sent events in tests: ``httpx-sse`` decodes them, as the CLI and the benchmark do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource


@dataclass(frozen=True)
class Frame:
    """One event as it went over the wire: its ``id:``, ``event:`` name (``message`` when absent) and ``data:``."""

    id: str
    event: str
    data: str

    def json(self) -> Any:
        """The decoded ``data``."""
        return json.loads(self.data)


def frames(response: httpx.Response) -> Iterator[Frame]:
    """The events of a response, streamed or already read, as they arrive.

    Fails unless the response is ``text/event-stream``. Starlette's ``TestClient``
    answers with ``httpx2`` responses, which read alike.
    """
    for sse in EventSource(response).iter_sse():
        yield Frame(sse.id, sse.event, sse.data)


async def aframes(response: httpx.Response) -> AsyncIterator[Frame]:
    """The events of a streamed response of an ``httpx.AsyncClient``, as they arrive."""
    async for sse in EventSource(response).aiter_sse():
        yield Frame(sse.id, sse.event, sse.data)
