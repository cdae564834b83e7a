"""A turn's events as numbered SSE frames: published live, stored for replay by Last-Event-ID."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from ferryman.api.agents import TurnEvent, TurnStreamChunk
from ferryman.engine.events import EngineEvent, TurnFailed

from .host import Publish


def sse_frame(seq: int, event: EngineEvent) -> str:
    """One SSE frame of a turn event; a failure becomes an ``error`` object."""
    if isinstance(event, TurnFailed):
        body = json.dumps({"error": {"code": event.code, "message": event.message, "turn_id": event.turn_id}})
    else:
        body = TurnStreamChunk(event=TurnEvent(payload=event)).model_dump_json()
    return f"id: {seq}\ndata: {body}\n\n"


class TurnFrames:
    """Numbers one run of a turn's events, from ``first_seq`` (a resume continues the numbering).

    Args:
        first_seq: The number of the run's first event.
        publish: Where each frame goes live, with its number.
    """

    def __init__(self, first_seq: int, publish: Publish) -> None:
        self.first_seq = first_seq
        self.frames: list[str] = []
        self._publish = publish

    async def on_event(self, event: EngineEvent) -> None:
        """Frame, keep and publish one engine event."""
        seq = self.first_seq + len(self.frames)
        frame = sse_frame(seq, event)
        self.frames.append(frame)
        await self._publish(seq, frame)

    @property
    def last_seq(self) -> int:
        """The number of the latest event (``first_seq - 1`` before any)."""
        return self.first_seq + len(self.frames) - 1


async def chained(stored: list[str], live: AsyncIterator[str]) -> AsyncIterator[str]:
    """Stored frames, then the live ones."""
    for frame in stored:
        yield frame
    async for frame in live:
        yield frame
