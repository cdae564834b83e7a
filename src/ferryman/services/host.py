"""What both façades run turns with: storage, the engine, this process's runner, leases and the fan-out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ferryman.coordination.base import CancelTurns, Fanout
from ferryman.engine.channel import TurnChannel, TurnRunner
from ferryman.engine.loop import TurnEngine
from ferryman.storage.base import Store

from .leases import TurnLeases

Publish = Callable[[int, str], Awaitable[None]]
"""Sends one numbered SSE frame live."""


@dataclass(frozen=True)
class TurnHost:
    """The pieces the Agents API and the Responses API share to run turns.

    Attributes:
        store: The storage backend.
        engine: The turn engine.
        runner: The turns running in this process.
        leases: Leases of running turns.
        fanout: Live events and notices shared with other replicas.
    """

    store: Store
    engine: TurnEngine
    runner: TurnRunner
    leases: TurnLeases
    fanout: Fanout

    def publisher(self, stream: str, channel: TurnChannel) -> Publish:
        """Where a running turn's frames go: to other replicas through the fan-out, and to this process's readers."""

        async def publish(seq: int, frame: str) -> None:
            self.fanout.publish(stream, seq, frame)
            await channel.publish(frame)

        return publish

    async def cancel_everywhere(self, owner: str, reason: str) -> None:
        """Cancel the turns run for ``owner`` here (waiting until they recorded it) and on every other replica."""
        await self.runner.cancel_owned_by(owner, reason)
        await self.fanout.notify(CancelTurns(owner, reason))
